"""`autoresearch mcp`: the vault over the Model Context Protocol (stdio), for any MCP host.

Two tools with typed inputs:
- search_notes(query, k)            -> what `search --json` prints (errors come back as tool errors)
- recall(query, session_id, held)   -> the gated recall block, through the same gates and the same log
                                       as the HTTP /prefetch path; it never fails, an empty block at worst
"""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any

from pydantic import Field

from search_core import SearchCoreError
from search_core.recall.engine import RecallEngine
from search_core.recall.server import MAX_K, MAX_QUERY_CHARS

INSTRUCTIONS = ("Search the user's personal markdown notes (Korean and English). Use search_notes to look "
                "something up; use recall with the user's latest message to get a short block of relevant notes "
                "to keep in mind (empty when nothing is relevant enough).")


def build_server(engine: RecallEngine):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("autoresearch", instructions=INSTRUCTIONS)

    @server.tool(name="search_notes", description="Hybrid search (dense + BM25 + entities) over the user's notes: "
                                                  "the top results with title, note id, snippet and scores.")
    def search_notes(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many results")] = 5,
    ) -> dict[str, Any]:
        try:
            return engine.search(query, k).as_dict()
        except (SearchCoreError, sqlite3.Error, TimeoutError) as e:
            raise ToolError(f"search failed: {e}") from None

    @server.tool(name="recall", description="The notes worth injecting for this message, as one short block "
                                            "(<= 1,200 characters), or an empty block with the gate that held it back.")
    def recall(
        query: Annotated[str, Field(max_length=MAX_QUERY_CHARS, description="The user's latest message")],
        session_id: Annotated[str, Field(max_length=200, description="A stable id for the conversation")] = "mcp",
        held: Annotated[list[str], Field(description="Lines already in the context; they are left out")] = [],  # noqa: B006
    ) -> dict[str, Any]:
        return engine.recall_now(query, session_id, held).as_dict()

    return server


def run_stdio(engine: RecallEngine) -> None:
    """Serve until the host closes stdin. The model loads before the first request, not inside it."""
    err = engine.warm()
    if err:
        import sys
        print(f"autoresearch mcp: the index is not usable yet ({err}); tools will report it", file=sys.stderr)
    try:
        build_server(engine).run("stdio")
    finally:
        engine.close(wait=True)
