"""Code the tests share (no fixtures: those are in conftest.py): repo paths, vault builders, a free port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO_VAULT = ROOT / "experiments" / "demo-vault"


def write_vault(root: Path, files: dict) -> Path:
    """files: relative path -> str (written as UTF-8) or bytes (written as is)."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return root


SMALL_VAULT = {
    "ai/graphrag.md": "---\ntitle: GraphRAG\naliases: [그래프 RAG, graph rag]\ntags: [rag, graph]\n"
                      "summary: 지식 그래프 기반 RAG\n---\n# GraphRAG\n\nGraphRAG는 entity와 relation을 추출해 "
                      "community 요약을 만든다. [[ai/rrf]] 와 함께 쓴다.\n\n## 커뮤니티\n\nLeiden 알고리즘으로 "
                      "커뮤니티를 나눈다. #knowledge-graph\n",
    "ai/rrf.md": "---\ntitle: Reciprocal Rank Fusion\naliases: RRF\ntag: rag fusion\n---\n# RRF\n\n"
                 "RRF 점수는 1/(k+rank)의 합이다. k는 보통 60이다. [[graphrag|그래프 RAG]]\n",
    "life/kimchi.md": "---\ntitle: 김치찌개 레시피\ntags: \"cooking, 한식\"\n---\n## 재료\n\n돼지 앞다리살 300g, "
                      "묵은지 반 포기, 두부 한 모.\n\n## 순서\n\n고기를 먼저 볶고 김치를 넣는다. AI 팀 회식 메뉴.\n",
    "index.md": "---\ntitle: Home\ntype: moc\n---\n- [[ai/graphrag]]\n- [[ai/rrf]]\n- [[life/kimchi]]\n",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def decisions(rows) -> list:
    return [(r.variable, r.new, r.decision) for r in rows]



def child_env() -> dict:
    """The environment for a child process: as the test has set it (its own embedding cache folder, not as it
    was at import), with this checkout's code first."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def kill_at_marker(proc: subprocess.Popen, marker: Path, timeout: float, what: str) -> None:
    """Wait for the child to write the marker (it has reached the point it holds at), then SIGKILL it and reap it.
    The child's output must be piped (stdout, stderr folded in): on failure it goes into the message."""
    try:
        end = time.monotonic() + timeout
        while not marker.exists() and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        if not marker.exists():
            out = proc.communicate(timeout=30)[0] if proc.poll() is not None else b""
            raise AssertionError(f"the child never reached {what} within {timeout} s: "
                                 f"{out.decode(errors='replace') if isinstance(out, bytes) else out}")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"the child exited with {proc.returncode}, not by the kill"
