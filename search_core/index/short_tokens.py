"""Posting lists for 1- and 2-character tokens, stored in the index file at index time.

FTS5 trigram cannot match "AI", "팀" or "검색", so those tokens are answered by which chunks contain them
(what `text LIKE '%ab%' OR context LIKE '%ab%'` answers). Building that in memory at search time
(view.ShortTokenIndex: numpy.unique over every character of the corpus) cost every process 1-6 s
before its first answer on the 974-note wiki. Here the index writer stores one row per
character or bigram code with the sorted chunk ids that contain it; a lookup is one primary-key read.

It is derived data, not part of the index fingerprint: an index without it (written before it
existed) still searches, building the in-memory index as before, and any `autoresearch index` run
on it adds the table (BENCHMARKS.md, latency).
"""

from __future__ import annotations

import numpy as np

from search_core.index.store import get_meta, set_meta

META_KEY = "short_postings"
VERSION = 1
OWNER_BITS = 20                       # ShortTokenIndex packs (code, owner) keys the same way
DTYPE = np.int32                      # chunk ids as stored: half the bytes of int64 (ids are < 2**31)


def _ddl(conn) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS short_postings (code INTEGER PRIMARY KEY, chunks BLOB NOT NULL)")


def token_code(token: str) -> int:
    """A character's code point, or (first << 21 | second) for a bigram: the two ranges never meet
    (code points end at 0x10FFFF < 2**21)."""
    token = token.lower()
    if len(token) == 1:
        return ord(token)
    if len(token) == 2:
        return (ord(token[0]) << 21) | ord(token[1])
    raise ValueError("short-token postings answer 1- or 2-character tokens")


def chunk_text(context: str, text: str) -> str:
    return f"{context}\n{text}".lower()


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique by sorting. numpy 2.4's np.unique hashes integer arrays first: building johngrib's
    postings (13 M keys) took 12.6 s of CPU with it and 3.8 s with this, the same lists."""
    if not len(a):
        return a
    s = np.sort(a)
    return s[np.r_[True, s[1:] != s[:-1]]]


def codes_of(text: str) -> np.ndarray:
    """Distinct unigram and bigram codes of one (already lower-cased) chunk text."""
    cp = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    return sorted_unique(np.concatenate([cp, (cp[:-1] << 21) | cp[1:]]))


def _postings(rows) -> tuple[np.ndarray, list[np.ndarray]]:
    """rows of (chunk_id, context, text) -> (codes, sorted chunk ids per code), all in numpy."""
    rows = list(rows)
    if not rows:
        return np.zeros(0, np.int64), []
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    texts = [chunk_text(ctx, text) for _, ctx, text in rows]
    lens = np.array([len(t) for t in texts], dtype=np.int64)
    cp = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    owner = np.repeat(np.arange(len(texts), dtype=np.int64), lens)
    same = owner[:-1] == owner[1:]
    codes = np.concatenate([cp, ((cp[:-1] << 21) | cp[1:])[same]])
    owners = np.concatenate([owner, owner[:-1][same]])
    keys = sorted_unique((codes << OWNER_BITS) | owners)  # sorted by code, then by owner (= by chunk id)
    code = keys >> OWNER_BITS
    chunk = ids[keys & ((1 << OWNER_BITS) - 1)]
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    return code[starts], np.split(chunk, starts[1:])


def build(conn) -> int:
    """(Re)write every posting list from the chunks table. Call inside the writer's transaction."""
    _ddl(conn)
    conn.execute("DELETE FROM short_postings")
    conn.execute("DELETE FROM meta WHERE key = ?", (META_KEY,))
    rows = conn.execute("SELECT id, context, text FROM chunks ORDER BY id").fetchall()
    if rows and rows[-1][0] >= 2 ** 31:   # ids past int32: searches build the in-memory index instead
        return 0
    if len(rows) >= 1 << OWNER_BITS:      # keys hold the chunk's position in 20 bits: build in slices
        codes, lists = _merge_slices(rows)
    else:
        codes, lists = _postings(rows)
    conn.executemany("INSERT INTO short_postings(code, chunks) VALUES (?, ?)",
                     ((int(c), np.sort(l).astype(DTYPE).tobytes()) for c, l in zip(codes, lists)))
    set_meta(conn, META_KEY, {"version": VERSION})
    return len(codes)


def _merge_slices(rows):
    merged: dict[int, list[np.ndarray]] = {}
    step = (1 << OWNER_BITS) - 1
    for i in range(0, len(rows), step):
        for c, l in zip(*_postings(rows[i:i + step])):
            merged.setdefault(int(c), []).append(l)
    codes = sorted(merged)
    return np.array(codes, np.int64), [np.concatenate(merged[c]) for c in codes]


def is_built(conn) -> bool:
    meta = get_meta(conn, META_KEY)
    return bool(meta) and meta.get("version") == VERSION


def update(conn, removed: list[tuple[int, str, str]], added: list[tuple[int, str, str]]) -> None:
    """Keep the lists right after an incremental write: ids of removed chunks leave the lists of their
    codes, added chunks join theirs. Only the codes those chunks contain are read and rewritten."""
    if any(cid >= 2 ** 31 for cid, _, _ in added):
        conn.execute("DELETE FROM meta WHERE key = ?", (META_KEY,))   # searches fall back to memory
        return
    gone: dict[int, set[int]] = {}
    for cid, ctx, text in removed:
        for c in codes_of(chunk_text(ctx, text)).tolist():
            gone.setdefault(c, set()).add(cid)
    new: dict[int, list[int]] = {}
    for cid, ctx, text in added:
        for c in codes_of(chunk_text(ctx, text)).tolist():
            new.setdefault(c, []).append(cid)
    # every added chunk id is above every id still in a list (next_chunk_id numbers from the max after
    # the deletes), so a list is its kept part followed by the new ids: no union, no re-sort
    for c in sorted(set(gone) | set(new)):
        row = conn.execute("SELECT chunks FROM short_postings WHERE code = ?", (c,)).fetchone()
        have = np.frombuffer(row[0], dtype=DTYPE) if row else np.zeros(0, DTYPE)
        if c in gone:
            out = np.sort(np.fromiter(gone[c], DTYPE))
            at = np.searchsorted(have, out)
            hit = at[(at < len(have)) & (have[np.minimum(at, len(have) - 1)] == out)] if len(have) else at[:0]
            have = np.delete(have, hit)
        if c in new:
            add = np.array(sorted(new[c]), DTYPE)
            if len(have) and len(add) and add[0] <= have[-1]:
                have = np.union1d(have, add).astype(DTYPE)     # ids not above the list: keep it exact anyway
            else:
                have = np.concatenate([have, add])
        if len(have):
            conn.execute("INSERT OR REPLACE INTO short_postings(code, chunks) VALUES (?, ?)", (c, have.tobytes()))
        else:
            conn.execute("DELETE FROM short_postings WHERE code = ?", (c,))

class StoredShortTokens:
    """The reader: same answer as view.ShortTokenIndex.chunks_containing, one indexed read per token."""

    def __init__(self, conn):
        self.conn = conn

    def chunks_containing(self, token: str) -> np.ndarray:
        row = self.conn.execute("SELECT chunks FROM short_postings WHERE code = ?", (token_code(token),)).fetchone()
        return np.frombuffer(row[0], dtype=DTYPE).astype(np.int64) if row else np.zeros(0, np.int64)
