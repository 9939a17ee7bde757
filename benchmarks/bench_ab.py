"""`autoresearch ab` cold vs warm: the first A/B builds every candidate's index (empty embedding cache),
a second one finds them built. Target: warm <= 10% of cold.

    python benchmarks/bench_ab.py                         # demo vault, e5-small vs minilm-l6, cold + 3 warm
    python benchmarks/bench_ab.py --set demo-mini         # the 35 notes the demo tuning questions point at
    python benchmarks/bench_ab.py --set autorag --cold-json runs/ab/autorag/ab-cold.json --work runs/ab/autorag
    python benchmarks/bench_ab.py --set korquad20 --work runs/ab/korquad20   # 20% of KorQuAD 1.0 dev's articles

With --cold-json the cold time is read from a cold run already made with the same --work (its report's
data.seconds), so a long cold build is not repeated; the warm runs are measured here.
Raw results: runs/bench/ab-<set>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, summary, write_result  # noqa: E402

SETS = {
    "demo": ["--gold", str(ROOT / "experiments/gold/demo-tune.yaml"), "--holdout",
             str(ROOT / "experiments/gold/demo-holdout.yaml"), "--vault", str(ROOT / "experiments/demo-vault")],
    "autorag": ["--gold", str(DATA / "autorag-ko/beir"), "--split", "0.5"],
    # the vault is made in --work by mini_vault(); the tuning questions split 50/50
    "demo-mini": ["--gold", str(ROOT / "experiments/gold/demo-tune.yaml"), "--split", "0.5"],
    # the gold file (and vault) is made in --work by korquad_sample(); its questions split 50/50
    "korquad20": ["--split", "0.5"],
}
KORQUAD = DATA / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json"


def korquad_sample(work: Path, share: float = 0.2, seed: int = 0) -> Path:
    """A KorQuAD file holding a seeded `share` of dev's 140 articles, whole (28 at 20 %): questions and
    the paragraphs they are asked on stay together."""
    import random
    doc = json.loads(KORQUAD.read_text(encoding="utf-8"))
    arts = doc["data"]
    keep = sorted(random.Random(seed).sample(range(len(arts)), round(len(arts) * share)))
    out = work / f"korquad-{round(share * 100)}.json"
    out.write_text(json.dumps({"version": doc.get("version"), "data": [arts[i] for i in keep]},
                              ensure_ascii=False), encoding="utf-8")
    return out


def mini_vault(work: Path) -> Path:
    """The demo notes the demo tuning questions point at (35 of 138): the same vault the tests use."""
    from tuner.data.gold import load_gold
    vault = work / "mini-vault"
    for nid in sorted(load_gold(ROOT / "experiments/gold/demo-tune.yaml").gold_ids()):
        dst = vault / f"{nid}.md"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "experiments/demo-vault" / f"{nid}.md", dst)
    return vault


def run_ab(work: Path, set_name: str, embedders: str) -> tuple[float, dict]:
    out = work / "bench-report.json"
    extra = ["--vault", str(work / "mini-vault")] if set_name == "demo-mini" else []
    if set_name == "korquad20":
        extra = ["--gold", str(work / "korquad-20.json")]
    cmd = [sys.executable, "-c", "from tuner.cli import main; main()", "ab", "--embedders", embedders,
           *SETS[set_name], *extra, "--work", str(work), "--format", "json", "--out", str(out), "--no-progress"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"ab failed:\n{p.stderr[-2000:]}")
    return dt, json.loads(out.read_text(encoding="utf-8"))["data"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=sorted(SETS), default="demo")
    ap.add_argument("--embedders", default="e5-small,minilm-l6")
    ap.add_argument("--work", type=Path, default=None, help="default: a fresh temporary folder (cold)")
    ap.add_argument("--cold-json", type=Path, default=None, help="the report of a cold run made with --work")
    ap.add_argument("--warm-runs", type=int, default=3)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-ab-"))
    if a.cold_json:
        doc = json.loads(a.cold_json.read_text(encoding="utf-8"))
        if "cold_seconds" in doc:         # an earlier result of this script
            cold_s, cold_src, cold_data = doc["cold_seconds"], f"cold run recorded in {a.cold_json}", None
        else:                             # a report saved by `ab --format json`
            cold_data = doc["data"]
            cold_s, cold_src = cold_data["seconds"], f"A/B seconds recorded in {a.cold_json}"
    else:
        if work.exists() and any(work.iterdir()):
            raise SystemExit(f"{work} is not empty: a cold run needs an empty --work (or pass --cold-json)")
        work.mkdir(parents=True, exist_ok=True)
        if a.set == "demo-mini":
            mini_vault(work)
        if a.set == "korquad20":
            korquad_sample(work)
        cold_wall, cold_data = run_ab(work, a.set, a.embedders)
        cold_s, cold_src = cold_wall, "measured here (wall time of the command, process start included)"
    warm = [run_ab(work, a.set, a.embedders)[0] for _ in range(a.warm_runs)]
    w = summary(warm)
    res = {"set": a.set, "loadavg_at_end": os.getloadavg(), "embedders": a.embedders, "work": str(work), "cold_seconds": round(cold_s, 2),
           "cold_source": cold_src, "warm_seconds": w, "warm_over_cold": round(w["p50"] / cold_s, 4),
           "cold_builds": {c["label"]: c["build"] for c in cold_data["candidates"]} if cold_data else doc.get("cold_builds"),
           "target": "warm <= 10% of cold"}
    path = write_result(f"ab-{a.set}", res)
    print(json.dumps({k: res[k] for k in ("cold_seconds", "warm_seconds", "warm_over_cold")}, indent=1))
    print(f"raw: {path}")
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
