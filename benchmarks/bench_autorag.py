"""hit@5 and MRR on the AutoRAG Korean retrieval set, for each channel alone and for the default fusion.

    python benchmarks/bench_autorag.py [--beir PATH] [--db PATH]

Each channel "alone" is its own ranked list, cut at 5 for hit@5 and at 10 for MRR@10.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, summary, write_result  # noqa: E402

PUBLISHED = {  # recall@5 (= hit@5, one relevant passage per question), from ../shared/data/SOURCES.md
    "paraphrase-multilingual-MiniLM-L12-v2": 0.4912, "multilingual-e5-large-instruct": 0.7632,
    "openai_embed_3_large": 0.8421, "gte-multilingual-base": 0.8596, "Upstage Embedding": 0.8947,
    "KU-HIAI-ONTHEIT-large-v1.1": 0.9298}


def load_beir(beir: Path):
    queries = {}
    for line in (beir / "queries.jsonl").open(encoding="utf-8"):
        if line.strip():
            row = json.loads(line)
            queries[str(row["_id"])] = row["text"]
    qrels: dict[str, set[str]] = {}
    with (beir / "qrels_test.tsv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row.get("score", 1)) > 0:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    return queries, qrels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--beir", type=Path, default=DATA / "autorag-ko" / "beir")
    ap.add_argument("--db", type=Path, default=ROOT / "runs" / "bench" / "autorag.sqlite")
    ap.add_argument("--embedder", default="e5-small")
    args = ap.parse_args()
    from search_core.config import SearchConfig
    from search_core.index.indexer import index_vault
    from search_core.search.pipeline import Searcher
    from tuner.evaluation.metrics import hit_at_k, mean, ndcg_at_k, reciprocal_rank

    t0 = time.perf_counter()
    rep = index_vault(args.beir, args.db, embedder=args.embedder)
    print(f"index: {rep.notes} passages, {rep.chunks} chunks, {rep.embedded} embedded, {time.perf_counter() - t0:.0f}s",
          flush=True)
    queries, qrels = load_beir(args.beir)
    s = Searcher(args.db)
    cfg = SearchConfig(embedder=s.embedder_name, exclude_nav=False)
    rows: dict[str, dict[str, list[float]]] = {}
    lat = []
    for qid, text in queries.items():
        rel = qrels.get(qid, set())
        t1 = time.perf_counter()
        r = s.retrieve(text, cfg.depth)
        res = s.rank(r, cfg)
        lat.append((time.perf_counter() - t1) * 1000)
        lists = {c: [h.note_id for h in hits] for c, hits in r.lists.items()}
        lists["fusion (default)"] = [f.id for f in res.fused]
        for name, ranked in lists.items():
            m = rows.setdefault(name, {"hit@5": [], "mrr@10": [], "ndcg@10": []})
            m["hit@5"].append(hit_at_k(ranked, rel, 5))
            m["mrr@10"].append(reciprocal_rank(ranked, rel, 10))
            m["ndcg@10"].append(ndcg_at_k(ranked, rel, 10))
    table = {name: {k: round(mean(v), 4) for k, v in m.items()} for name, m in rows.items()}
    print(f"\n{len(queries)} questions, embedder {s.embedder_name}")
    print(f"{'ranking':<22} {'hit@5':>6} {'MRR@10':>7} {'nDCG@10':>8}")
    for name, m in table.items():
        print(f"{name:<22} {m['hit@5']:>6.3f} {m['mrr@10']:>7.3f} {m['ndcg@10']:>8.3f}")
    print("\npublished (dense models alone, recall@5):", json.dumps(PUBLISHED, ensure_ascii=False))
    best_single = max(m["hit@5"] for n, m in table.items() if n != "fusion (default)")
    print(f"fusion beats every channel alone on hit@5: {table['fusion (default)']['hit@5'] > best_single}")
    out = write_result(f"autorag-{args.embedder}", {"embedder": s.embedder_name, "n": len(queries), "table": table,
                                                    "search_ms": summary(lat), "published": PUBLISHED})
    print("written", out)


if __name__ == "__main__":
    main()
