"""The body of a request to `serve`: read within a size and a time limit, parsed as one JSON object that
repeats no key and names only the fields its endpoint reads, each field checked; every refusal an ApiError
that says what to send instead.
"""

from __future__ import annotations

import asyncio
import json

from search_core.recall.http_guard import BODY_TIMEOUT_S
from search_core.validate import clean_text, unknown_field

MAX_BODY_BYTES = 64 * 1024        # a turn's message is a few KB; 64 KB is ~20 pages of text
MAX_QUERY_CHARS = 4000            # e5 reads 512 tokens (~1,500 Korean chars); past 4,000 a query is a paste
MAX_K = 100
MAX_PROFILE_CHARS = 200           # a profile is a name, not a document
MAX_SESSION_CHARS = 200           # an id, as over MCP; 60 KB ids used to be kept, per session, forever


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status, code, message):
    from starlette.responses import JSONResponse
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


async def read_body(request, max_body: int) -> bytes:
    from starlette.requests import ClientDisconnect
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                raise ApiError(413, "body_too_large", f"the body is over {max_body:,} bytes; send a shorter query")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(499, "client_disconnected", "the client went away mid-request") from None
    return b"".join(chunks)


# The fields each endpoint reads; anything else is refused by name (a misspelt "session_id" would have
# searched under an empty session and delivered the block to nobody).
FIELDS = {"/search": ("query", "k", "explain"), "/queue": ("query", "session_id", "profile"),
          "/prefetch": ("session_id", "held", "exclude_notes", "char_budget", "profile", "explain")}


def explain_flag(data: dict) -> bool:
    """The "explain" field: true adds the gate's features (and a search's timings) to the answer."""
    v = data.get("explain", False)
    if not isinstance(v, bool):
        raise ApiError(400, "wrong_type", f'"explain" must be true or false, not {type(v).__name__}')
    return v


def known_fields(data: dict, fields: tuple[str, ...], path: str) -> dict:
    refusal = unknown_field(data, fields, path)
    if refusal:
        raise ApiError(400, "unknown_field", refusal)
    return data


class DuplicateKey(ValueError):
    pass


def no_duplicate_keys(pairs: list) -> dict:
    """json.loads keeps the last of two equal keys: a body can then pass a check on one value and act on
    another, and a text/plain form post can only be shaped into JSON by repeating a key."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(k)
        out[k] = v
    return out


async def read_json(request, max_body: int, fields: tuple[str, ...] | None = None) -> dict:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_body:
        raise ApiError(413, "body_too_large", f"the body is {int(declared):,} bytes; the limit is {max_body:,}")
    try:   # a body sent a byte at a time would hold the connection (and its file) for as long as it likes
        raw = await asyncio.wait_for(read_body(request, max_body), BODY_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise ApiError(408, "body_timeout", f"the body did not arrive within {BODY_TIMEOUT_S:.0f} s") from None
    if not raw.strip():
        raise ApiError(400, "empty_body", 'the body is empty; send JSON, e.g. {"query": "...", "session_id": "..."}')
    try:
        data = json.loads(raw, object_pairs_hook=no_duplicate_keys)
    except DuplicateKey as e:
        raise ApiError(400, "duplicate_key", f'the body names "{e.args[0]}" twice; send each field once') from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:    # 64 KB of "[" nests too deep
        raise ApiError(400, "invalid_json", f"the body is not valid JSON ({e}); send an object like "
                                            '{"query": "...", "session_id": "..."}') from None
    if not isinstance(data, dict):
        raise ApiError(400, "not_an_object", f"the body must be a JSON object, not {type(data).__name__}")
    return data if fields is None else known_fields(data, fields, request.url.path)


def text_field(data: dict, name: str, *, required=True, max_chars=None) -> str | None:
    """A string field of a body, its lone surrogates made U+FFFD (search_core.validate.clean_text)."""
    v = data.get(name)
    if v is None:
        if required:
            raise ApiError(400, "missing_field", f'"{name}" is required; fields: {", ".join(sorted(data)) or "none"}')
        return None
    if not isinstance(v, str):
        raise ApiError(400, "wrong_type", f'"{name}" must be a string, not {type(v).__name__}')
    if max_chars and len(v) > max_chars:
        raise ApiError(413, "query_too_long", f'"{name}" has {len(v):,} characters; the limit is {max_chars:,}. '
                                              "Send the user's message, not a whole document")
    return clean_text(v)
