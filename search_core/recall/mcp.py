"""`autoresearch mcp`: the vault over the Model Context Protocol (stdio), for any MCP host.

Three tools with typed inputs (an argument name a tool does not take is refused, as an HTTP body's field is):
- search_notes(query, k)            -> what `search --json` prints (errors come back as tool errors)
- recall(query, session_id, held)   -> the gated recall block, through the same gates and the same log
                                       as the HTTP /prefetch path; it never fails, an empty block at worst
- get_note(id | ids)                -> whole notes by id or path (search_core.recall.notes), capped in size;
                                       an unknown one is a tool error naming close matches
search_notes and recall answer with the gate's decision and reason; `explain: true` adds its features.
"""

from __future__ import annotations

import inspect
import sqlite3
from typing import Annotated, Any

from pydantic import Field

from search_core import SearchCoreError
from search_core.recall.engine import RecallEngine
from search_core.recall.notes import MAX_NOTE_CHARS, MAX_NOTES
from search_core.recall.request_body import MAX_K, MAX_QUERY_CHARS
from search_core.validate import unknown_field

INSTRUCTIONS = ("Search the user's personal markdown notes (Korean and English). Use search_notes to look "
                "something up; use recall with the user's latest message to get a short block of relevant notes "
                "to keep in mind (empty when nothing is relevant enough).")


def package_version() -> str:
    """The installed package's version (what an MCP host shows as serverInfo.version), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("autoresearch")
    except PackageNotFoundError:
        from search_core import __version__
        return __version__


def build_server(engine: RecallEngine):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    tool_args: dict[str, tuple[str, ...]] = {}     # tool -> its parameters, read from the functions below

    class KnownArgumentsServer(MCPServer):
        """Refuses a tool call whose arguments include a name the tool does not take, with the name meant (the
        SDK drops it without a word: a misspelt "sesion_id" recalled under the default session)."""

        async def call_tool(self, name, arguments, context=None):
            if name in tool_args:
                refusal = unknown_field(arguments or {}, tool_args[name], name)
                if refusal:
                    raise ToolError(refusal)
            return await super().call_tool(name, arguments, context)

    server = KnownArgumentsServer("autoresearch", instructions=INSTRUCTIONS, version=package_version())

    @server.tool(name="search_notes", description="Hybrid search (dense + BM25 + entities) over the user's notes: "
                                                  "the top results with title, note id, snippet and scores.")
    def search_notes(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many results")] = 5,
        explain: Annotated[bool, Field(description="Add the gate's features and the timings")] = False,
    ) -> dict[str, Any]:
        try:
            return engine.search(query, k).as_dict(explain=explain)
        except (SearchCoreError, sqlite3.Error, TimeoutError) as e:
            raise ToolError(f"search failed: {e}") from None

    @server.tool(name="recall", description="The notes worth injecting for this message, as one short block "
                                            "(<= 1,200 characters), or an empty block with the gate that held it back.")
    def recall(
        query: Annotated[str, Field(max_length=MAX_QUERY_CHARS, description="The user's latest message")],
        session_id: Annotated[str, Field(max_length=200, description="A stable id for the conversation")] = "mcp",
        held: Annotated[list[str], Field(description="Lines already in the context; they are left out")] = [],  # noqa: B006
        explain: Annotated[bool, Field(description="Add the features the gate read")] = False,
    ) -> dict[str, Any]:
        return engine.recall_now(query, session_id, held).as_dict(explain=explain)

    @server.tool(name="get_note", description="Read whole notes by note id or vault path (from search_notes' "
                                              "results): `id` for one, `ids` for several at once. Long notes are "
                                              f"cut at {MAX_NOTE_CHARS:,} characters in all, and say so.")
    def get_note(
        id: Annotated[str | None, Field(max_length=1000, description="A note id or path")] = None,  # noqa: A002
        ids: Annotated[list[str] | None, Field(max_length=MAX_NOTES, description="Several note ids or paths")] = None,
    ) -> dict[str, Any]:
        refs = ([id] if id else []) + list(ids or [])
        try:
            return {"notes": [n.as_dict() for n in engine.read_notes(refs)]}
        except (SearchCoreError, sqlite3.Error, TimeoutError) as e:
            raise ToolError(str(e)) from None

    for name, fn in (("search_notes", search_notes), ("recall", recall), ("get_note", get_note)):
        tool_args[name] = tuple(inspect.signature(fn).parameters)
    return server


def clean_json_line(line: str) -> str:
    """A JSON-RPC line with every lone surrogate escape (`\\ud83d` alone: a JavaScript host cut a string
    inside an emoji) made U+FFFD. The SDK's parser refuses such a line, and the call then got no reply at
    all; Python's json reads it, so the line is read, cleaned and written back (only when it has one)."""
    if "\\ud" not in line.lower():
        return line
    import json

    from search_core.validate import clean_text

    def clean(v):
        if isinstance(v, str):
            return clean_text(v)
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {clean(k): clean(x) for k, x in v.items()}
        return v
    try:
        return json.dumps(clean(json.loads(line))) + "\n"
    except (ValueError, RecursionError):  # not JSON, or nested past Python's stack: the SDK answers it with its
        return line                      # own parse error (a RecursionError here ended the stdin reader)


