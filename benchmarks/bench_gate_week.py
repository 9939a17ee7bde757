"""A simulated week of recall on a vault the gate was not fitted on: does labelling what `suggest` picks fix
the gate's threshold with a few dozen labels?

Per labelled set and per split (--splits, stratified halves of the set's answerable questions and probes):
  1. a real `autoresearch serve` (a subprocess, on a copy of the index, its own recall log) gets the traffic
     half as an agent sends it: POST /queue after a turn, POST /prefetch at the next (a quarter of the
     questions are asked twice: the near-duplicates suggest must fold);
  2. GET /label/calls?n=20 picks 20 calls; their true labels (answerable or probe, from the set) are posted
     to /label/calls, the page's own endpoint; `autoresearch calibrate` + `calibrate apply` install the gate
     (when calibrate proposes one: labels that do not show, by its rule's sign tests over the calls a move
     would flip, that it decides better leave the threshold in force be);
  3. the other half is scored: balanced accuracy of the installed gate, beside the shipped default's;
  4. 10 more picks (30 labels in all), labelled, calibrated, applied, scored again.
The running server picks up the gate file `calibrate apply` installs at its next search, so the second round's
picks are made with the gate the first 20 labels installed (same scale: a moved threshold keeps the weights).

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD nice -n 5 python benchmarks/bench_gate_week.py \
        --set demo=tuner/experiments/gold/demo-gate-tune.yaml,runs/bench-demo.sqlite \
        --set johngrib=benchmarks/sets/johngrib-tune.yaml,runs/johngrib.sqlite
Raw results: runs/bench/gate-week.json (--out). Never point it at a blind set (demo-gate-holdout2, johngrib-holdout):
half of the set is labelled and fitted on. demo-gate-tune is one the shipped default was fitted on, so its
default figure there is in-sample (flattered); johngrib-tune is not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, free_port, write_result  # noqa: E402

from search_core.config import SearchConfig  # noqa: E402
from search_core.gate.model import DEFAULT_GATE_FILE, best_balanced_threshold, load_gate, sidecar_path  # noqa: E402
from search_core.gate.request import GateRequest  # noqa: E402
from search_core.recall.log import read_calls  # noqa: E402
from search_core.search.pipeline import Searcher  # noqa: E402
from tuner.data.gold import load_gold  # noqa: E402
from tuner.gate.metrics import auroc  # noqa: E402

TOKEN = "bench-week"
ROUNDS = (20, 30)          # labels in all after each round
REPEAT_SHARE = 0.25        # traffic questions asked a second time in the week


def _http(url, body=None, timeout=120):
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                                 method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())



class Serve:
    """`autoresearch serve` as a user runs it, in its own runs folder (no active config leaks in)."""

    def __init__(self, db: Path, log: Path, runs: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "AUTORESEARCH_RUNS": str(runs), "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
        self.proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "serve", "--db", str(db), "--log", str(log),
                                      "--port", str(self.port), "--token", TOKEN, "--timeout", "60"],
                                     cwd=runs, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(1200):                   # the model loads before the port answers
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if json.loads(r.read())["status"] == "ok":
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"serve exited: {self.proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.25)
        raise SystemExit("serve did not come up in 5 minutes")

    def turn(self, query: str, session: str):
        _http(self.url + "/queue", {"query": query, "session_id": session})
        for _ in range(2400):                   # prefetch at the next turn: the search may still be running
            r = _http(self.url + "/prefetch", {"session_id": session})
            if r["stopped_by"] != "in_flight":
                return r
            time.sleep(0.05)
        raise SystemExit(f"the search for {query!r} never finished")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _cli(runs: Path, *args) -> str:
    env = {**os.environ, "AUTORESEARCH_RUNS": str(runs), "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    p = subprocess.run([sys.executable, "-m", "tuner.cli", *args], cwd=runs, env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"autoresearch {' '.join(args)} failed:\n{p.stderr[-2000:]}\n{p.stdout[-1000:]}")
    return p.stdout


def _bacc(p, y, t) -> float:
    y = np.asarray(y, dtype=bool)
    inj = np.asarray(p) >= t
    return float((inj[y].mean() + (~inj[~y]).mean()) / 2)


def load_questions(spec: str) -> list:
    qs = []
    for part in spec.split("+"):
        qs += list(load_gold(ROOT / part).questions)
    return qs


def question_features(db: Path, questions) -> dict:
    """Each question's gate features, searched once with the defaults (the scores of every split's other half)."""
    s = Searcher(db, gate=GateRequest(path=DEFAULT_GATE_FILE))
    try:
        cfg = SearchConfig(embedder=s.embedder_name)
        return {q.id: s.search(q.query, cfg).gate.features for q in questions}
    finally:
        s.close()


def one_week(name: str, db: Path, questions, feats: dict, seed: int, work: Path, start_gate: Path | None = None) -> dict:
    rng = random.Random(seed)
    ans = [q for q in questions if not q.is_probe]
    probes = [q for q in questions if q.is_probe]
    rng.shuffle(ans)
    rng.shuffle(probes)
    traffic = ans[: len(ans) // 2] + probes[: len(probes) // 2]
    test = ans[len(ans) // 2:] + probes[len(probes) // 2:]
    week = traffic + rng.sample(traffic, round(REPEAT_SHARE * len(traffic)))
    rng.shuffle(week)
    runs = work / f"{name}-{seed}"
    runs.mkdir(parents=True)
    idx = runs / db.name
    shutil.copy(db, idx)
    if start_gate is not None:      # the week starts from this gate (installed as the index's own gate file)
        shutil.copy(start_gate, sidecar_path(idx))
    log = runs / "recall-log.sqlite"
    truth = {q.query: not q.is_probe for q in questions}
    default = load_gate(start_gate or DEFAULT_GATE_FILE)
    y_test = [not q.is_probe for q in test]
    p_default = [default.probability(feats[q.id]) for q in test]
    out = {"set": name, "seed": seed, "traffic": {"questions": len(traffic), "calls": len(week)},
           "test": {"answerable": sum(y_test), "probes": len(y_test) - sum(y_test)},
           "default": {"threshold": round(default.threshold, 4),
                       "balanced_accuracy": round(_bacc(p_default, y_test, default.threshold), 4),
                       "auroc": round(float(auroc(p_default, [int(v) for v in y_test])), 4)},
           # what no threshold on the default's P can beat on this half (its best cut, in-sample): the ceiling
           # of any label-driven threshold
           "best_threshold_on_test": round(best_balanced_threshold(p_default, [int(v) for v in y_test])[1], 4),
           "rounds": []}
    srv = Serve(idx, log, runs)
    try:
        t0 = time.perf_counter()
        for i, q in enumerate(week):
            srv.turn(q.query, f"day{i % 7}-{i}")
        out["traffic"]["seconds"] = round(time.perf_counter() - t0, 1)
        labelled = 0
        for total in ROUNDS:
            picks = _http(srv.url + f"/label/calls?n={total - labelled}&since=all")["suggested"]
            for p in picks:                          # the true labels, through the page's endpoint
                _http(srv.url + "/label/calls", {"id": p["id"], "label": "relevant" if truth[p["query"]] else "irrelevant"})
            labelled += len(picks)
            rep = runs / f"cal-{total}.json"
            _cli(runs, "calibrate", "--db", str(idx), "--log", str(log), "--since", "all", "--format", "json",
                 "--out", str(rep))
            cal = json.loads(rep.read_text())["data"]
            if cal["recommendation"].get("basis"):       # else the labels hold the threshold: no proposal
                _cli(runs, "calibrate", "apply", "--db", str(idx))
            gate = load_gate(sidecar_path(idx)) if sidecar_path(idx).exists() else default
            p_new = [gate.probability(feats[q.id]) for q in test]
            mv = cal["recommendation"].get("threshold_move") or {}
            out["rounds"].append({
                "labels": labelled, "picked_relevant": sum(truth[p["query"]] for p in picks),
                "method": cal["recommendation"]["model_summary"]["method"],
                "threshold": round(gate.threshold, 4), "interval": mv.get("interval"),
                "flips": mv.get("flips"), "sign_test": {k: v for k, v in (mv.get("sign_test") or {}).items() if k != "why"},
                "labels_to_decide": (mv.get("labels_to_decide") or {}).get("more"),
                "labels_to_decide_text": (mv.get("labels_to_decide") or {}).get("text"),
                "labels_to_decide_of_kind": (mv.get("labels_to_decide") or {}).get("of_kind"),
                "balanced_accuracy": round(_bacc(p_new, y_test, gate.threshold), 4)})
        rows = read_calls(log)
        out["log"] = {"calls": len(rows), "labelled": sum(r["label"] is not None for r in rows),
                      "distinct_labelled": len({r["query"] for r in rows if r["label"]})}
    finally:
        srv.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", dest="sets", action="append", required=True,
                    help="NAME=GOLD[+GOLD...],INDEX (paths relative to the repository root)")
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-gate", type=Path, help="start each week from this gate file instead of the shipped "
                    "default (e.g. a gate fitted with the set's vault left out: benchmarks/bench_gate_lovo.py writes "
                    "them), installed as the index copy's own gate file")
    ap.add_argument("--out", default="gate-week")
    args = ap.parse_args()
    results = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "start_gate": str(args.start_gate or DEFAULT_GATE_FILE),
               "load_average": os.getloadavg(), "sets": {}}
    with tempfile.TemporaryDirectory(prefix="gate-week-") as tmp:
        for spec in args.sets:
            name, rest = spec.split("=", 1)
            gold, db = rest.rsplit(",", 1)
            questions = load_questions(gold)
            feats = question_features(ROOT / db, questions)
            weeks = [one_week(name, ROOT / db, questions, feats, args.seed + k, Path(tmp), args.start_gate) for k in range(args.splits)]
            summary = {"default": round(float(np.mean([w["default"]["balanced_accuracy"] for w in weeks])), 4),
                       "auroc": round(float(np.mean([w["default"]["auroc"] for w in weeks])), 4),
                       "best_threshold_on_test": round(float(np.mean([w["best_threshold_on_test"] for w in weeks])), 4)}
            for i, n in enumerate(ROUNDS):
                b = [w["rounds"][i]["balanced_accuracy"] for w in weeks]
                summary[f"labels_{n}"] = {"mean": round(float(np.mean(b)), 4), "min": round(min(b), 4),
                                          "worse_than_default": sum(w["rounds"][i]["balanced_accuracy"]
                                                                    < w["default"]["balanced_accuracy"] for w in weeks)}
            results["sets"][name] = {"questions": len(questions), "weeks": weeks, "summary": summary}
            print(json.dumps({name: summary}, ensure_ascii=False), flush=True)
            write_result(args.out, results)                  # after each set: a long run keeps what it did
    results["load_average_end"] = os.getloadavg()
    print(f"results in {write_result(args.out, results)}")


if __name__ == "__main__":
    main()
