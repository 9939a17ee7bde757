"""The evaluation harness on real benchmarks: speed of a 114-question evaluation, the metric computation
alone, and hit@5 / MRR / nDCG@10 for each channel alone and the default fusion, on autorag-ko and
KorQuAD 1.0 dev (read as it is: paragraphs are the corpus, questions the queries).

    python benchmarks/bench_eval.py [--sets autorag,korquad] [--korquad-questions N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, summary, write_result  # noqa: E402

CHANNEL_ALONE = {
    "dense": dict(w_dense=1.0, w_sparse=0.0, w_decomposed=0.0, w_entity=0.0),
    "sparse": dict(w_dense=0.0, w_sparse=1.0, w_decomposed=0.0, w_entity=0.0),
    "decomposed": dict(w_dense=0.0, w_sparse=0.0, w_decomposed=1.0, w_entity=0.0),
    "entity": dict(w_dense=0.0, w_sparse=0.0, w_decomposed=0.0, w_entity=1.0),
    "fusion (default)": {},
}


def run_set(name, corpus, gold_path, n_questions=None):
    from search_core.config import SearchConfig
    from search_core.index.indexer import index_vault
    from search_core.search.pipeline import Searcher
    from tuner.evaluation.evaluate import RetrievalCache, build_result, evaluate, run_queries
    from tuner.data.gold import GoldSet, load_gold

    db = ROOT / "runs" / "bench" / f"{name}.sqlite"
    t0 = time.perf_counter()
    rep = index_vault(corpus, db)
    print(f"[{name}] index: {rep.notes} notes, {rep.chunks} chunks, {rep.embedded} embedded now, "
          f"{time.perf_counter() - t0:.0f}s", flush=True)
    gold = load_gold(gold_path)
    if n_questions and n_questions < len(gold.questions):
        qs = random.Random(0).sample(list(gold.questions), n_questions)
        gold = GoldSet(f"{gold.name}-sample{n_questions}", gold.source, tuple(qs), gold.vault)
    s = Searcher(db)
    base = SearchConfig(embedder=s.embedder_name, exclude_nav=False)
    s.search("warm up")
    # 1. a whole evaluation, search included, on a warm index (no cache)
    t0 = time.perf_counter()
    res = evaluate(s, gold, base, audit=False)
    eval_s = time.perf_counter() - t0
    # 2. the metric computation alone, from the per-question rows
    cache = RetrievalCache()            # filled once here, re-fused for every table row below
    rows = run_queries(s, gold, base, cache)
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        build_result(gold, base, {}, rows)
        times.append((time.perf_counter() - t0) * 1000)
    # 3. each channel alone and the default fusion, from one cached retrieval per question
    table = {}
    for label, weights in CHANNEL_ALONE.items():
        r = evaluate(s, gold, base.replace(**weights), cache=cache, audit=False).to_json()
        table[label] = {"hit@5": r["hit@5"], "mrr": r["mrr"], "ndcg@10": r["ndcg@10"]}
    print(f"[{name}] {len(gold.questions)} questions: evaluation {eval_s:.2f} s (search included), "
          f"metrics alone p50 {summary(times)['p50']} ms", flush=True)
    print(f"{'ranking':<18} {'hit@5':>6} {'MRR':>6} {'nDCG@10':>8}")
    for label, m in table.items():
        print(f"{label:<18} {m['hit@5']:>6.3f} {m['mrr']:>6.3f} {m['ndcg@10']:>8.3f}", flush=True)
    return {"questions": len(gold.questions), "eval_seconds": round(eval_s, 2), "metrics_ms": summary(times),
            "latency_ms": res.latency_ms.get("total"), "table": table}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="autorag,korquad")
    ap.add_argument("--korquad-questions", type=int, default=0, help="0 = all 5,774")
    args = ap.parse_args()
    out = {}
    if "autorag" in args.sets:
        beir = DATA / "autorag-ko" / "beir"
        out["autorag"] = run_set("autorag", beir, beir)
    if "korquad" in args.sets:
        kq = DATA / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json"
        out["korquad"] = run_set("korquad", kq, kq, args.korquad_questions or None)
    print("written", write_result("eval-" + args.sets.replace(",", "-"), out))


if __name__ == "__main__":
    main()
