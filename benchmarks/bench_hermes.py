"""The Hermes memory provider's numbers: what a Hermes turn loses to it, and a 100-turn headless conversation.

    python benchmarks/bench_hermes.py [--db INDEX] [--turns 500] [--stages latency,conversation]

- latency:      the provider's queue_prefetch() and prefetch() (p50/p95/p99) as Hermes calls them, one turn
                after another over the demo questions, with `autoresearch serve` up on the demo index; then with
                no server on the port (connection refused) and with a server that accepts and never answers
                (the provider's 150 ms timeout is what bounds it)
- conversation: 100 turns of the real Hermes agent (hermes-agent 0.19.0 in its own venv, `bash .ci/hermes-venv.sh`;
                its model call replaced by a local function) against `serve` on the demo index with the shipped
                gate, 70 questions the vault answers, 20 it does not and 10 small-talk turns: injection rate,
                characters per injected turn, turns that repeated a note, the provider's time inside Hermes
The index is built from experiments/demo-vault when --db is not given. Output: runs/bench/hermes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, free_port, pct, write_result  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
CLI = [sys.executable, "-c", "from tuner.cli import main; main()"]
DRIVER = ROOT / "tests" / "helpers" / "hermes_driver.py"
NOTE_RE = re.compile(r"^- .* \(([^()]+)\)(?::|$)", re.M)
SMALL_TALK = ["안녕하세요!", "감사합니다 수고하셨습니다!", "ok thanks!", "좋아요 알겠어요", "hello there!",
              "네 좋아요", "thank you so much!", "그래요 고마워요", "good morning, thanks", "ㅋㅋㅋㅋ 좋네요"]



def questions(levels=None) -> list[str]:
    import yaml
    out = []
    for name in ("demo-tune", "demo-holdout", "demo-probes"):
        for q in yaml.safe_load((ROOT / "experiments" / "gold" / f"{name}.yaml").read_text(encoding="utf-8"))["questions"]:
            if levels is None or q["level"] in levels:
                out.append(q["query"])
    return out


def conversation_messages(n: int = 100, seed: int = 7) -> list[str]:
    """70 demo questions the vault answers, 20 probes (it does not) and 10 small-talk turns, shuffled."""
    rng = random.Random(seed)
    probes_all = questions({"probe"})
    asked = rng.sample([q for q in questions() if q not in probes_all], n * 7 // 10)
    probes = rng.sample(probes_all, n // 5)
    msgs = asked + probes + SMALL_TALK[: n - len(asked) - len(probes)]
    rng.shuffle(msgs)
    return msgs


class Serve:
    """`autoresearch serve` in a subprocess, from a scratch folder (no active config but the one given)."""

    def __init__(self, db: Path, work: Path, config: str | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = work / f"recall-{self.port}.sqlite"
        args = ["serve", "--db", str(db), "--port", str(self.port), "--log", str(self.log), "--timeout", "10"]
        if config:
            (work / "cfg.toml").write_text(config)
            args += ["--config", str(work / "cfg.toml")]
        self.proc = subprocess.Popen([*CLI, *args], cwd=work, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from search_core.recall.client import RecallClient
        for _ in range(1200):
            if RecallClient(self.url).healthy():
                return
            time.sleep(0.1)
        raise SystemExit("autoresearch serve did not come up")

    def idle(self):
        from search_core.recall.client import RecallClient
        client = RecallClient(self.url, timeout=5)
        for _ in range(2400):
            if client.health()["in_flight"] == 0:      # also while degraded (503, the same body)
                return
            time.sleep(0.01)

    def close(self):
        self.proc.terminate()
        self.proc.wait(15)


def ms_summary(v: list[float]) -> dict:
    return {"n": len(v), "p50": round(pct(v, 50), 3), "p95": round(pct(v, 95), 3), "p99": round(pct(v, 99), 3),
            "max": round(max(v), 3)}


def latency(db: Path, work: Path, turns: int) -> dict:
    from search_core.recall.hermes import AutoresearchMemoryProvider

    msgs = questions() + SMALL_TALK
    out = {}
    srv = Serve(db, work)
    try:
        p = AutoresearchMemoryProvider({"server": srv.url})            # the defaults: 150 ms timeout
        p.initialize("bench-up", hermes_home=str(work / "home-up"))
        q_ms, p_ms, injected = [], [], 0
        for i in range(turns):
            if i and i % 50 == 0:                                           # a new session every 50 turns
                p.on_session_switch(f"bench-up-{i // 50}", reset=True)
            t0 = time.perf_counter()
            block = p.prefetch(msgs[i % len(msgs)])                         # Hermes 0.19.0: no session id here
            p_ms.append((time.perf_counter() - t0) * 1000)
            injected += bool(block)
            t0 = time.perf_counter()
            p.queue_prefetch(msgs[i % len(msgs)], session_id=p._session_id)
            q_ms.append((time.perf_counter() - t0) * 1000)
            srv.idle()                                                      # the model answers meanwhile
        out["server_up"] = {"queue_prefetch_ms": ms_summary(q_ms), "prefetch_ms": ms_summary(p_ms),
                            "turns_injected": injected}
    finally:
        srv.close()

    dead = f"http://127.0.0.1:{free_port()}"
    p = AutoresearchMemoryProvider({"server": dead})
    p.initialize("bench-down", hermes_home=str(work / "home-down"))
    q_ms, p_ms = [], []
    for i in range(turns):
        t0 = time.perf_counter()
        p.prefetch(msgs[i % len(msgs)])
        p_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        p.queue_prefetch(msgs[i % len(msgs)], session_id="bench-down")
        q_ms.append((time.perf_counter() - t0) * 1000)
    out["server_down_refused"] = {"queue_prefetch_ms": ms_summary(q_ms), "prefetch_ms": ms_summary(p_ms)}

    with socket.socket() as silent:              # accepts (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1024)
        p = AutoresearchMemoryProvider({"server": f"http://127.0.0.1:{silent.getsockname()[1]}"})
        p.initialize("bench-silent", hermes_home=str(work / "home-silent"))
        q_ms, p_ms = [], []
        for i in range(min(turns, 100)):         # 2 x 150 ms a turn
            t0 = time.perf_counter()
            p.prefetch(msgs[i % len(msgs)])
            p_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            p.queue_prefetch(msgs[i % len(msgs)], session_id="bench-silent")
            q_ms.append((time.perf_counter() - t0) * 1000)
        out["server_silent"] = {"queue_prefetch_ms": ms_summary(q_ms), "prefetch_ms": ms_summary(p_ms),
                                "timeout_ms": p._cfg["timeout_ms"]}
    return out


def hermes_python() -> Path:
    explicit = os.environ.get("AUTORESEARCH_HERMES_PYTHON")
    cache = Path(os.environ.get("AUTORESEARCH_CI_CACHE") or Path.home() / ".cache" / "autoresearch-ci")
    py = Path(explicit) if explicit else cache / "hermes-agent-0.19.0" / "bin" / "python"
    if not py.exists():
        raise SystemExit(f"no Hermes venv at {py}: build it with `bash .ci/hermes-venv.sh`")
    return py


def conversation(db: Path, work: Path, n: int) -> dict:
    from search_core.recall.hermes_install import install
    from search_core.recall.log import read_calls

    msgs = conversation_messages(n)
    srv = Serve(db, work)                            # the shipped gate: what a user gets
    try:
        home = work / "hermes-home"
        home.mkdir()
        (home / "config.yaml").write_text("memory:\n  provider: autoresearch\n")
        install(home, server=srv.url)                # the defaults: 150 ms timeout, 1,200 characters
        t0 = time.perf_counter()
        run = subprocess.run([str(hermes_python()), "-I", str(DRIVER), "agent",
                              json.dumps({"home": str(home), "server": srv.url, "session": "bench-conversation",
                                          "messages": msgs})],
                             capture_output=True, text=True, cwd=work, env={"PATH": os.environ["PATH"], "HOME": str(work)})
        wall = time.perf_counter() - t0
        line = [ln for ln in run.stdout.splitlines() if ln.startswith("HERMES-DRIVER-RESULT ")]
        if run.returncode or not line:
            raise SystemExit(f"the Hermes conversation failed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
        res = json.loads(line[-1].removeprefix("HERMES-DRIVER-RESULT "))
        rows = read_calls(srv.log)
    finally:
        srv.close()
    blocks = []
    for req in res["requests"]:                     # one model request a turn (no tools): its last user message
        content = req[-1]["content"] or ""
        blocks.append(content.split("<memory-context>")[1].split("</memory-context>")[0]
                      if "<memory-context>" in content else "")
    injected = [b for b in blocks if b]
    seen, repeated = set(), 0
    for b in blocks:
        ids = set(NOTE_RE.findall(b))
        repeated += bool(ids & seen)
        seen |= ids
    ours = [len(b.split("persistent memory and should inform all responses.]\n\n", 1)[-1].strip()) for b in injected]
    log = res["provider_log"]
    stopped = {}
    for r in rows:
        stopped[r["stopped_by"] or "injected"] = stopped.get(r["stopped_by"] or "injected", 0) + 1
    return {"turns": len(blocks), "turns_injected": len(injected),
            "injection_rate": round(len(injected) / max(1, len(blocks) - 1), 3),   # turn 1 cannot have one
            "chars_per_injected_turn": {"mean": round(sum(ours) / max(1, len(ours)), 1),
                                        "p50": pct(ours, 50) if ours else None, "max": max(ours) if ours else None},
            "turns_that_repeated_a_note": repeated, "distinct_notes_given": len(seen),
            "server_log_by_outcome": stopped,
            "provider_ms_inside_hermes": {c: ms_summary([x["ms"] for x in log if x["call"] == c and "ms" in x])
                                          for c in ("prefetch", "queue")},
            "wall_s": round(wall, 1), "refused_connections": res["refused"],
            "hermes_warnings": res["warnings"][:10]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, default=None, help="An index (default: the demo vault, indexed into --work).")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--turns", type=int, default=500, help="Turns of the latency stage.")
    ap.add_argument("--conversation-turns", type=int, default=100)
    ap.add_argument("--stages", default="latency,conversation")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-hermes-"))
    work.mkdir(parents=True, exist_ok=True)
    db = a.db
    if db is None:
        db = work / "demo.sqlite"
        if not db.exists():
            subprocess.run([*CLI, "index", str(ROOT / "experiments" / "demo-vault"), "--db", str(db), "--no-progress"],
                           check=True, cwd=ROOT)
    out = {"db": str(db), "machine_load": os.getloadavg()}
    stages = a.stages.split(",")
    if "latency" in stages:
        out["latency"] = latency(db, work, a.turns)
        print(json.dumps(out["latency"], indent=1))
    if "conversation" in stages:
        out["conversation"] = conversation(db, work, a.conversation_turns)
        print(json.dumps(out["conversation"], indent=1, ensure_ascii=False))
    print(f"wrote {write_result('hermes', out)}")


if __name__ == "__main__":
    main()
