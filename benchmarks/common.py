"""Small helpers shared by the benchmark scripts: timing a CLI run, percentiles, writing results."""

from __future__ import annotations

import json
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from search_core.percentiles import percentile

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"

# The real vaults beside the repository (benchmarks/sets/README.md): each one's folder under the vaults folder
# (`../vaults` from the repository root), and the sets written on it. Spent sets only: a set kept unread joins the
# day it is read, once, last.
VAULT_SETS = {
    "baekjungho": ("baekjungho-wiki/_wiki", ("baekjungho-tune", "baekjungho-holdout")),
    "hoonti06": ("hoonti06-wiki/_wiki", ("hoonti06-final",)),
    "voyager003": ("voyager003-wiki/_wiki", ("voyager003-tune", "voyager003-holdout")),
    "aegis1920": ("aegis1920-aegis1920.github.io/_wiki", ("aegis1920-tune", "aegis1920-final")),
    "crackyachae": ("crackyachae-crackyachae.github.io/_study", ("crackyachae-tune", "crackyachae-holdout")),
    "syshin0116": ("syshin0116-syshin0116.github.io/content", ("syshin0116-tune", "syshin0116-final")),
    # sysmae-final was read on 2026-12-06, after every choice: by the recovery nights, then by the shipped gate
    "sysmae": ("sysmae-obsidian-digital-garden/content", ("sysmae-tune", "sysmae-final")),
    # likejazz-final was read on 2026-12-06, after every choice: by the shipped gate (`bench_gate_lovo.py --final`),
    # the search's side-by-side (`bench_peers.py`) and the recovery nights (`bench_recovery.py --vault-json`)
    "likejazz": ("likejazz-likejazz.github.io/_wiki", ("likejazz-tune", "likejazz-final")),
}
# The set of a vault kept unread for a final measurement, by vault: read once, last, after every choice is made
# (`bench_gate_lovo.py --final`), then it moves into VAULT_SETS. When it is empty no unread set is left, and the next
# claim about vaults in general needs a new vault (benchmarks/sets/README.md says how one is laid out).
UNREAD_SETS: dict[str, str] = {}


def run_cli(*args: str) -> tuple[float, int, str]:
    """Run `autoresearch ARGS` as a user would; return (seconds, peak RSS of that child in MiB, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"autoresearch {' '.join(args)} failed:\n{p.stderr[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss   # KiB, max over children so far
    return dt, max(peak, before) // 1024, p.stdout


def pct(values, q: float) -> float:
    """The project's one percentile (search_core.percentiles: linear between closest ranks), so a benchmark's
    p95 and the p95 the product reports of the same timings agree."""
    return percentile(values, q)


def summary(values) -> dict:
    return {"n": len(values), "p50": round(pct(values, 50), 2), "p95": round(pct(values, 95), 2),
            "min": round(min(values), 2), "max": round(max(values), 2),
            "stdev": round(statistics.pstdev(values), 2)}


def write_result(name: str, data: dict) -> Path:
    out = ROOT / "runs" / "bench" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, ensure_ascii=False, indent=2))
    return out


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on now (the servers a benchmark starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