PARSE_ERROR, INVALID_REQUEST = -32700, -32600     # JSON-RPC 2.0's codes


def unreadable_line_reply(exc: Exception):
    """The JSON-RPC error reply for a line the SDK's stdio reader could not read as a message (it hands the
    exception on, and the SDK's server only logs it at debug level: the host waited for a reply forever).
    Parse error (-32700) when the line is not JSON; invalid request (-32600) when it is JSON but not a
    JSON-RPC message, with its id when one can be read (the host is waiting on that id), else id null.
    None for a blank line, which is no message at all."""
    from mcp_types import ErrorData, JSONRPCError
    from pydantic import ValidationError

    errors = exc.errors() if isinstance(exc, ValidationError) else []
    bad_json = not errors or any(e["type"] == "json_invalid" for e in errors)
    if bad_json and any(e["type"] == "json_invalid" and isinstance(e.get("input"), str) and not e["input"].strip()
                        for e in errors):
        return None
    msg_id = None
    for e in errors:        # a field's error shows the field; a missing field's, the whole message
        v = e.get("input")
        if isinstance(v, dict) and isinstance(v.get("id"), (int, str)) and not isinstance(v.get("id"), bool):
            msg_id = v["id"]
            break
    if bad_json:
        error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON; send one JSON-RPC 2.0 "
                                                    "message per line")
    else:
        first = errors[0]
        error = ErrorData(code=INVALID_REQUEST, message=f"Invalid Request: not a JSON-RPC 2.0 message "
                          f"({'.'.join(map(str, first['loc'])) or 'message'}: {first['msg']})")
    return JSONRPCError(jsonrpc="2.0", id=msg_id, error=error)


class _CleanLines:
    """stdin for the SDK's stdio transport, each line through clean_json_line."""

    def __init__(self, stream):
        self.stream = stream

    def readline(self, *args) -> str:
        line = self.stream.readline(*args)
        return clean_json_line(line) if line else line


def run_stdio(engine: RecallEngine) -> None:
    """Serve until the host closes stdin. The model loads before the first request, not inside it."""
    import io
    import sys

    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    err = engine.warm()
    if err:
        print(f"autoresearch mcp: the index is not usable yet ({err}); tools will report it", file=sys.stderr)
    server = build_server(engine)
    stdin = anyio.wrap_file(_CleanLines(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")))

    async def answer_unreadable(read_stream, write_stream, messages):
        """Hand the SDK's server every message; answer each line it could not read (unreadable_line_reply)."""
        async with messages:
            async for item in read_stream:
                if isinstance(item, Exception):
                    reply = unreadable_line_reply(item)
                    if reply is not None:
                        await write_stream.send(SessionMessage(reply))
                else:
                    await messages.send(item)

    async def serve():   # MCPServer.run("stdio") with our stdin; the low-level run is the SDK's documented loop
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            low = server._lowlevel_server
            messages, received = anyio.create_memory_object_stream(0)
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_unreadable, read_stream, write_stream, messages)
                await low.run(received, write_stream, low.create_initialization_options())
    try:
        anyio.run(serve)
    finally:
        engine.close(wait=True)
