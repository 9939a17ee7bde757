"""`eval --json` and `search --json` decide every question with the same gate: for each gold set given,
run `autoresearch eval --json` once and `autoresearch search --json` per question (both through the
command-line functions, in this process: one model load), and compare per question the decision, the
probability (4 places) and which gate decided (kind, file, threshold). Exit status 1 on any difference.

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD nice -n 5 python benchmarks/check_gate_agreement.py \
        --db runs/autorag.sqlite --gold ../shared/data/autorag-ko/beir \
        --db runs/johngrib.sqlite --gold benchmarks/sets/johngrib-tune.yaml
(--db and --gold pair up in order.) Prints one line per set; the per-question rows go to runs/bench/gate-agreement.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from click.testing import CliRunner  # noqa: E402

from tuner.cli import main as cli  # noqa: E402
from tuner.data.gold import load_gold  # noqa: E402


def decision(g: dict) -> list:
    d = g.get("decided_by", g)
    p = d["probability"]
    return [bool(d["inject"]), None if p is None else round(p, 4), d["kind"], d["source"], round(d["threshold"], 4)]


def check(db: str, gold_path: str) -> dict:
    gold = load_gold(gold_path)
    run = CliRunner()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        r = run.invoke(cli, ["eval", "--db", db, "--gold", gold_path, "--json", "--no-audit", "--timing-samples", "0",
                             "--allow-missing", "--out", tmp])
    if r.exit_code != 0:
        raise SystemExit(f"eval failed on {db}: {r.output[-2000:]}")
    ev = {q["id"]: decision(q["gate"]) for q in json.loads(r.stdout)["per_query"]}
    rows, differ = [], []
    for q in gold.questions:
        r = run.invoke(cli, ["search", q.query, "--db", db, "--json"])
        if r.exit_code != 0:
            raise SystemExit(f"search failed on {db} for {q.id}: {r.output[-2000:]}")
        se = decision(json.loads(r.stdout)["gate"])
        rows.append({"id": q.id, "level": q.level, "eval": ev[q.id], "search": se})
        if se != ev[q.id]:
            differ.append(q.id)
    gates = sorted({tuple(x["search"][2:]) for x in rows})
    return {"db": db, "gold": gold_path, "questions": len(rows), "probes": sum(q.is_probe for q in gold.questions),
            "injected": sum(x["search"][0] for x in rows), "differ": differ, "gates": [list(g) for g in gates],
            "seconds": round(time.perf_counter() - t0, 1), "rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", action="append", required=True)
    ap.add_argument("--gold", action="append", required=True)
    ap.add_argument("--out", default="gate-agreement", help="runs/bench/OUT.json")
    a = ap.parse_args()
    if len(a.db) != len(a.gold):
        ap.error(f"--db and --gold pair up: got {len(a.db)} --db and {len(a.gold)} --gold")
    out = [check(db, g) for db, g in zip(a.db, a.gold)]
    write_result(a.out, {"sets": out})
    for r in out:
        print(f"{r['db']} {r['gold']}: {r['questions']} questions ({r['probes']} probes), {r['injected']} injected, "
              f"{len(r['differ'])} differ {r['differ'][:10]}; gate {r['gates']}; {r['seconds']} s")
    sys.exit(1 if any(r["differ"] for r in out) else 0)


if __name__ == "__main__":
    main()
