"""`autoresearch mcp` driven over stdio by the mcp SDK's own client."""

import asyncio
import json
import sys

import pytest

from search_core.recall.log import read_calls
from tests.helpers import ROOT

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
    assert set(tools) == {"search_notes", "recall"}
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
