"""Does the shipped default gate transfer to sets it was not fitted on, and what fixes its scale on a new
vault without labels? Balanced accuracy and AUROC per set for the shipped default (P >= its threshold), the
cosine gate at 0.82, and threshold rules computed per vault.

The default (search_core/gate/gate_default.json, `fitted_on`) was fitted on demo-tune, demo-holdout,
demo-probes, demo-gate-tune, 300 KorQuAD rows and AutoRAG-ko's 114 questions (split 0: held-out PDFs as
probes). Sets here:
  demo-gate-holdout    30 + 30 near-topic probes on the demo vault; never fitted on (searched once before)
  autorag-ko           its 114 questions, probes by holding 20 % of the PDFs out of every channel list
                       (one index; seeds 1-5, not the fit's split 0). Its answerable questions WERE in the
                       default's fit: flagged "fitted on (other probes)"
  johngrib-tune        40 natural answerable + 20 probes on the johngrib wiki (may be looked at and fitted on)
  --final adds the blind sets, each searched once: johngrib-holdout (40 + 20), demo-gate-holdout2 (30 + 30)

Threshold rules (the model, its features and weights stay the shipped default's; only the cut moves):
  default          the shipped threshold (0.641)
  cosine 0.82      top cosine >= 0.82
  vault cut        computed at index time from the vault alone, no labels (self_rows): its own notes'
                   headings, summaries and a sentence of their text as queries (answerable), and the same
                   for 20 % of the notes held out of every channel list (probes, as `probes make` does);
                   the cut that best separates them
  vault quantile q the q-quantile of P over the vault's own answerable queries (q = 0.10, 0.20)
  vault shift      the default threshold moved on the logit scale by how far the vault's own answerable
                   queries' median sits from a reference's (the demo vault; the fit vaults demo + AutoRAG-ko)
  johngrib-tune cut  the cut fitted on johngrib-tune's labels (a reference: a user has no labels)

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD nice -n 5 python benchmarks/bench_gate_transfer.py \
        --demo-db runs/bench-demo.sqlite --autorag-db runs/autorag.sqlite --johngrib-db runs/johngrib.sqlite [--final]
Raw results (per question: keep them out of the repository): runs/bench/gate-transfer.json.

The final measurement of a new default on a blind set (searched once; each gate scored from the same searches):
    PYTHONPATH=$PWD python benchmarks/bench_gate_transfer.py --johngrib-db runs/johngrib.sqlite \
        --blind benchmarks/sets/johngrib-blind.yaml --gate old=OLD.json --gate new=NEW.json --out gate-blind
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, ROOT, write_result  # noqa: E402

from search_core.config import SearchConfig  # noqa: E402
from search_core.gate.model import DEFAULT_GATE_FILE, best_balanced_threshold, load_gate  # noqa: E402
from search_core.search.pipeline import Retrieval, Searcher  # noqa: E402
from tuner.data.gold import load_gold  # noqa: E402
from tuner.gate.metrics import auroc, balanced_accuracy  # noqa: E402

GOLD = ROOT / "experiments" / "gold"
SETS = ROOT / "benchmarks" / "sets"
COS = 0.82
SELF_NOTES = 200          # notes sampled per vault for its own queries (3 queries each at most)
SELF_HELD = 0.2           # share of them held out of every channel list: their queries are probes
QUANTILES = (0.10, 0.20)


def _rank(s, cfg, r: Retrieval, drop: set | None = None, doc_of=None):
    lists, held = r.lists, frozenset()
    if drop:
        held = frozenset(n for n in s.view.notes if (doc_of.get(n, n) if doc_of else n) in drop)
        lists = {c: [h for h in hits if h.note_id not in held] for c, hits in r.lists.items()}
    # the held-out notes also go to rank() as `exclude`, so the gate reads the vault without them
    res = s.rank(Retrieval(r.query, r.qvec, lists, r.timings_ms, r.subqueries), cfg, snippets=False, exclude=held)
    return res


def autorag_heldout(s, cfg, gold, doc_of: dict, seeds):
    """AutoRAG-ko with a fifth of its documents (PDFs) held out of every channel list, per seed: yields
    (seed, question, the ranked result, the question's gold documents, answerable). A question whose gold
    documents are all held out is a probe. Each question is retrieved once and ranked per seed."""
    docs = sorted(set(doc_of.values()))
    rets = [s.retrieve(q.query, cfg.depth) for q in gold.questions]
    for seed in seeds:
        held = set(random.Random(seed).sample(docs, round(0.2 * len(docs))))
        for q, r in zip(gold.questions, rets):
            gdocs = {doc_of.get(g, g) for g in q.gold}
            yield seed, q, _rank(s, cfg, r, held, doc_of), gdocs, not gdocs <= held


def _row(res, y, **extra):
    g = res.gate
    return {"y": int(y), "p": g.probability if g.probability is not None else 0.0, "cos": g.top_score,
            "inject_default": bool(g.inject), "kind": g.kind, **extra}


def gold_rows(s, cfg, gold) -> list[dict]:
    return [_row(s.rank(s.retrieve(q.query, cfg.depth), cfg, snippets=False), not q.is_probe, id=q.id, level=q.level)
            for q in gold.questions]


def beir_rows(s, cfg, folder: Path, seeds) -> dict[int, list[dict]]:
    """AutoRAG-ko: every query, with 20 % of the documents (passages sharing a title) dropped from every
    channel list per seed; a query whose gold is all dropped is a probe."""
    gold = load_gold(folder)
    doc_of = {nid: (n["title"] or nid) for nid, n in s.view.notes.items()}
    docs = sorted(set(doc_of.values()))
    rets = [s.retrieve(q.query, cfg.depth) for q in gold.questions]
    out = {}
    for seed in seeds:
        held = set(random.Random(seed).sample(docs, round(0.2 * len(docs))))
        rows = []
        for q, r in zip(gold.questions, rets):
            gdocs = {doc_of.get(g, g) for g in q.gold}
            rows.append(_row(_rank(s, cfg, r, held, doc_of), not gdocs <= held, id=q.id, level=q.level))
        out[seed] = rows
    return out


_SENT = re.compile(r"[^.!?。\n]{25,140}[.!?。]?")


def self_queries(s, n_notes: int = SELF_NOTES, seed: int = 0) -> list[tuple[str, str]]:
    """(note id, query) from the vault's own notes: a heading path's last part with the note title, the
    summary, and one sentence of the note's text. Navigation notes and empty notes are skipped."""
    rng = random.Random(seed)
    nav = s.nav_notes()
    ids = sorted(n for n in s.view.notes if n not in nav)
    ids = rng.sample(ids, min(n_notes, len(ids)))
    out = []
    for nid in ids:
        note = s.view.notes[nid]
        chunks = s.conn.execute("SELECT heading, text FROM chunks WHERE note_id = ? ORDER BY ord", (nid,)).fetchall()
        heads = [h.split(" > ")[-1].strip() for h, _ in chunks if h.strip()]
        if heads:
            out.append((nid, f"{note['title']} {rng.choice(heads)}"))
        elif note["title"] and note["title"] != nid:
            out.append((nid, note["title"]))
        if note.get("summary"):
            out.append((nid, note["summary"][:200]))
        sents = [m.group(0).strip() for _, t in chunks for m in _SENT.finditer(t or "")]
        sents = [x for x in sents if len(re.findall(r"\w", x)) >= 15 and "http" not in x and "{" not in x]
        if sents:
            out.append((nid, rng.choice(sents)))
    return out


def self_rows(s, cfg, doc_of=None, seed: int = 0) -> list[dict]:
    """The vault's own labelled rows, no person involved: its queries against the index (answerable) and,
    for 20 % of the sampled notes (documents), against the index without them (probes)."""
    qs = self_queries(s, seed=seed)
    docs = sorted({(doc_of or {}).get(n, n) for n, _ in qs})
    held = set(random.Random(seed + 1).sample(docs, round(SELF_HELD * len(docs))))
    rows = []
    for nid, q in qs:
        d = (doc_of or {}).get(nid, nid)
        r = s.retrieve(q, cfg.depth)
        if d in held:
            rows.append(_row(_rank(s, cfg, r, {d} | held, doc_of or {n: n for n in s.view.notes}), 0, note=nid))
        else:
            rows.append(_row(_rank(s, cfg, r), 1, note=nid))
    return rows


def rules_from_self(rows: list[dict], default_t: float) -> dict[str, float]:
    p = np.array([r["p"] for r in rows])
    y = np.array([r["y"] for r in rows])
    out = {"default": default_t}
    if y.any() and (~y.astype(bool)).any():
        out["vault cut"] = best_balanced_threshold(p, y)[0]
    for q in QUANTILES:
        out[f"vault quantile {q:.2f}"] = float(np.quantile(p[y == 1], q))
    return out


def _logit(p):
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def median_logit(rows: list[dict]) -> float:
    """Where the vault's own answerable queries sit on the model's logit scale."""
    return float(np.median(_logit([r["p"] for r in rows if r["y"] == 1])))


def shifted(threshold: float, delta: float) -> float:
    """The threshold moved by `delta` on the logit scale (the vault's own queries sit `delta` above the
    reference vaults' own queries)."""
    return float(1 / (1 + np.exp(-(_logit(threshold) + delta))))


def score(rows: list[dict], rules: dict[str, float]) -> dict:
    y = [r["y"] for r in rows]
    p = np.array([r["p"] for r in rows])
    cos = np.array([r["cos"] for r in rows])
    out = {"n": len(rows), "probes": len(rows) - sum(y), "auroc_model": round(auroc(p, y), 4),
           "auroc_cosine": round(auroc(cos, y), 4),
           "cosine 0.82": {"bacc": round(balanced_accuracy(cos >= COS, y), 4),
                           "answerable_injected": round(float((cos >= COS)[np.array(y) == 1].mean()), 4)}}
    for name, t in rules.items():
        inj = p >= t
        out[name] = {"threshold": round(float(t), 4), "bacc": round(balanced_accuracy(inj, y), 4),
                     "answerable_injected": round(float(inj[np.array(y) == 1].mean()), 4),
                     "probes_injected": round(float(inj[np.array(y) == 0].mean()), 4) if len(y) > sum(y) else None}
    return out


def blind(a) -> None:
    """The final measurement on one blind set: each question searched once (the shipped default's search;
    the gates read only its features), every --gate scored at its own threshold, and the cosine gate."""
    gates = {}
    for spec in a.gate:
        name, _, path = spec.partition("=")
        gates[name] = load_gate(path)
    s = Searcher(a.johngrib_db)
    s.warm_up()
    cfg = SearchConfig(embedder=s.embedder_name)
    gold = load_gold(Path(a.blind))
    rows = []
    for q in gold.questions:
        res = s.rank(s.retrieve(q.query, cfg.depth), cfg, snippets=False)
        rows.append({"id": q.id, "level": q.level, "y": int(not q.is_probe), "cos": res.gate.top_score,
                     **{n: g.probability(res.gate.features) for n, g in gates.items()}})
    s.close()
    y = np.array([r["y"] for r in rows])
    cos = np.array([r["cos"] for r in rows])
    out = {"set": gold.name, "answerable": int(y.sum()), "probes": int((1 - y).sum()),
           "cosine 0.82": {"bacc": round(balanced_accuracy(cos >= COS, y), 4), "auroc": round(auroc(cos, y), 4)}}
    for n, g in gates.items():
        p = np.array([r[n] for r in rows])
        inj = p >= g.threshold
        out[n] = {"threshold": round(g.threshold, 4), "bacc": round(balanced_accuracy(inj, y), 4),
                  "auroc": round(auroc(p, y), 4), "answerable_injected": round(float(inj[y == 1].mean()), 4),
                  "probes_injected": round(float(inj[y == 0].mean()), 4),
                  "by_level": {lv: round(float(inj[[r["level"] == lv for r in rows]].mean()), 4)
                               for lv in sorted({r["level"] for r in rows})}}
    write_result(a.out, {**out, "rows": rows})
    print(json.dumps(out, ensure_ascii=False, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blind", help="a blind johngrib set: search it once and score every --gate on it (nothing else runs)")
    ap.add_argument("--gate", action="append", default=[], help="NAME=FILE: a gate scored on --blind (repeatable)")
    ap.add_argument("--demo-db")
    ap.add_argument("--autorag-db")
    ap.add_argument("--johngrib-db")
    ap.add_argument("--final", action="store_true", help="also the blind sets (search each once, at the end)")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("AUTORESEARCH_DATA", DATA)),
                    help="where autorag-ko/ is (default ../shared/data, or $AUTORESEARCH_DATA)")
    ap.add_argument("--out", default="gate-transfer", help="runs/bench/OUT.json")
    a = ap.parse_args()
    if a.blind:
        return blind(a)
    if not a.demo_db:
        ap.error("--demo-db is required (unless --blind)")
    default = load_gate(DEFAULT_GATE_FILE)
    results = {"default_fitted_on": default.fitted_on.get("gold_sets"), "sets": {}, "self": {}}
    t0 = time.perf_counter()
    indexes = {v: db for v, db in (("demo", a.demo_db), ("autorag", a.autorag_db), ("johngrib", a.johngrib_db)) if db}
    searchers, own = {}, {}
    for vault, db in indexes.items():          # first every vault's own rows: the shift rules compare vaults
        s = searchers[vault] = Searcher(db)
        assert s.gate_choice.source == str(DEFAULT_GATE_FILE), s.gate_choice.reason
        s.warm_up()
        cfg = SearchConfig(embedder=s.embedder_name)
        doc_of = {nid: (n["title"] or nid) for nid, n in s.view.notes.items()} if vault == "autorag" else None
        t1 = time.perf_counter()
        own[vault] = self_rows(s, cfg, doc_of)
        results["self"][vault] = {"rows": len(own[vault]), "probes": sum(1 - r["y"] for r in own[vault]),
                                  "seconds": round(time.perf_counter() - t1, 1),
                                  "median_logit_answerable": round(median_logit(own[vault]), 4)}
        print(f"{vault}: {len(own[vault])} own rows in {time.perf_counter() - t1:.0f} s", file=sys.stderr, flush=True)
    refs = {"demo": ["demo"], "fit vaults": [v for v in ("demo", "autorag") if v in own]}
    for vault, s in searchers.items():
        cfg = SearchConfig(embedder=s.embedder_name)
        rules = rules_from_self(own[vault], default.threshold)
        for ref_name, ref in refs.items():
            m_ref = float(np.mean([median_logit(own[v]) for v in ref]))
            rules[f"vault shift ({ref_name})"] = shifted(default.threshold, median_logit(own[vault]) - m_ref)
        results["self"][vault].update(rules=rules, score_on_own_rows=score(own[vault], rules), own_rows=own[vault])
        print(f"{vault}: rules " + ", ".join(f"{k} {v:.3f}" for k, v in rules.items()), file=sys.stderr, flush=True)
        sets = []
        if vault == "demo":
            sets.append(("demo-gate-holdout", load_gold(GOLD / "demo-gate-holdout.yaml"), "not fitted on"))
            if a.final:
                sets.append(("demo-gate-holdout2", load_gold(GOLD / "demo-gate-holdout2.yaml"), "blind, searched once"))
        if vault == "johngrib":
            sets.append(("johngrib-tune", load_gold(SETS / "johngrib-tune.yaml"), "not fitted on (looked at)"))
            if a.final:
                sets.append(("johngrib-holdout", load_gold(SETS / "johngrib-holdout.yaml"), "blind, searched once"))
        tune_cut = None
        for name, gold, status in sets:
            rows = gold_rows(s, cfg, gold)
            r = dict(rules)
            if name == "johngrib-tune":
                tune_cut = best_balanced_threshold([x["p"] for x in rows], [x["y"] for x in rows])[0]
            if tune_cut is not None:
                r["johngrib-tune cut"] = tune_cut
            results["sets"][name] = {"status": status, **score(rows, r), "rows": rows}
        if vault == "autorag":
            per_seed = beir_rows(s, cfg, a.data / "autorag-ko" / "beir", seeds=range(1, 6))
            scored = [score(rows, rules) for rows in per_seed.values()]
            keys = [k for k in scored[0] if isinstance(scored[0][k], dict)]
            mean = {"n": scored[0]["n"], "probes": round(float(np.mean([x["probes"] for x in scored])), 1),
                    "auroc_model": round(float(np.mean([x["auroc_model"] for x in scored])), 4),
                    "auroc_cosine": round(float(np.mean([x["auroc_cosine"] for x in scored])), 4)}
            for k in keys:
                mean[k] = {m: round(float(np.mean([x[k][m] for x in scored])), 4)
                           for m in scored[0][k] if all(x[k][m] is not None for x in scored)}
            results["sets"]["autorag-ko"] = {"status": "answerable questions fitted on (other probes; seeds 1-5)",
                                             **mean, "per_seed": scored}
        s.close()
    results["seconds"] = round(time.perf_counter() - t0, 1)
    write_result(a.out, results)
    names = ["default", "vault cut", *(f"vault quantile {q:.2f}" for q in QUANTILES), "vault shift (demo)",
             "vault shift (fit vaults)", "johngrib-tune cut"]
    print("\ncolumns: " + "; ".join(f"[{i}] {n}" for i, n in enumerate(names)))
    print(f"{'set':<20} {'n':>4} {'pr':>3} {'AUROC':>6}  cos0.82 " + " ".join(f"{f'[{i}]':>16}" for i in range(len(names))))
    for name, r in results["sets"].items():
        cells = [f"{r[n]['bacc']:.3f} @{r[n]['threshold']:.2f}" if n in r else "-" for n in names]
        print(f"{name:<20} {r['n']:>4} {r['probes']:>3} {r['auroc_model']:>6.3f}  {r['cosine 0.82']['bacc']:.3f}  "
              + " ".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
