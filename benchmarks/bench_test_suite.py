"""Wall time of the test suite in one or more checkouts, run at the same time so they share the machine's load.

    python benchmarks/bench_test_suite.py                      # this checkout, the fast suite
    python benchmarks/bench_test_suite.py . ../other-checkout  # side by side (e.g. before and after a change)
    python benchmarks/bench_test_suite.py --full .             # every test (-m "slow or not slow")

Each checkout runs `python -m pytest -q -p no:cacheprovider` with itself on PYTHONPATH, under `nice -n 5`.
Printed as JSON: per checkout the seconds, the pytest summary line and the load averages at start and end.
On a shared machine the absolute times move with the load; runs started together compare fairly.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkouts", nargs="*", default=["."])
    ap.add_argument("--full", action="store_true", help="every test, slow ones included")
    args = ap.parse_args()
    marker = ["-m", "slow or not slow"] if args.full else []
    runs = []
    for c in args.checkouts:
        root = Path(c).resolve()
        env = {**os.environ, "PYTHONPATH": str(root)}
        cmd = ["nice", "-n", "5", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *marker]
        runs.append((root, time.perf_counter(), load(),
                     subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    import threading

    out = [None] * len(runs)

    def collect(i, root, t0, load0, proc):      # one reader per run: each stops its own clock
        text, _ = proc.communicate()
        summary = next((ln for ln in reversed(text.splitlines()) if " in " in ln and ("passed" in ln or "failed" in ln)), "")
        out[i] = {"checkout": str(root), "seconds": round(time.perf_counter() - t0, 1), "exit": proc.returncode,
                  "summary": summary.strip("= "), "load_start": load0, "load_end": load()}

    readers = [threading.Thread(target=collect, args=(i, *r)) for i, r in enumerate(runs)]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    print(json.dumps({"suite": "full" if args.full else "fast", "cores": os.cpu_count(), "runs": out}, indent=1))


if __name__ == "__main__":
    main()
