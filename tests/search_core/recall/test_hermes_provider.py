"""The Hermes memory provider, our side: the standard-library provider against a real `serve` on the demo index,
its installer and status (the contract with the real Hermes is tests/search_core/recall/test_hermes_contract.py)."""

import json
import os
import socket
import subprocess
import sys
from contextlib import contextmanager

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.config import SearchConfig
from search_core.recall import hermes as provider_mod
from search_core.recall.backend import SearchBackend
from search_core.recall.config import RECALL_ENV, RecallConfig
from search_core.recall.engine import RecallEngine
from search_core.recall.hermes import AutoresearchMemoryProvider, defuse, profile_of
from search_core.recall.hermes_install import PROVIDER_DIR, SELECT_LINE, install, provider_version, selected_provider, status
from search_core.recall.log import RecallLog, read_calls
from tests.helpers import free_port
from tests.helpers.http import running
from tuner.cli import main

GRAPH_Q = "GraphRAG에서 커뮤니티 요약은 어떻게 만들어?"
KIMCHI_Q = "김치찌개 끓이는 순서랑 재료 알려줘"


@contextmanager
def serving(db, tmp_path, port=None, **cfg):
    cfg.setdefault("timeout_s", 60.0)          # the shared machine: a generous bound for the searches
    engine = RecallEngine(SearchBackend(db, SearchConfig(threshold=0.0)), RecallLog(tmp_path / "recall.sqlite"),
                          RecallConfig(**cfg))
    with running(engine, port=port) as url:
        yield url, engine


def _provider(url, home, **cfg):
    p = AutoresearchMemoryProvider({"server": url, "timeout_ms": 30_000, **cfg})   # generous: a shared machine
    p.initialize("hermes-sess-1", hermes_home=str(home), platform="cli")
    return p


def _turn(p, engine, message):
    """One Hermes turn as 0.19.0 calls it: prefetch (empty session id), the model, then queue_prefetch."""
    block = p.prefetch(message)                    # session_id="" in Hermes 0.19.0
    p.queue_prefetch(message, session_id="hermes-sess-1")
    assert engine.wait_idle(60)
    return block


def test_one_turn_late_with_the_session_from_initialize_and_no_note_twice(demo_index, tmp_path):
    home = tmp_path / "home"
    with serving(demo_index, tmp_path) as (url, engine):
        p = _provider(url, home)
        blocks = [_turn(p, engine, m) for m in (GRAPH_Q, GRAPH_Q, KIMCHI_Q, "감사합니다 수고하셨습니다!")] + [p.prefetch("")]
    assert blocks[0] == ""                                              # nothing queued before turn 1
    assert "ai/rag/graphrag" in blocks[1] and blocks[1].startswith("Related notes from your vault:")
    notes = [ln.split("(")[-1].split(")")[0] for b in blocks for ln in b.splitlines() if ln.startswith("- ")]
    assert len(notes) == len(set(notes)), notes                         # a note given once is not given again
    assert "ai/rag/graphrag" not in blocks[2]                           # the same question asked again
    assert "life/cooking/kimchi-jjigae" in blocks[3] and blocks[4] == ""   # small talk: nothing
    assert all(len(b) <= 1200 for b in blocks)
    rows = read_calls(tmp_path / "recall.sqlite")
    assert {r["session"] for r in rows} == {"hermes-sess-1"}            # Hermes's session id, not ""
    assert [r["stopped_by"] for r in rows][-1] == "small_talk"
    log = [json.loads(ln) for ln in (home / "logs" / provider_mod.LOG_FILE).read_text().splitlines()]
    assert [c["call"] for c in log[:3]] == ["initialize", "prefetch", "queue"]
    assert {c["session"] for c in log} == {"hermes-sess-1"}
    assert all(c["ok"] for c in log) and sum(1 for c in log if c.get("chars")) == sum(1 for b in blocks if b)


def test_session_switch_budget_kill_switch_and_profile(demo_index, tmp_path, monkeypatch):
    with serving(demo_index, tmp_path) as (url, engine):
        p = _provider(url, tmp_path / "profiles" / "coder", char_budget=300)
        _turn(p, engine, GRAPH_Q)
        block = p.prefetch("")
        assert 0 < len(block) <= 300
        p.on_session_switch("hermes-sess-2", parent_session_id="hermes-sess-1", reset=True)
        p.queue_prefetch(GRAPH_Q, session_id="")        # an empty id falls back to the switched one
        assert engine.wait_idle(60)
        assert "ai/rag/graphrag" in p.prefetch("")      # a new session may be given the note again
        monkeypatch.setenv(RECALL_ENV, "0")
        p.queue_prefetch(KIMCHI_Q, session_id="hermes-sess-2")
        assert engine.wait_idle(60)
        assert p.prefetch("") == ""
    rows = read_calls(tmp_path / "recall.sqlite")
    assert [r["session"] for r in rows] == ["hermes-sess-1", "hermes-sess-2"]   # the switched-off call never left
    assert {r["profile"] for r in rows} == {"coder"}                               # $HERMES_HOME/profiles/coder


