"""What the gate features add to a search: CPU time of gate_features() per query, first sight.

Every query is timed with the view's document-frequency cache emptied first, so each call pays for
its own trigram lookups (the worst case: a query nobody asked before). Two ways of reading the
document frequencies, on the same queries and the same index:
  table   the `trigram_df` table the index writer stores (search_core.index.term_df), what searches use
  vocab   FTS5's vocabulary (fts5vocab), what indexes without the table fall back to
  read    the table, computing only what a search computes (features_read: GATE_FEATURES, the deciding gate's own,
          ALWAYS); `table` and `vocab` compute every feature, the candidates no gate reads included
  note_words  `read` and the candidates NOTE_WORD_FEATURES (the first result's whole note against the query's
          content words, the unseen stems): what a gate reading them would cost beside `read`
Both modes read the word table (search_core.index.word_df, unknown_names) the same way: stored in `table` mode,
absent (the trigram fallback over the vocabulary) in `vocab` mode, which is an index older than both tables.
`names` times unknown_names() alone at first sight with the word table (the fourth round's feature);
`decide` the gate's decision on top of the features (the model choose_gate picked, and its GateDecision).
The queries are the demo gold sets' 112 questions (Korean, English, mixed), over every --db given.

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD nice -n 10 python benchmarks/bench_gate_cost.py \
        --db runs/demo.sqlite --db runs/johngrib.sqlite
An index built before the table existed gets it from any `autoresearch index` run on it.
Raw results: runs/bench/gate-cost.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, summary, write_result  # noqa: E402

from search_core.index import term_df  # noqa: E402
from search_core.config import SearchConfig  # noqa: E402
from search_core.index import word_df  # noqa: E402
from search_core.gate.features import NOTE_WORD_FEATURES, features_read, gate_features, unknown_names  # noqa: E402
from search_core.search.pipeline import Searcher  # noqa: E402
from tuner.data.gold import load_gold  # noqa: E402

GOLD = ROOT / "experiments" / "gold"


def measure(db: str, queries: list[str], repeats: int) -> dict:
    s = Searcher(db)
    cfg = SearchConfig()
    results = [s.rank(s.retrieve(q, cfg.depth), cfg, snippets=False) for q in queries]
    out = {"db": db, "queries": len(queries), "table_current": term_df.is_current(s.conn),
           "word_table_current": word_df.is_current(s.conn)}
    model = s.gate_for(cfg.reranker).model
    read = features_read(model.features if model is not None else ())
    only = {"read": read, "note_words": read | frozenset(NOTE_WORD_FEATURES)}
    for mode in ("table", "read", "note_words", "vocab"):
        if mode != "vocab" and not out["table_current"]:
            continue
        cpu = []
        for _ in range(repeats):
            for res in results:
                # first sight of every term: the caches term_df.counts and gate_features keep on the view
                caches = s.view.caches
                caches.term_df.clear()
                caches.term_df_stored = mode != "vocab"
                caches.short_df.clear()
                caches.word_df.clear()
                caches.word_df_stored = mode != "vocab" and out["word_table_current"]
                c0 = time.process_time()
                gate_features(res.query, res.retrieval.lists, res.hits, s.view, conn=s.conn,
                              only=only.get(mode))
                cpu.append((time.process_time() - c0) * 1000)
        out[mode] = summary(cpu)
    # the decision on top of the features: the gate chosen for the search's reranker (choose_gate's choice,
    # the shipped default here) and its GateDecision
    cpu = []
    for _ in range(repeats):
        for res in results:
            g = res.gate
            c0 = time.process_time()
            s.gate_for(cfg.reranker).decide(g.features, g.top_score, g.threshold, bool(res.hits), cfg.reranker)
            cpu.append((time.process_time() - c0) * 1000)
    out["decide"] = {**summary(cpu), "gate": s.gate_choice.describe()}
    if out["word_table_current"]:
        cpu = []
        for _ in range(repeats):
            for res in results:
                s.view.caches.word_df.clear()
                s.view.caches.word_df_stored = None       # is_current() read again, as on a new view
                c0 = time.process_time()
                unknown_names(s.view, s.conn, res.query)
                cpu.append((time.process_time() - c0) * 1000)
        out["names"] = summary(cpu)
    s.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", action="append", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    queries = [q.query for n in ("demo-tune", "demo-holdout", "demo-probes")
               for q in load_gold(GOLD / f"{n}.yaml").questions]
    out = {"load_average": os.getloadavg(), "repeats": args.repeats,
           "results": [measure(db, queries, args.repeats) for db in args.db]}
    out["load_average_after"] = os.getloadavg()
    for r in out["results"]:
        modes = ("table", "read", "note_words", "vocab", "names", "decide")
        print(r["db"], {m: (r[m]["p50"], r[m]["p95"]) for m in modes if m in r}, file=sys.stderr)
    print(write_result("gate-cost", out))


if __name__ == "__main__":
    main()
