"""`recall-log suggest` and `calibrate` over a week of recall log at scale: 100,000 rows, timed as a user runs them.

The log is what a busy agent's week looks like: every row a real search of the demo vault's index (its gate
features, top hits and stages as the recall engine logs them), the queries near-duplicate-heavy (the same
question asked again with a word more or less: "알려줘", "?", "다시", a prefix), a third of them new questions
made of the vault's own words (distinct, but sharing trigrams with many others: the near-duplicate folding's
hard case; a reworded question logs features a little apart from its original's, an exact repeat the same),
1 % timed out, 2 % stopped before any search (too short, small talk), 40 calls labelled as a
person labels them (answerable questions relevant, probes irrelevant).

Each verb runs as a subprocess (`python -m tuner.cli ...`), --runs times: wall seconds and CPU seconds (median and
spread; on a shared machine the CPU time is the honest cost) and the child's peak RSS (os.wait4, per run).

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD python benchmarks/bench_suggest_scale.py [--rows 100000] [--runs 3]

The demo index is built once under runs/bench/ (e5-small, the default embedder); the log is built in a temp
folder each time (its build time is reported, not benchmarked). Raw results: runs/bench/suggest-scale.json.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, write_result  # noqa: E402

SUFFIXES = ("", "", "?", " 알려줘", " 좀 알려줘", " 다시", " 정리해줘", " 요약", " 예시는", " 어떻게")
PREFIXES = ("", "", "", "혹시 ", "그럼 ", "다시 ", "음 ")
NEW_SHARE = 0.33          # rows that are new questions (vault words, 3-5 of them)
ERROR_SHARE = 0.01        # timed out: logged with an error, no features
SHORT_SHARE = 0.02        # stopped before the search (too short, small talk)
LABELLED = 40
SESSIONS = 60
WEEK_S = 7 * 86400


def demo_index() -> Path:
    from search_core.index.indexer import index_vault
    db = ROOT / "runs" / "bench" / "suggest-scale-demo.sqlite"
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        index_vault(ROOT / "experiments" / "demo-vault", db)
    return db


def questions() -> list[tuple[str, bool]]:
    """(query, answerable) of every demo gold set, once each."""
    from tuner.data.gold import load_gold
    seen: dict[str, bool] = {}
    for p in sorted((ROOT / "experiments" / "gold").glob("demo-*.yaml")):
        for q in load_gold(p).questions:
            seen.setdefault(q.query, not q.is_probe)
    return list(seen.items())


def build_log(db: Path, log_path: Path, rows: int, seed: int = 0) -> dict:
    """`rows` calls written through RecallLog as the recall engine writes them."""
    from search_core.config import SearchConfig
    from search_core.recall.block import gate_features
    from search_core.recall.log import RecallLog, index_id, label_calls
    from search_core.search.pipeline import Searcher

    rng = random.Random(seed)
    qs = questions()
    s = Searcher(db)
    cfg = SearchConfig(embedder=s.embedder_name)
    key, cfg_hash = index_id(s.fingerprint), cfg.config_hash()
    t0 = time.perf_counter()
    logged = {}
    for q, _ in qs:                                # one real search per question: its features, hits, stages
        res = s.search(q)
        logged[q] = {"top_scores": [{"note_id": h.note_id, "score": round(float(h.score), 6),
                                     "cosine": round(float(h.cosine), 4)} for h in res.hits[:3]],
                     "features": gate_features(res), "threshold": float(res.gate.threshold),
                     "injected": bool(res.gate.inject),
                     "stages_ms": {k: round(v, 3) for k, v in res.timings_ms.items()},
                     "latency_ms": round(res.timings_ms.get("total", 30.0), 3)}
    s.close()
    search_s = time.perf_counter() - t0
    words = sorted({w for q, _ in qs for w in q.split() if len(w) >= 2})
    weights = [1.0 / (i + 1) for i in range(len(qs))]       # a few questions asked often, most rarely
    log = RecallLog(log_path, retention_days=None)
    start = time.time() - WEEK_S + 60
    t0 = time.perf_counter()
    first_of: dict[str, int] = {}
    for i in range(rows):
        ts = start + (WEEK_S - 120) * i / rows
        session = f"s{rng.randrange(SESSIONS)}"
        u = rng.random()
        if u < SHORT_SHARE:
            log.write({"ts": ts, "session": session, "query": rng.choice(("안녕", "ㅇㅋ", "고마워", "ok")),
                       "injected": False, "stopped_by": rng.choice(("too_short", "small_talk"))})
            continue
        base, answerable = rng.choices(qs, weights)[0]
        if u < SHORT_SHARE + ERROR_SHARE:
            log.write({"ts": ts, "session": session, "query": base, "injected": False, "stopped_by": "error",
                       "error": "timeout: the search took longer than 2.0 s", "index_fingerprint": key})
            continue
        if rng.random() < NEW_SHARE:
            query = " ".join(rng.sample(words, rng.randint(3, 5)))
        else:
            query = rng.choice(PREFIXES) + base + rng.choice(SUFFIXES)
        rec = logged[base]
        feats, tops = rec["features"], rec["top_scores"]
        if query != base:          # another wording searches a little differently: no two rows log the same text
            feats = {k: v * (1 + rng.gauss(0, 0.01)) if type(v) is float else v for k, v in feats.items()}
            tops = [{**t, "score": round(t["score"] * (1 + rng.gauss(0, 0.01)), 6),
                     "cosine": round(t["cosine"] * (1 + rng.gauss(0, 0.001)), 4)} for t in tops]
        cid = log.write({"ts": ts, "session": session, "query": query, "index_fingerprint": key,
                         "config_hash": cfg_hash, "injected": rec["injected"],
                         "stopped_by": None if rec["injected"] else "threshold",
                         "chars_injected": 700 if rec["injected"] else 0, "top_scores": tops,
                         "features": feats, "threshold": rec["threshold"],
                         "latency_ms": rec["latency_ms"], "stages_ms": rec["stages_ms"]})
        if query == base:
            first_of.setdefault(base, cid)
    log.close()
    answer = dict(qs)
    picked = rng.sample(sorted(first_of), min(LABELLED, len(first_of)))
    label_calls(log_path, [(first_of[q], "relevant" if answer[q] else "irrelevant") for q in picked])
    return {"rows": rows, "questions": len(qs), "labelled": len(picked), "search_s": round(search_s, 1),
            "write_s": round(time.perf_counter() - t0, 1), "bytes": log_path.stat().st_size}


class _Popen(subprocess.Popen):
    """Popen that keeps the child's rusage (os.wait4): its own peak RSS, not the max over all children."""
    peak_mib = 0.0
    cpu_s = 0.0

    def _try_wait(self, wait_flags):
        pid, sts, ru = os.wait4(self.pid, wait_flags)
        if pid:
            self.peak_mib = ru.ru_maxrss / 1024
            self.cpu_s = ru.ru_utime + ru.ru_stime
        return pid, sts


