"""`autoresearch mcp` driven over stdio by the mcp SDK's own client."""

import asyncio
import json
import shutil
import subprocess
import sys
import time

import pytest

from search_core.recall.log import read_calls
from tests.helpers import DEMO_VAULT, ROOT, SMALL_VAULT, write_vault
from tests.helpers.mcp_stdio import McpProcess

QUESTION = "GraphRAG에서 커뮤니티 요약은 어떻게 만드나요?"


def test_mcp_client_lists_and_calls_the_tools(small_index_e5, tmp_path):
    from mcp import Client, StdioServerParameters

    cfg = tmp_path / "cfg.toml"
    cfg.write_text("threshold = 0.0\n")
    log = tmp_path / "log.sqlite"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from tuner.cli import main; main()", "mcp", "--db", str(small_index_e5), "--config", str(cfg),
              "--log", str(log), "--timeout", "60"],        # the machine is shared: a generous bound
        env={"PYTHONPATH": str(ROOT)}, cwd=str(tmp_path))

    async def session():
        async with Client(params, read_timeout_seconds=180) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            search = await c.call_tool("search_notes", {"query": QUESTION, "k": 2})
            recall = await c.call_tool("recall", {"query": QUESTION, "session_id": "host-1"})
            held = await c.call_tool("recall", {"query": QUESTION, "session_id": "host-1",
                                                "held": recall.structured_content["block"].splitlines()})
            chat = await c.call_tool("recall", {"query": "안녕하세요 좋은 아침이에요", "session_id": "host-1"})
            empty = await c.call_tool("search_notes", {"query": ""})
            bad_k = await c.call_tool("search_notes", {"query": "RRF", "k": 0})
            return tools, search, recall, held, chat, empty, bad_k

    tools, search, recall, held, chat, empty, bad_k = asyncio.run(session())
    assert set(tools) == {"search_notes", "recall", "get_note"}
    props = tools["search_notes"].input_schema["properties"]
    assert props["query"]["type"] == "string" and props["k"]["type"] == "integer" and props["k"]["minimum"] == 1
    assert tools["recall"].input_schema["properties"]["held"]["type"] == "array"
    assert not search.is_error
    res = search.structured_content
    assert [r["note_id"] for r in res["results"]][0] == "ai/graphrag" and len(res["results"]) == 2
    assert json.loads(search.content[0].text)["results"] == res["results"]
    blk = recall.structured_content
    assert blk["injected"] and "GraphRAG" in blk["block"] and blk["stopped_by"] is None
    assert held.structured_content["block"] == "" and not held.structured_content["injected"]
    assert chat.structured_content["stopped_by"] == "small_talk"
    assert empty.is_error and "at least 1 character" in empty.content[0].text
    assert bad_k.is_error and "greater than or equal to 1" in bad_k.content[0].text
    rows = read_calls(log)
    assert [r["session"] for r in rows] == ["host-1"] * 3
    assert [r["stopped_by"] for r in rows] == [None, None, "small_talk"]


def test_an_argument_name_a_tool_does_not_take_is_refused_with_the_name_meant(small_index, tmp_path):
    # The SDK dropped unknown arguments without a word: "sesion_id" recalled under the default session.
    from mcp import Client

    from search_core.config import SearchConfig
    from search_core.recall.config import RecallConfig
    from search_core.recall.backend import SearchBackend
    from search_core.recall.engine import RecallEngine
    from search_core.recall.log import RecallLog
    from search_core.recall.mcp import build_server

    log = tmp_path / "log.sqlite"
    engine = RecallEngine(SearchBackend(small_index, SearchConfig(threshold=0.0)), RecallLog(log),
                          RecallConfig(timeout_s=60))

    async def session():
        async with Client(build_server(engine), read_timeout_seconds=180) as c:
            return (await c.call_tool("recall", {"query": QUESTION, "sesion_id": "host-1"}),
                    await c.call_tool("search_notes", {"query": QUESTION, "top_k": 2}),
                    await c.call_tool("recall", {"query": QUESTION, "session_id": "host-1"}))
    try:
        misspelt, top_k, good = asyncio.run(session())
    finally:
        engine.close()
    assert misspelt.is_error and "unknown field \"sesion_id\" (did you mean 'session_id'?)" in misspelt.content[0].text
    assert top_k.is_error and 'unknown field "top_k"' in top_k.content[0].text and "fields: query, k" in \
        top_k.content[0].text
    assert not good.is_error
    assert [r["session"] for r in read_calls(log)] == ["host-1"]      # the refused call was never searched


def test_a_line_nested_past_the_stack_is_handed_on_not_raised():
    # json.loads raised RecursionError on it, which ended the stdin reader: the host got no reply again
    from search_core.recall.mcp import clean_json_line
    deep = '{"jsonrpc": "2.0", "id": 1, "method": "x", "params": ' + "[" * 100_000 + '"\\ud83d"' + "]" * 100_000 + "}"
    assert clean_json_line(deep) == deep
    assert clean_json_line('{"q": "cut \\ud83d"}') == '{"q": "cut \\ufffd"}\n'


