"""The contract with the real Hermes agent (hermes-agent 0.19.0 from PyPI), run in its own virtual environment
(`bash .ci/hermes-venv.sh` builds it; CI does): our installed provider, loaded by Hermes's own plugin discovery,
against our real `serve` on the demo index, with a socket guard in the Hermes process that refuses anything but
loopback. Hermes's model call is a local function (tests/helpers/hermes_driver.py), so no model is needed.

(a) MemoryManager loads the provider from config and injects our block one turn late
(b) AIAgent: the second model request carries our block, the first does not
(c) the kill switch   (d) a dead server   (e) a profile set through Hermes's ContextVar
(f) the same note is not injected twice in a session   (g) the recall log shows Hermes's session id
and the wrapped `holographic` provider: its tools through Hermes's routing, one shared character budget.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from search_core.recall.client import RecallClient
from search_core.recall.hermes_install import install, status
from search_core.recall.log import read_calls
from tests.helpers import ROOT, free_port

HERMES_VERSION = "0.19.0"
DRIVER = ROOT / "tests" / "helpers" / "hermes_driver.py"
GRAPH_Q = "GraphRAG에서 커뮤니티 요약은 어떻게 만들어?"
KIMCHI_Q = "김치찌개 끓이는 순서랑 재료 알려줘"
NOTE_RE = re.compile(r"^- .* \(([^()]+)\)(?::|$)", re.M)
pytestmark = pytest.mark.slow       # 5-7 s a case: Hermes starts in a fresh interpreter for each


def _hermes_python() -> Path:
    explicit = os.environ.get("AUTORESEARCH_HERMES_PYTHON")
    cache = Path(os.environ.get("AUTORESEARCH_CI_CACHE") or Path.home() / ".cache" / "autoresearch-ci")
    py = Path(explicit) if explicit else cache / f"hermes-agent-{HERMES_VERSION}" / "bin" / "python"
    if not py.exists():
        why = os.environ.get("AUTORESEARCH_HERMES_SKIP") or f"no Hermes venv at {py}"
        pytest.skip(f"{why}: build it with `bash .ci/hermes-venv.sh` (CI's .ci/run does)")
    got = subprocess.run([str(py), "-I", "-c", "import importlib.metadata as m; print(m.version('hermes-agent'))"],
                         capture_output=True, text=True, timeout=60).stdout.strip()
    if got != HERMES_VERSION:
        pytest.skip(f"{py} holds hermes-agent {got or '(none)'}, not {HERMES_VERSION}: rebuild it with "
                    "`bash .ci/hermes-venv.sh`")
    return py


@pytest.fixture(scope="session")
def hermes_py():
    return _hermes_python()     # session-scoped and first: a skip comes before the demo index is built


@pytest.fixture(scope="module")
def server(hermes_py, demo_index_e5, tmp_path_factory):
    """Our real `autoresearch serve` on the demo index (threshold 0: every searched message injects)."""
    root = tmp_path_factory.mktemp("hermes-serve")
    (root / "cfg.toml").write_text("threshold = 0.0\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", "from tuner.cli import main; main()", "serve", "--db",
                             str(demo_index_e5), "--port", str(port), "--config", str(root / "cfg.toml"),
                             "--log", str(root / "recall.sqlite"), "--timeout", "60"],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):
            if RecallClient(url).healthy():
                break
            time.sleep(0.1)
        else:
            pytest.fail("autoresearch serve did not come up")
        yield url, root / "recall.sqlite"
    finally:
        proc.terminate()
        proc.wait(15)


def _home(tmp_path, url, *, select=True, name="home", **install_kw) -> Path:
    home = tmp_path / name
    home.mkdir(parents=True)
    if select:
        (home / "config.yaml").write_text("memory:\n  provider: autoresearch\n")
    install(home, server=url, timeout_ms=8000, **install_kw)   # 8 s, Hermes's own bound: a shared machine
    return home


def drive(hermes_py, scenario, tmp_path, **args) -> dict:
    out = subprocess.run([str(hermes_py), "-I", str(DRIVER), scenario, json.dumps(args)], capture_output=True,
                         text=True, timeout=600, cwd=tmp_path, env={"PATH": os.environ.get("PATH", ""),
                                                                   "HOME": str(tmp_path)})
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("HERMES-DRIVER-RESULT ")]
    assert out.returncode == 0 and lines, f"driver failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    res = json.loads(lines[-1].removeprefix("HERMES-DRIVER-RESULT "))
    assert res["refused"] == [], res["refused"]        # Hermes tried to reach no one but loopback
    return res


def _last_user(request) -> str:
    return request[-1]["content"] or ""


def _rows(log, session):
    return [r for r in read_calls(log) if r["session"] == session]


def test_a_memory_manager_loads_it_from_config_and_injects_one_turn_late(hermes_py, server, tmp_path):
    url, log = server
    home = _home(tmp_path, url, select=False)
    assert status(home).selected is None
    res = drive(hermes_py, "manager", tmp_path, home=str(home), server=url, session="contract-a",
                messages=[GRAPH_Q, KIMCHI_Q], select_with_cli=True)      # the real `hermes config set ...`
    assert status(home).selected == "autoresearch"                     # we read what Hermes wrote
    assert res["selected"] == "autoresearch" and res["discovered"][0][2] is True     # found and available
    assert res["is_memory_provider"] and res["module"] == "_hermes_user_memory.autoresearch"
    first, second = res["turns"]
    assert first["context"] == ""                                     # nothing was queued before turn 1
    assert second["context"].startswith("Related notes from your vault:") and "(ai/rag/graphrag.md)" in second["context"]
    assert second["sanitized_equal"]                                  # we emit no fence or system note ourselves
    assert second["fenced"].count("<memory-context>") == 1 and second["context"] in second["fenced"]
    assert [r["stopped_by"] for r in _rows(log, "contract-a")] == [None, None]


def test_b_the_agent_loop_carries_our_block_in_the_second_request_only(hermes_py, server, tmp_path):
    url, _ = server
    home = _home(tmp_path, url)
    res = drive(hermes_py, "agent", tmp_path, home=str(home), server=url, session="contract-b",
                messages=[GRAPH_Q, KIMCHI_Q])
    assert res["providers"] == ["autoresearch"]
    first, second = res["requests"]
    assert "<memory-context>" not in _last_user(first) and "Related notes" not in _last_user(first)
    assert _last_user(second).startswith(KIMCHI_Q) and "<memory-context>" in _last_user(second)
    assert "(ai/rag/graphrag.md)" in _last_user(second).split("<memory-context>")[1]
    assert [c["call"] for c in res["provider_log"]][:3] == ["initialize", "prefetch", "queue"]


def test_c_the_kill_switch_keeps_every_message_off_the_server(hermes_py, server, tmp_path):
    url, log = server
    home = _home(tmp_path, url)
    res = drive(hermes_py, "agent", tmp_path, home=str(home), server=url, session="contract-c",
                messages=[GRAPH_Q, KIMCHI_Q], env={"AUTORESEARCH_RECALL": "0"})
    assert res["providers"] == ["autoresearch"]
    assert not any("<memory-context>" in _last_user(r) for r in res["requests"])
    assert _rows(log, "contract-c") == []                             # the messages never left Hermes
    assert {c.get("stopped_by") for c in res["provider_log"] if c["call"] in ("queue", "prefetch")} == {"kill_switch"}


def test_d_a_dead_server_costs_the_turn_nothing(hermes_py, tmp_path):   # no server at all
    dead = f"http://127.0.0.1:{free_port()}"
    home = _home(tmp_path, dead)
    res = drive(hermes_py, "agent", tmp_path, home=str(home), server=dead, session="contract-d",
                messages=[GRAPH_Q, KIMCHI_Q], dead_server=True)
    assert len(res["requests"]) == 2 and not any("<memory-context>" in _last_user(r) for r in res["requests"])
    calls = [c for c in res["provider_log"] if c["call"] in ("queue", "prefetch")]
    assert len(calls) == 4 and all(not c["ok"] and "unreachable" in c["error"] for c in calls)
    # Hermes waits up to 8 s for a provider's prefetch and warns when it gave up: it never had to
    assert not [w for w in res["warnings"] if "timed out" in w or "prefetch" in w], res["warnings"]


def test_e_a_profile_set_through_hermes_contextvar_reaches_our_background_work(hermes_py, server, tmp_path):
    url, log = server
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("memory:\n  provider: holographic\n")        # the process's own home
    profile = _home(tmp_path, url, name="home/profiles/coder")                     # the task's profile
    res = drive(hermes_py, "agent", tmp_path, home=str(home), profile_home=str(profile), server=url,
                session="contract-e", messages=[GRAPH_Q, KIMCHI_Q])
    assert res["providers"] == ["autoresearch"]                     # the profile's config chose the provider
    assert "(ai/rag/graphrag.md)" in _last_user(res["requests"][1])    # queue and prefetch agreed on the profile
    rows = _rows(log, "contract-e")
    assert len(rows) == 2 and {r["profile"] for r in rows} == {"coder"}
    assert {c["profile"] for c in res["provider_log"] if c["call"] == "queue"} == {"coder"}


def test_f_g_no_note_twice_in_a_session_and_the_log_has_hermes_session_id(hermes_py, server, tmp_path):
    url, log = server
    home = _home(tmp_path, url)
    res = drive(hermes_py, "agent", tmp_path, home=str(home), server=url,            # Hermes names the session
                messages=[GRAPH_Q, GRAPH_Q, "GraphRAG community report 만드는 법 다시 설명해줘", KIMCHI_Q])
    last = res["requests"][-1]                                # the whole transcript, earlier blocks replayed
    given = [n for m in last for block in (m["content"] or "").split("<memory-context>")[1:]
             for n in NOTE_RE.findall(block.split("</memory-context>")[0])]
    assert "ai/rag/graphrag.md" in given and len(given) == len(set(given)), given      # (f)
    sid = res["session_id"]
    assert sid and len(_rows(log, sid)) == 4                                        # (g)
    assert {c["session"] for c in res["provider_log"] if c["call"] in ("queue", "prefetch")} == {sid}


def test_wrapping_holographic_shares_the_budget_and_routes_its_tools(hermes_py, server, tmp_path):
    url, _ = server
    home = _home(tmp_path, url, wrap="holographic")
    cfg = home / "plugins" / "autoresearch" / "config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "char_budget": 600}))
    res = drive(hermes_py, "manager", tmp_path, home=str(home), server=url, session="contract-w",
                messages=[GRAPH_Q, KIMCHI_Q], fact="김치찌개 재료는 묵은지와 돼지 앞다리살이 좋다")
    assert {"fact_store", "fact_feedback"} <= set(res["tools"])
    assert res["tool_result"]["status"] == "added"
    assert "Holographic Memory" in res["system_prompt"]
    both = res["after_fact"]
    assert "## Holographic Memory" in both and "묵은지" in both
    assert res["turns"][1]["context"].startswith("Related notes from your vault:")
    assert len(both) <= 600 and len(res["turns"][1]["context"]) <= 600
