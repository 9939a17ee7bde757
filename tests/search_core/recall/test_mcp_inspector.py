"""`autoresearch mcp` checked by a client we did not write: the official MCP inspector (npm
@modelcontextprotocol/inspector, its --cli mode) lists our tools and calls search_notes and recall on the demo
index. `bash .ci/mcp-inspector.sh` installs it (CI's .ci/run does)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from search_core.recall.log import read_calls
from tests.helpers import ROOT

INSPECTOR_VERSION = "2.12.0"
QUESTION = "GraphRAG에서 커뮤니티 요약은 어떻게 만들어?"
pytestmark = pytest.mark.slow       # ~11 s: node and our server start once per inspector call


def _inspector() -> str:
    explicit = os.environ.get("AUTORESEARCH_MCP_INSPECTOR")
    cache = Path(os.environ.get("AUTORESEARCH_CI_CACHE") or Path.home() / ".cache" / "autoresearch-ci")
    cached = cache / f"mcp-inspector-{INSPECTOR_VERSION}" / "node_modules" / ".bin" / "mcp-inspector"
    for candidate in (explicit, str(cached), shutil.which("mcp-inspector")):
        if candidate and Path(candidate).exists():
            return candidate
    why = os.environ.get("AUTORESEARCH_MCP_INSPECTOR_SKIP") or (
        "no npm on this machine" if not shutil.which("npm") else f"no mcp-inspector at {cached}")
    pytest.skip(f"{why}: install it with `bash .ci/mcp-inspector.sh` (CI's .ci/run does)")


@pytest.fixture(scope="session")
def inspector():
    return _inspector()     # session-scoped and first: a skip comes before the demo index is built


def test_the_official_inspector_lists_and_calls_our_tools(inspector, demo_index_e5, tmp_path):
    (tmp_path / "cfg.toml").write_text("threshold = 0.0\n")
    log = tmp_path / "log.sqlite"
    server = [sys.executable, "-c", "from tuner.cli import main; main()", "mcp", "--db", str(demo_index_e5),
              "--config", str(tmp_path / "cfg.toml"), "--log", str(log), "--timeout", "60"]

    def inspect(*method):
        # "--" ends the inspector's options: ours (--config, ...) go to the server untouched
        out = subprocess.run([inspector, "--cli", "-e", f"PYTHONPATH={ROOT}", "-e", "OMP_WAIT_POLICY=PASSIVE",
                              "--cwd", str(tmp_path), *method, "--", *server], capture_output=True, text=True,
                             timeout=300, env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)})
        assert out.returncode == 0, f"{method}: {out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        return json.loads(out.stdout)

    listed = inspect("--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) == {"search_notes", "recall", "get_note"}
    assert tools["search_notes"]["inputSchema"]["required"] == ["query"]
    assert tools["search_notes"]["inputSchema"]["properties"]["k"]["minimum"] == 1

    found = inspect("--method", "tools/call", "--tool-name", "search_notes", "--tool-arg", "query=GraphRAG", "k=2")
    assert not found.get("isError")
    res = found["structuredContent"]
    assert [r["note_id"] for r in res["results"]][0] == "ai/rag/graphrag" and len(res["results"]) == 2
    assert json.loads(found["content"][0]["text"])["results"] == res["results"]

    recalled = inspect("--method", "tools/call", "--tool-name", "recall", "--tool-arg", f"query={QUESTION}",
                       "session_id=inspector-1")
    blk = recalled["structuredContent"]
    assert blk["injected"] and "(ai/rag/graphrag.md)" in blk["block"] and blk["notes"][0] == "ai/rag/graphrag"
    assert [(r["session"], r["query"]) for r in read_calls(log)] == [("inspector-1", QUESTION)]