@pytest.mark.slow
def test_every_line_that_is_not_json_rpc_gets_an_error_reply_and_serving_goes_on(index_db, tmp_path):
    # The SDK handed such a line on as an exception and its server only logged it: the host waited forever.
    mcp = McpProcess(index_db, tmp_path / "log.sqlite", tmp_path)
    try:
        mcp.initialize()
        mcp.send("{not json")
        got = mcp.reply()
        assert got["jsonrpc"] == "2.0" and got["id"] is None and got["error"]["code"] == -32700, got
        mcp.send(b"\xff\xfe\x00 binary")
        assert mcp.reply()["error"]["code"] == -32700
        mcp.send("")                                                  # a blank line is no message: no reply
        mcp.send("[1, 2]")                                            # JSON, but not a message
        got = mcp.reply()
        assert got["id"] is None and got["error"]["code"] == -32600 and "JSON-RPC" in got["error"]["message"]
        mcp.send('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": 5}')
        got = mcp.reply()                                             # its id is readable: the host waits on it
        assert got["id"] == 7 and got["error"]["code"] == -32600 and "params" in got["error"]["message"]
        call = mcp.call("search_notes", {"query": "GraphRAG", "k": 1})
        got = mcp.reply()
        assert got["id"] == call and got["result"]["structuredContent"]["results"], got
    finally:
        assert mcp.close() == 0



@pytest.mark.slow
def test_calls_during_a_full_rebuild_of_the_index_are_answered(tmp_path, shared_cache):
    from search_core.index.indexer import index_vault
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(write_vault(tmp_path / "vault", SMALL_VAULT), db, cache=shared_cache)   # e5-small, by name
    other = tmp_path / "other-vault"
    shutil.copytree(DEMO_VAULT / "ai", other)             # 54 notes: the rebuild takes seconds, not minutes
    other_notes = {str(p.relative_to(other).with_suffix("")) for p in other.rglob("*.md")}
    mcp = McpProcess(db, tmp_path / "log.sqlite", tmp_path)
    rebuild = None
    try:
        mcp.initialize()
        # another vault into the same --db with an empty embedding cache: seconds of building a new file
        rebuild = subprocess.Popen([sys.executable, "-m", "tuner.cli", "index", str(other), "--db", str(db),
                                    "--full", "--cache", str(tmp_path / "fresh-cache.sqlite")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
        end = time.monotonic() + 300
        while not list(db.parent.glob(f"{db.name}.building-*")) and rebuild.poll() is None:
            assert time.monotonic() < end, "the rebuild never started its new file"
            time.sleep(0.05)
        during = 0
        while rebuild.poll() is None:           # every call while the new file is written gets its answer
            call = mcp.call("search_notes", {"query": f"검색 품질 {during}", "k": 3})
            got = mcp.reply()
            assert got is not None and got["id"] == call and "result" in got, got
            during += rebuild.poll() is None
        assert rebuild.wait() == 0, rebuild.stderr.read()[-2000:]
        assert during >= 1
        end = time.monotonic() + 300            # then the rebuilt index is searched (the view follows the swap)
        while True:
            call = mcp.call("search_notes", {"query": "retrieval augmented generation", "k": 3})
            got = mcp.reply()
            assert got is not None and got["id"] == call and not got["result"].get("isError"), got
            ids = [r["note_id"] for r in got["result"]["structuredContent"]["results"]]
            if ids and set(ids) <= other_notes:
                break
            assert time.monotonic() < end, f"still the old index after the rebuild: {ids}"
            time.sleep(0.2)
    finally:
        if rebuild is not None and rebuild.poll() is None:
            rebuild.kill()
            rebuild.wait(30)
        assert mcp.close() == 0


def _tool(mcp: McpProcess, name: str, arguments: dict) -> dict:
    call = mcp.call(name, arguments)
    got = mcp.reply()
    assert got["id"] == call, got
    return got["result"]


def test_get_note_reads_notes_by_id_or_path_and_the_server_names_its_version(index_db, tmp_path):
    from search_core.recall.mcp import package_version
    mcp = McpProcess(index_db, tmp_path / "log.sqlite", tmp_path)
    try:
        mcp.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        info = mcp.reply()["result"]["serverInfo"]
        assert info["name"] == "autoresearch" and info["version"] == package_version() and info["version"]
        mcp.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        hit = _tool(mcp, "search_notes", {"query": "GraphRAG 커뮤니티 요약", "k": 2})["structuredContent"]
        top = hit["results"][0]
        assert "features" not in hit["gate"] and hit["gate"]["reason"] and top["path"].endswith(".md")
        assert "features" in _tool(mcp, "search_notes", {"query": "GraphRAG", "explain": True})[
            "structuredContent"]["gate"]
        by_id = _tool(mcp, "get_note", {"id": top["note_id"]})["structuredContent"]["notes"]
        by_path = _tool(mcp, "get_note", {"id": top["path"]})["structuredContent"]["notes"]
        assert by_id == by_path and by_id[0]["note_id"] == top["note_id"] and by_id[0]["source"] == "file"
        assert by_id[0]["text"] == open(top["abs_path"], encoding="utf-8").read() and not by_id[0]["truncated"]
        ids = [r["note_id"] for r in hit["results"]]
        several = _tool(mcp, "get_note", {"ids": ids})["structuredContent"]["notes"]
        assert [n["note_id"] for n in several] == ids
        wrong = _tool(mcp, "get_note", {"id": top["note_id"] + "x"})
        assert wrong["isError"] and "close matches" in wrong["content"][0]["text"]
        assert top["note_id"] in wrong["content"][0]["text"]
        assert _tool(mcp, "get_note", {})["isError"]
    finally:
        assert mcp.close() == 0


def test_read_notes_shares_one_size_cap(index_db):
    from search_core.recall.notes import read_notes
    from search_core.search.pipeline import Searcher
    s = Searcher(index_db)
    try:
        ids = sorted(s.view.notes)[:3]
        full = read_notes(s.view, ids, cap=10**9)
        cut = read_notes(s.view, ids, cap=full[0].chars + 10)
        assert not cut[0].truncated and cut[1].truncated and len(cut[1].text) == 10 and cut[2].text == ""
        assert sum(len(n.text) for n in cut) == full[0].chars + 10
    finally:
        s.close()
