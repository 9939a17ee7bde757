"""Regenerate every report in docs/examples/ with the current code, on data whose licence allows it.

    python docs/make_examples.py                 # every example (AutoRAG-ko when ../shared/data has it)
    python docs/make_examples.py --only demo     # the demo vault's examples only (a few minutes)

demo    : a night of the daemon on the demo vault from the demo's hand-set start (index, a 60-round
          sweep, holdout check, promotion, the morning report and the audit) and the A/B e5-small vs
          minilm-l6 (minilm-l6 needs the [models] extra)
autorag : the same on AutoRAG-ko (MIT; 114 questions split 50/50) from the shipped default, 119 rounds
KorQuAD (CC BY-ND) is never used here: a report of it is a derived file.

Work files go under runs/examples/ (kept, so a second run reuses indexes and embeddings). Every run
rewrites docs/examples/STAMP.json: the commit, a hash of the renderer's source and of every example
file; tests/tuner/reports/test_examples.py fails when they no longer match.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.reports.stamp import EXAMPLES, write_stamp  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", ROOT.parent / "shared" / "data"))
WORK = Path("runs/examples")          # relative to ROOT: reports show relative paths


def rel(p: Path) -> str:
    return os.path.relpath(p, ROOT)


def cli(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    print("+ autoresearch " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "tuner.cli", *args], cwd=ROOT, env=env, check=True)


def night(name: str, vault: str, gold: str, holdout: str | None, rounds: int, start: str | None = None) -> None:
    """The daemon's index and sweep jobs once, as a night would run them; its reports become examples."""
    work = ROOT / WORK / name
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)          # a fresh ledger and promotion history: one sweep
    work.mkdir(parents=True, exist_ok=True)
    split = f'holdout = "{holdout}"' if holdout else "split = 0.5"
    (work / "daemon.toml").write_text(
        f'[daemon]\ntimezone = "UTC"\nruns = "runs"\n\n[sweep]\nvault = "{os.path.relpath(ROOT / vault, work)}"\n'
        f'db = "index.sqlite"\ngold = "{os.path.relpath(ROOT / gold, work)}"\n'
        + (f'holdout = "{os.path.relpath(ROOT / holdout, work)}"\n' if holdout else f"{split}\n")
        + (f'start_config = "{os.path.relpath(ROOT / start, work)}"\n' if start else "")
        + f"rounds = {rounds}\nseed = 0\n\n"
        '[jobs.index]\ncron = "0 1 * * *"\n\n[jobs.sweep]\ncron = "5 1 * * *"\n', encoding="utf-8")
    cfg = rel(work / "daemon.toml")
    cli("daemon", "--config", cfg, "--once", "index")
    cli("daemon", "--config", cfg, "--once", "sweep")
    reports = runs / "reports"
    for kind, example in (("sweep", "morning-report"), ("audit", "audit")):
        for fmt in ("md", "html", "json"):
            (src,) = reports.glob(f"{kind}-*.{fmt}")
            shutil.copyfile(src, ROOT / "docs" / "examples" / f"{example}-{name}.{fmt}")


def ab(name: str, args: list[str]) -> None:
    out = ROOT / "docs" / "examples" / f"ab-{name}.json"
    cli("ab", "--embedders", "e5-small,minilm-l6", *args, "--work", rel(ROOT / WORK / name / "ab"),
        "--format", "json", "--out", rel(out), "--no-progress")
    for fmt in ("md", "html"):
        cli("ab", "--from-json", rel(out), "--format", fmt, "--out", rel(out.with_suffix(f".{fmt}")))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=sorted(EXAMPLES), action="append", default=None)
    a = ap.parse_args(argv)
    sets = a.only or sorted(EXAMPLES)
    autorag = DATA / "autorag-ko" / "beir"
    if "autorag" in sets and not autorag.is_dir():
        print(f"skipping autorag: {rel(autorag)} is not here (set AUTORESEARCH_DATA)", file=sys.stderr)
        sets = [s for s in sets if s != "autorag"]
    if "demo" in sets:
        night("demo", "experiments/demo-vault", "experiments/gold/demo-tune.yaml",
              "experiments/gold/demo-holdout.yaml", rounds=60, start="experiments/demo-start.toml")
        ab("demo", ["--gold", "experiments/gold/demo-tune.yaml", "--holdout", "experiments/gold/demo-holdout.yaml",
                    "--vault", "experiments/demo-vault"])
    if "autorag" in sets:
        night("autorag", rel(autorag), rel(autorag), None, rounds=119)
        ab("autorag", ["--gold", rel(autorag), "--split", "0.5", "--vault", rel(autorag),
                       "--db", rel(ROOT / WORK / "autorag" / "index.sqlite")])
    stamp = write_stamp(sets)
    print(f"wrote {rel(stamp)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
