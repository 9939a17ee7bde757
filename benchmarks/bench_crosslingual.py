"""Cross-lingual questions (level XL: an English question about a Korean note, or the other way) with the
query expanded by the terms the vault itself pairs (search_core.ingest.term_pairs): hit@5 and MRR@10 per
level, with and without the expansion, on tuning parts (where a setting is chosen) and holdout parts (where it
is checked), under the shipped default config.

    python benchmarks/bench_crosslingual.py [--cache /work/cache/lead] [--min-count 1] [--max-terms 4]

Indexes (built elsewhere, copied under --cache): johngrib-536.sqlite (a 536-note johngrib subset holding the
spent sets' gold notes), demo.sqlite, baekjungho.sqlite, hoonti06.sqlite. johngrib-next is never read.
The pairs are mined from each index's own chunk texts: nothing is fitted on the questions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, write_result  # noqa: E402

SETS = ROOT / "benchmarks" / "sets"
GOLD = ROOT / "experiments" / "gold"
# (vault, index file, tuning sets, holdout sets)
PARTS = (
    ("demo", "demo.sqlite", [GOLD / "demo-tune.yaml"], [GOLD / "demo-holdout.yaml"]),
    ("johngrib", "johngrib-536.sqlite", [SETS / "johngrib-tune.yaml", SETS / "johngrib-week.yaml"],
     [SETS / f"johngrib-{n}.yaml" for n in ("holdout", "blind", "final", "last")]),
    ("baekjungho", "baekjungho.sqlite", [SETS / "baekjungho-tune.yaml"], []),
    ("hoonti06", "hoonti06.sqlite", [], [SETS / "hoonti06-final.yaml"]),
)


def with_pair_table(db: Path) -> int:
    """Add the pair table to an index written before it (what any `autoresearch index` run does); its size."""
    from search_core.index import pair_table
    from search_core.index.store import atomic, connect
    conn = connect(db)
    try:
        if not pair_table.is_built(conn):
            with atomic(conn):
                pair_table.build(conn)
        return len(pair_table.load(conn))
    finally:
        conn.close()


def score(searcher, cfg, questions) -> dict:
    """Per level and overall: n, hit@5, MRR@10 of the answerable questions under `cfg`, and how many of them
    the expansion changed."""
    from search_core.ingest.term_pairs import expand_query
    pairs = searcher.view.term_pairs()
    rows = []
    for q in questions:
        ranked = list(searcher.search(q.query, cfg).ranked[:10])
        first = next((i + 1 for i, nid in enumerate(ranked) if nid in q.gold), None)
        expanded = cfg.pair_terms > 0 and expand_query(q.query, pairs, max_terms=cfg.pair_terms) != q.query
        rows.append((q.level, first is not None and first <= 5, 1.0 / first if first else 0.0, expanded))
    out = {}
    for level in sorted({r[0] for r in rows}) + ["all"]:
        sel = [r for r in rows if level == "all" or r[0] == level]
        out[level] = {"n": len(sel), "hit@5": sum(r[1] for r in sel) / len(sel),
                      "mrr": sum(r[2] for r in sel) / len(sel), "expanded": sum(r[3] for r in sel)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/lead"))
    ap.add_argument("--pair-terms", type=int, default=2)
    ap.add_argument("--vaults", default=",".join(p[0] for p in PARTS))
    ap.add_argument("--parts", default="tune,holdout", help="tune to compare settings without reading a holdout")
    args = ap.parse_args()
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from tuner.data.gold import load_gold

    result = {"pair_terms": args.pair_terms, "vaults": {}}
    for name, file, tune, hold in PARTS:
        if name not in args.vaults.split(","):
            continue
        db = args.cache / file
        res = {"pairs": with_pair_table(db)}
        searcher = Searcher(db)
        off = SearchConfig(embedder=searcher.embedder_name, pair_terms=0)
        for part, sets in (("tune", tune), ("holdout", hold)):
            if not sets or part not in args.parts.split(","):
                continue
            qs = [q for p in sets for q in load_gold(p).answerable()]
            before = score(searcher, off, qs)
            after = score(searcher, off.replace(pair_terms=args.pair_terms), qs)
            res[part] = {"sets": [p.name for p in sets], "before": before, "after": after}
            for level in after:
                b, a = before[level], after[level]
                print(f"{name:<10} {part:<7} {level:<6} n {b['n']:>3} expanded {a['expanded']:>3}  "
                      f"hit@5 {b['hit@5']:.3f} -> {a['hit@5']:.3f}  MRR {b['mrr']:.3f} -> {a['mrr']:.3f}", flush=True)
        result["vaults"][name] = res
    print(write_result(f"crosslingual-t{args.pair_terms}-{args.parts.replace(',', '+')}", result))


if __name__ == "__main__":
    main()