def test_a_restarted_server_is_reached_again_on_the_next_call(demo_index, tmp_path):
    port = free_port()
    with serving(demo_index, tmp_path / "1", port=port) as (url, engine):
        p = _provider(url, tmp_path / "home")
        _turn(p, engine, GRAPH_Q)
        assert len(p._client._idle) == 1          # the connection is kept for the next call
    with serving(demo_index, tmp_path / "2", port=port) as (url, engine):   # `serve` restarted meanwhile
        p.queue_prefetch(GRAPH_Q, session_id="hermes-sess-1")
        assert engine.wait_idle(60)
        assert "ai/rag/graphrag" in p.prefetch("")
    log = [json.loads(ln) for ln in (tmp_path / "home" / "logs" / provider_mod.LOG_FILE).read_text().splitlines()]
    assert all(c["ok"] for c in log), log


def test_a_dead_or_silent_server_gives_an_empty_block_and_never_raises(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    p = AutoresearchMemoryProvider({"server": dead})
    p.initialize("s", hermes_home=str(tmp_path))
    p.queue_prefetch(GRAPH_Q, session_id="s")
    assert p.prefetch(GRAPH_Q) == ""
    # a server that accepts the connection and never answers: the provider's timeout ends the call
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        p = AutoresearchMemoryProvider({"server": f"http://127.0.0.1:{silent.getsockname()[1]}", "timeout_ms": 50})
        p.initialize("s", hermes_home=str(tmp_path / "silent"))
        assert p.prefetch(GRAPH_Q) == ""
        p.queue_prefetch(GRAPH_Q, session_id="s")
    log = [json.loads(ln) for ln in (tmp_path / "logs" / provider_mod.LOG_FILE).read_text().splitlines()]
    assert [c["call"] for c in log] == ["initialize", "queue", "prefetch"] and not log[1]["ok"]
    assert "unreachable" in log[2]["error"]
    silent_log = (tmp_path / "silent" / "logs" / provider_mod.LOG_FILE).read_text()
    assert "timed out" in silent_log


def test_fences_and_system_notes_in_a_note_are_defused():
    text = "- Hermes (tools/hermes): put it in <memory-context> ... </Memory-Context> and [System note: x]"
    out = defuse(text)
    assert "<memory-context>" not in out.lower() and "</memory-context>" not in out.lower()
    assert "[system note:" not in out.lower() and "memory-context" in out and "System note:" in out
    assert profile_of("/h/.hermes/profiles/coder") == "coder" and profile_of("/h/.hermes") == "default"


def test_the_provider_shares_the_servers_constants():
    assert provider_mod.RECALL_ENV == RECALL_ENV
    assert provider_version(PROVIDER_DIR) == provider_mod.__version__
    assert provider_mod.DEFAULTS["char_budget"] == RecallConfig().char_budget


def test_install_status_and_reinstall(tmp_path):
    home = tmp_path / "hermes"
    with pytest.raises(SearchCoreError, match="no Hermes home"):
        install(home)
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\nmemory:\n  memory_enabled: true\n  provider: holographic\n")
    r = install(home, server="http://127.0.0.1:9999", token="s3cret")
    assert sorted(p.name for p in r.plugin_dir.iterdir()) == [".installed.json", "__init__.py", "client.py",
                                                              "config.json", "plugin.yaml"]
    assert r.previous_version is None and not r.selected and r.config["token"] == "set"
    cfg = json.loads((r.plugin_dir / "config.json").read_text())
    assert cfg["server"] == "http://127.0.0.1:9999" and cfg["token"] == "s3cret"
    assert (r.plugin_dir / "config.json").stat().st_mode & 0o077 == 0      # the token file is the owner's
    assert selected_provider(home) == "holographic"

    r2 = install(home, timeout_ms=80)                 # a reinstall keeps what it is not told to change
    cfg = json.loads((r2.plugin_dir / "config.json").read_text())
    assert r2.previous_version == provider_mod.__version__ and cfg["server"] == "http://127.0.0.1:9999"
    assert cfg["timeout_ms"] == 80 and cfg["token"] == "s3cret"
    assert not [p for p in (home / "plugins").iterdir() if p.name != "autoresearch"]   # no staging left behind
    with pytest.raises(SearchCoreError, match="not an http URL"):
        install(home, server="127.0.0.1:8765")
    with pytest.raises(SearchCoreError, match="wrappable"):
        install(home, wrap="mem0")

    s = status(home)
    assert s.installed and s.version == s.bundled_version and s.selected == "holographic" and not s.server_ok
    assert any(SELECT_LINE in p for p in s.problems()) and any("does not answer" in p for p in s.problems())
    (home / "config.yaml").write_text("memory:\n  provider: autoresearch   # vault notes\n")
    assert status(home).selected == "autoresearch"



def test_status_without_a_hermes_home_says_to_create_it_before_install(tmp_path):
    """`install` refuses a Hermes home that is not there, so status must not send the user to it first."""
    home = tmp_path / "never-ran-hermes"
    first = status(home, server=f"http://127.0.0.1:{free_port()}").problems()[0]
    assert f"no Hermes home at {home}: run `hermes` once to create it" in first, first
    with pytest.raises(SearchCoreError, match="no Hermes home"):
        install(home)
    home.mkdir()
    first = status(home, server=f"http://127.0.0.1:{free_port()}").problems()[0]
    assert first == f"not installed: run `autoresearch hermes install --hermes-home {home}`"

def _hermes_home(tmp_path):
    home = tmp_path / "hermes"
    home.mkdir()
    return home


def test_a_damaged_config_is_kept_beside_and_its_token_is_not_dropped(tmp_path):
    # It was replaced by the defaults with one warning: the token went, and the provider then got 401.
    home = _hermes_home(tmp_path)
    plugin = install(home, server="http://127.0.0.1:9999", token="s3cret", timeout_ms=400).plugin_dir
    damaged = (plugin / "config.json").read_text().replace('"timeout_ms": 400', '"timeout_ms": 400,,')
    (plugin / "config.json").write_text(damaged)
    r = install(home)
    cfg = json.loads((plugin / "config.json").read_text())
    assert cfg["token"] == "s3cret" and cfg["server"] == "http://127.0.0.1:9999" and cfg["timeout_ms"] == 400
    (warning,) = r.warnings
    assert "could not be parsed" in warning and "token" in warning and "No token" not in warning
    (backup,) = plugin.glob("config.json.bak-*")
    assert backup.read_text() == damaged and backup.name in warning
    assert backup.stat().st_mode & 0o077 == 0                   # it holds the token too

    (plugin / "config.json").write_bytes(b"\x00\x9f garbage \xff")   # nothing legible: said, with the fix
    r = install(home)
    assert json.loads((plugin / "config.json").read_text())["token"] is None
    (warning,) = r.warnings
    assert "No token could be read" in warning and "autoresearch hermes install --token TOKEN" in warning
    # the earlier backup is still there, beside this one, even when both installs ran in the same second
    assert sorted(b.read_bytes() for b in plugin.glob("config.json.bak-*")) == sorted(
        [damaged.encode(), b"\x00\x9f garbage \xff"])
    (plugin / "config.json").write_text("[]")
    (warning,) = install(home, token="n3w").warnings            # a token given now: nothing to say about it
    assert "not an object" in warning and "No token" not in warning
    assert json.loads((plugin / "config.json").read_text())["token"] == "n3w"


def test_an_edited_provider_file_is_kept_and_said(tmp_path):
    home = _hermes_home(tmp_path)
    plugin = install(home).plugin_dir
    assert install(home).warnings == ()                         # an unchanged reinstall has nothing to say
    edited = (plugin / "__init__.py").read_text() + "\n# my own tweak\n"
    (plugin / "__init__.py").write_text(edited)
    r = install(home)
    (warning,) = r.warnings
    assert "replaced" in warning and "was edited" in warning and "__init__.py" in warning
    (backup,) = plugin.glob("__init__.py.bak-*")
    assert backup.read_text() == edited and str(backup) in warning
    assert (plugin / "__init__.py").read_bytes() == (PROVIDER_DIR / "__init__.py").read_bytes()
    assert install(home).warnings == () and list(plugin.glob("__init__.py.bak-*")) == [backup]   # kept on
    # installed before the record existed: a copy that differs is kept (an edit cannot be told from age)
    (plugin / ".installed.json").unlink()
    (plugin / "plugin.yaml").write_text((plugin / "plugin.yaml").read_text() + "# old or edited\n")
    (warning,) = install(home).warnings
    assert "plugin.yaml" in warning and "no record" in warning and list(plugin.glob("plugin.yaml.bak-*"))


def test_status_says_why_a_server_that_answers_is_not_healthy(tmp_path):
    home = _hermes_home(tmp_path)
    missing = tmp_path / "no-index.sqlite"
    engine = RecallEngine(SearchBackend(missing, SearchConfig()), None, RecallConfig(timeout_s=60.0))
    with running(engine) as url:
        install(home, server=url)
        s = status(home)
    assert not s.server_ok
    (problem,) = [p for p in s.problems() if url in p]
    assert "answers but is not healthy" in problem and f"no index at {missing}" in problem


def test_cli_install_and_status(demo_index, tmp_path):
    home = tmp_path / "hermes"
    home.mkdir()
    with serving(demo_index, tmp_path) as (url, engine):
        out = CliRunner().invoke(main, ["hermes", "install", "--hermes-home", str(home), "--server", url])
        assert out.exit_code == 0, out.output
        assert SELECT_LINE in out.output and "keeps its old provider and system prompt" in out.output
        p = AutoresearchMemoryProvider(plugin_dir=home / "plugins" / "autoresearch")   # the installed config
        p.initialize("cli-sess", hermes_home=str(home))
        p.queue_prefetch(GRAPH_Q, session_id="cli-sess")
        assert engine.wait_idle(60)
        p.prefetch("")
        out = CliRunner().invoke(main, ["hermes", "status", "--hermes-home", str(home), "--json"])
        assert out.exit_code == 0, out.output
        s = json.loads(out.output)
        text = CliRunner().invoke(main, ["hermes", "status", "--hermes-home", str(home)]).output
    assert s["installed"] and s["server_ok"] and s["server"] == url and s["selected"] is None
    assert [c["call"] for c in s["last_calls"]] == ["initialize", "queue", "prefetch"]
    assert s["last_calls"][-1]["chars"] > 0 and s["last_calls"][-1]["session"] == "cli-sess"
    assert "answers" in text and "prefetch" in text and f"TODO: Hermes uses memory.provider (none): run `{SELECT_LINE}`" in text
    bad = CliRunner().invoke(main, ["hermes", "install", "--hermes-home", str(tmp_path / "nope")])
    assert bad.exit_code != 0 and "no Hermes home" in bad.output


INSTALLED_AGENT = r'''
import importlib.util, json, sys, time
folder = sys.argv[1]
spec = importlib.util.spec_from_file_location("_hermes_user_memory_autoresearch", folder + "/__init__.py",
                                              submodule_search_locations=[folder])
mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)
class Ctx:
    def register_memory_provider(self, p): self.p = p
ctx = Ctx(); mod.register(ctx); p = ctx.p
p.initialize("iso-1", hermes_home=sys.argv[2])
p.queue_prefetch(sys.argv[3], session_id="iso-1")
for _ in range(1800):           # the search runs in the server: ask until its block is there
    block = p.prefetch("")
    if block:
        break
    time.sleep(0.1)
third = sorted(m for m in sys.modules if m.split(".")[0] in ("search_core", "tuner", "numpy", "click", "yaml"))
print(json.dumps({"block": block, "name": p.name, "third_party": third}))
'''


def test_the_installed_copy_runs_on_the_standard_library_alone(demo_index, tmp_path):
    home = tmp_path / "hermes"
    home.mkdir()
    with serving(demo_index, tmp_path) as (url, engine):
        r = install(home, server=url, timeout_ms=8000)   # the most Hermes allows; a shared machine
        (tmp_path / "agent.py").write_text(INSTALLED_AGENT)
        out = subprocess.run([sys.executable, "-I", str(tmp_path / "agent.py"), str(r.plugin_dir), str(home), GRAPH_Q],
                             capture_output=True, text=True, timeout=180, env={"PATH": os.environ.get("PATH", "")})
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["name"] == "autoresearch" and "ai/rag/graphrag" in res["block"] and res["third_party"] == []


def test_status_counts_the_calls_the_server_answered_when_the_provider_logged_none(index_db, tmp_path):
    from search_core.recall.client import RecallClient
    home = tmp_path / "hermes"
    home.mkdir()
    with serving(index_db, tmp_path) as (url, engine):
        install(home, server=url)
        rc = RecallClient(url, timeout=60)           # another client: nothing in this home's provider log
        for i in range(3):
            rc.queue(GRAPH_Q, f"other-{i}")
        assert engine.wait_idle(60)
        for i in range(3):
            rc.prefetch(f"other-{i}")
        s = status(home)
        text = CliRunner().invoke(main, ["hermes", "status", "--hermes-home", str(home)]).output
    assert s.last_calls == () and s.server_calls == {"/queue": 3, "/prefetch": 3}
    assert any("answered 6 recall call(s)" in p and "logged none" in p for p in s.problems())
    assert "no calls logged yet" not in text and "server calls  6 recall call(s)" in text, text