def timed_cli(args: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system: on a shared machine the honest cost) and peak RSS (MiB) of one
    `autoresearch ARGS` run in a child process."""
    t0 = time.perf_counter()
    p = _Popen([sys.executable, "-m", "tuner.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
               stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"autoresearch {' '.join(args)} failed ({p.returncode}):\n{err[-2000:]}")
    return dt, p.cpu_s, p.peak_mib


def stats(values) -> dict:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2), "runs": [round(v, 2) for v in values]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="suggest-scale")
    ap.add_argument("--keep", type=Path, default=None,
                    help="Build the log at this path once and reuse it on later runs (for profiling).")
    a = ap.parse_args()
    db = demo_index()
    with tempfile.TemporaryDirectory() as tmp:
        log = a.keep or Path(tmp) / "recall-log.sqlite"
        built = {"reused": str(log)} if log.exists() else build_log(db, log, a.rows)
        print(f"log: {built}", flush=True)
        verbs = {"suggest": ["recall-log", "suggest", "--log", str(log), "--db", str(db), "--since", "7d",
                             "-n", "20", "--json"],
                 "calibrate": ["calibrate", "--db", str(db), "--log", str(log), "--since", "7d", "--format", "json",
                               "--out", str(Path(tmp) / "cal.json"), "--proposal", str(Path(tmp) / "prop.json")]}
        result = {"rows": a.rows, "log": built, "cpu": os.cpu_count(), "load_before": os.getloadavg()}
        for name, args in verbs.items():
            secs, cpu, mib = [], [], []
            for _ in range(a.runs):
                dt, cpu_s, peak = timed_cli(args)
                secs.append(dt)
                cpu.append(cpu_s)
                mib.append(peak)
            result[name] = {"seconds": stats(secs), "cpu_seconds": stats(cpu), "peak_rss_mib": stats(mib)}
            print(f"{name}: {result[name]}", flush=True)
    print(f"written {write_result(a.out, result)}")


if __name__ == "__main__":
    main()
