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

from typing import Iterator

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


# Characters per slice of a full build. One slice's arrays cost ~80 bytes a character (int64 code points,
# owners, bigram codes, keys and their sort): the whole vault in one slice peaked at 475 MiB for 10,201
# chunks (5.9 M characters) and would need ~4.6 GiB at 100,000 chunks and ~23 GiB at 500,000, more than
# this 24 GiB machine holds with anything else (BENCHMARKS.md, scale). Slices of 2 M characters keep
# that part near 160 MiB; what grows with the vault is the lists themselves (4 bytes a posting).
SLICE_CHARS = 2_000_000


def _flat_postings(rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rows of (chunk_id, context, text), fewer than 2**OWNER_BITS, in chunk id order -> (codes, bounds,
    chunks): the distinct codes in order, where each one's list starts and ends in `chunks` (len(codes) + 1
    bounds), and every list end to end, each sorted by chunk id (int32)."""
    rows = list(rows)
    if not rows:
        return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, DTYPE)
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    texts = [chunk_text(ctx, text) for _, ctx, text in rows]
    lens = np.array([len(t) for t in texts], dtype=np.int64)
    cp = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    del texts
    owner = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    same = owner[:-1] == owner[1:]
    codes = np.concatenate([cp, ((cp[:-1] << 21) | cp[1:])[same]])
    owners = np.concatenate([owner, owner[:-1][same]])
    del cp, owner, same
    keys = sorted_unique((codes << OWNER_BITS) | owners)  # sorted by code, then by owner (= by chunk id)
    del codes, owners
    code = keys >> OWNER_BITS
    chunk = ids[keys & ((1 << OWNER_BITS) - 1)].astype(DTYPE)
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    return code[starts], np.r_[starts, len(code)], chunk


def _postings(rows) -> tuple[np.ndarray, list[np.ndarray]]:
    """rows of (chunk_id, context, text) -> (codes, sorted chunk ids per code), all in numpy."""
    codes, bounds, chunk = _flat_postings(rows)
    return codes, [chunk[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


def _slices(conn, slice_chars: int):
    """The chunks in id order, cut into slices of about `slice_chars` characters (and fewer rows than the
    owner bits count), each turned into its flat lists as soon as it is read."""
    rows, chars = [], 0
    for row in conn.execute("SELECT id, context, text FROM chunks ORDER BY id"):
        rows.append(row)
        chars += len(row[1]) + len(row[2]) + 1
        if chars >= slice_chars or len(rows) >= (1 << OWNER_BITS) - 1:
            yield _flat_postings(rows)
            rows, chars = [], 0
    if rows:
        yield _flat_postings(rows)


def _merged(slices: list) -> Iterator[tuple[int, bytes]]:
    """(code, its whole list as bytes) in code order from the slices' flat lists. A code's parts are joined
    in slice order, which is chunk id order, so each list comes out sorted without sorting it again."""
    if len(slices) == 1:
        codes, bounds, chunk = slices[0]
        b = bounds.tolist()
        for i, c in enumerate(codes.tolist()):
            yield c, chunk[b[i]:b[i + 1]].tobytes()
        return
    codes = np.concatenate([s[0] for s in slices])
    order = np.argsort(codes, kind="stable")            # stable: a code's slices stay in slice order
    which = np.repeat(np.arange(len(slices), dtype=np.int32), [len(s[0]) for s in slices])[order]
    place = np.concatenate([np.arange(len(s[0]), dtype=np.int32) for s in slices])[order]
    codes = codes[order]
    del order
    firsts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[firsts[1:], len(codes)]
    bounds = [s[1] for s in slices]
    chunks = [s[2] for s in slices]
    step = 1 << 16                                       # codes turned into Python ints a block at a time
    for g in range(0, len(firsts), step):
        fs, es = firsts[g:g + step].tolist(), ends[g:g + step].tolist()
        lo, hi = fs[0], es[-1]
        w, p, c = which[lo:hi].tolist(), place[lo:hi].tolist(), codes[lo:hi].tolist()
        for a, b in zip(fs, es):
            parts = []
            for j in range(a - lo, b - lo):
                k, i = w[j], p[j]
                parts.append(chunks[k][bounds[k][i]:bounds[k][i + 1]].tobytes())
            yield c[a - lo], b"".join(parts)


def build(conn, slice_chars: int = SLICE_CHARS) -> int:
    """(Re)write every posting list from the chunks table. Call inside the writer's transaction."""
    _ddl(conn)
    conn.execute("DELETE FROM short_postings")
    conn.execute("DELETE FROM meta WHERE key = ?", (META_KEY,))
    top = conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
    if top is not None and top >= 2 ** 31:   # ids past int32: searches build the in-memory index instead
        return 0
    slices = list(_slices(conn, slice_chars))
    written = [0]

    def counted():
        for row in _merged(slices):
            written[0] += 1
            yield row
    if slices:
        conn.executemany("INSERT INTO short_postings(code, chunks) VALUES (?, ?)", counted())
    set_meta(conn, META_KEY, {"version": VERSION})
    return written[0]


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
