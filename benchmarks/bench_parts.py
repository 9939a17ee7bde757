"""Sub-questions: how close a part's vector is to its question's, and what each way of searching the parts
does to quality (compound questions set the search's p95).

    python benchmarks/bench_parts.py [--parts cosine,quality] [--sets demo-tune,demo-holdout,autorag,korquad]

cosine: over bench_latency's 566 questions, e5-small's cosine between a question and each of its parts,
for the parts that share the question's vector (channels.shares_query_vector) and the others.
quality: only the compound questions of each set (a question without parts searches the same way under
every variant), scored with tuner.evaluation.evaluate's own code, default config, no reranker:
  every     every part embedded (before the shipped rule)
  shipped   a part holding half the question or more (two words or more) takes the question's vector
  keyword   no part embedded: each part searched by keywords only
  none      no decomposed channel at all
Raw figures land in runs/bench/parts.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, write_result  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))
SETS = {
    "demo-tune": (ROOT / "runs" / "bench" / "demo" / "index.sqlite", ROOT / "experiments" / "gold" / "demo-tune.yaml"),
    "demo-holdout": (ROOT / "runs" / "bench" / "demo" / "index.sqlite", ROOT / "experiments" / "gold" / "demo-holdout.yaml"),
    "autorag": (ROOT / "runs" / "autorag.sqlite", DATA / "autorag-ko" / "beir"),
    "korquad": (ROOT / "runs" / "korquad.sqlite", DATA / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json"),
}
VARIANTS = ("every", "shipped", "keyword", "none")


def cosines() -> dict:
    from benchmarks.bench_latency import load_questions
    from search_core.search import channels as ch
    from search_core.search.limits import cap_query
    from search_core.models import get_embedder
    from search_core.models.threads import embed_queries
    emb = get_embedder("e5-small")
    groups: dict[str, list[float]] = {"shares": [], "own": [], "one_word_half": []}
    for q in (q for qs in load_questions(300).values() for q in qs):
        capped = cap_query(q)
        parts = ch.split_query(capped)
        if not parts:
            continue
        vecs = embed_queries(emb, [capped, *parts])
        for part, v in zip(parts, vecs[1:]):
            cos = float(v @ vecs[0])
            if ch.shares_query_vector(part, capped):
                groups["shares"].append(cos)
            elif len(part) >= ch.DOMINANT_PART * len(capped):
                groups["one_word_half"].append(cos)
            else:
                groups["own"].append(cos)
    out = {}
    for name, xs in groups.items():
        xs = sorted(xs)
        out[name] = {"n": len(xs)} if not xs else {
            "n": len(xs), "p5": round(xs[len(xs) // 20], 3), "p50": round(statistics.median(xs), 3), "min": round(xs[0], 3)}
    print("[cosine]", out, flush=True)
    return out


def _variant(name: str, searcher_cls, ch):
    """Patches for one variant (restored by the caller): (object, attribute, value) triples."""
    if name == "every":
        return [(ch, "shares_query_vector", lambda part, query: False)]
    if name == "keyword":
        real = searcher_cls._decomposed
        return [(ch, "shares_query_vector", lambda part, query: False),
                (searcher_cls, "_decomposed", lambda self, sparse, dense, depth: real(self, sparse, [[] for _ in dense], depth))]
    if name == "none":
        return [(searcher_cls, "_decomposed", lambda self, sparse, dense, depth: [])]
    return []


def quality(set_names: list[str]) -> dict:
    from search_core.search import channels as ch
    from search_core.config import SearchConfig
    from search_core.search.limits import cap_query
    from search_core.search.pipeline import Searcher
    from tuner.evaluation.evaluate import run_queries, summarize
    from tuner.data.gold import load_gold
    out = {}
    for name in set_names:
        db, gold_path = SETS[name]
        gold = load_gold(gold_path)
        compound = [q for q in gold.questions if q.level != "probe" and ch.split_query(cap_query(q.query))]
        sub = dataclasses.replace(gold, questions=tuple(compound))
        s = Searcher(db)
        cfg = SearchConfig(embedder=s.embedder_name)
        out[name] = {"answerable": sum(q.level != "probe" for q in gold.questions), "compound": len(compound)}
        for v in VARIANTS:
            patches = _variant(v, Searcher, ch)
            saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patches]
            for obj, attr, val in patches:
                setattr(obj, attr, val)
            try:
                rows = run_queries(s, sub, cfg)
            finally:
                for obj, attr, val in saved:
                    setattr(obj, attr, val)
            m = summarize(rows)
            out[name][v] = {"hit@5": sum(int(r.metrics()["hit@5"]) for r in rows), "hit@1": m.get("hit@1"),
                            "mrr": m.get("mrr")}
            print(f"[quality] {name} {v}: {out[name][v]} of {len(compound)} compound", flush=True)
        s.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="cosine,quality")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--out", default="parts")
    args = ap.parse_args()
    parts, result = set(args.parts.split(",")), {}
    if "cosine" in parts:
        result["cosine"] = cosines()
    if "quality" in parts:
        names = args.sets.split(",")
        unknown = [n for n in names if n not in SETS]
        if unknown:
            raise SystemExit(f"unknown set(s) {unknown}; sets: {', '.join(SETS)}")
        result["quality"] = quality(names)
    print("written", write_result(args.out, result))


if __name__ == "__main__":
    main()
