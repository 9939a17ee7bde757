"""FTS5's bm25() over the chunks' trigram table, computed in memory with FTS5's own counts and formula.

The sparse channel ranks chunks by `bm25(chunks_fts, weights...)` over an OR of trigrams, and FTS5 computes it
on every row the OR matches whatever the LIMIT: on the johngrib subset ~0.9 of the check's 1.44 ms FTS5 query
(docs/lab-notes/fastpath-2026-12.md), the largest step of a fast-path answer. Here the same floats come from
arrays: each trigram's rows with its weighted hits in each, read once per view from FTS5's own index (the
fts5vocab `instance` table) and kept, the rows' sizes from FTS5's `docsize` table and the row count and total size from
its averages record, all what fts5_aux.c's fts5Bm25Function reads, in the same operations and order:

    score(row) = sum over phrases i, in query order, of
                 idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl))
    f_i = the row's hits of phrase i, a hit in column c counting weights[c]; D = the row's tokens over all
    columns; avgdl = all rows' tokens / N; idf_i = ln((N - nHit_i + .5) / (nHit_i + .5)), 1e-6 where <= 0
    (nHit_i: rows holding phrase i); k1 1.2, b 0.75; FTS5 returns -score.

Rows come as `ORDER BY bm25 LIMIT` gives them: best first, equal scores by rowid (SQLite's sorter keeps the
scan's order, and FTS5 scans by rowid). tests/search_core/search/test_fts_bm25.py checks every list against
FTS5's own on real queries over real indexes.

Nothing is stored at index time: FTS5 keeps its counts current through every write (incremental indexing,
`--watch`), and a view reads them inside its snapshot. A term is read the first time a query asks for it
(reading every term when a view loads took 11-14 s and 340-430 MB at its peak on the johngrib subset and a
753-note wiki, for lists a night's questions touch 2-3 % of; lab notes), so a cold query pays about FTS5's price
once per new trigram (johngrib subset p50 0.58 / p95 9.9 ms against FTS5's 6.2 / 25.9, load 5.6) and a warm one
only the arithmetic (0.18 / 2.3 ms). What it cannot answer exactly it declines (None) and the caller asks FTS5: a phrase that
is not three characters of scripts whose case folding Python's lower() matches (FTS5 folds the query's
phrases itself, and the lists are looked up by the folded text), weights that are not whole numbers (their
sums then depend on the order FTS5 adds hits in), an index without FTS5's size table.
"""

from __future__ import annotations

import math
import re

import numpy as np

from search_core.byte_cache import ByteBudgetCache

from search_core.index.term_df import DB_ERRORS

K1 = 1.2                   # fts5_aux.c's constants
B = 0.75
FLOOR_IDF = 1e-6           # FTS5's idf of a phrase in half the rows or more
TABLE = "chunks_fts"
FIELD_WEIGHTS = (3.0, 3.0, 2.0, 2.0, 1.0)   # title, aliases, tags, summary, body: the sparse channel's bm25() weights
VOCAB = "temp.fts_bm25_instances"
# Characters whose FTS5 case folding (the trigram tokenizer's, remove_diacritics 0) is Python's lower(): ASCII,
# Hangul syllables and jamo, CJK ideographs, which have no case. A phrase with another character ("é", "ς") is
# left to FTS5: its folding of the phrase may differ from lower()'s and the list would be looked up by other text.
_SAME_FOLD = re.compile(r"[\x00-\x7f\u1100-\u11ff\u3130-\u318f\u4e00-\u9fff\uac00-\ud7a3]{3}")


def varint_sums(blobs: list[bytes], per_blob: int) -> np.ndarray:
    """The sum of each blob's `per_blob` SQLite varints (FTS5's docsize rows: a row's tokens per column): one
    pass of numpy over all the bytes, not a Python loop per byte (3.8 against 18.4 ms for the johngrib subset's
    10,458 rows, at load 6)."""
    buf = np.frombuffer(b"".join(blobs), np.uint8)
    if not len(buf):
        return np.zeros(len(blobs), np.int64)
    # big-endian 7-bit groups, a set high bit continues; FTS5's sizes fit 4 bytes (< 2^28), so the 9-byte
    # form's full last byte never occurs (a size past it is refused by the caller's check)
    ends = np.flatnonzero(buf < 0x80)
    if len(ends) != len(blobs) * per_blob or ends[-1] != len(buf) - 1:
        raise ValueError("not a run of varints")
    starts = np.r_[0, ends[:-1] + 1]
    if int((ends - starts).max()) > 3:
        raise ValueError("a varint of more than 4 bytes")
    value = np.zeros(len(ends), np.int64)
    for k in range(4):                        # the k-th byte from each varint's end
        at = ends - k
        ok = at >= starts
        value[ok] += (buf[at[ok]].astype(np.int64) & 0x7F) << (7 * k)
    return value.reshape(len(blobs), per_blob).sum(axis=1)


def varints(blob: bytes) -> list[int]:
    """SQLite's variable-length integers, one after another (FTS5's averages record): 7 bits a byte, big-endian,
    a set high bit continues, and a ninth byte counts all 8 of its bits."""
    out, i, n = [], 0, len(blob)
    while i < n:
        v = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                v = (v << 8) | byte
                break
            v = (v << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        out.append(v)
    return out


def idf(hits: int, rows: int) -> float:
    """FTS5's idf of a phrase `hits` of `rows` rows hold."""
    x = math.log((rows - hits + 0.5) / (hits + 0.5))
    return x if x > 0.0 else FLOOR_IDF


class FtsBm25:
    """FTS5's bm25 over `chunks_fts` with column `weights` for one view (its connection, inside its snapshot).
    Per term, kept up to CACHE_BYTES: the rows holding it (ascending) and the term's part of each one's score
    (its idf times its saturated weighted hits, which read only the view's counts): 12 bytes a posting. Its
    weighted hits alone (bm25's f, 8 bytes) held 5.4 MB after the johngrib subset's 2,134 queries (this, half
    as much again), but every query then redid the same arithmetic per term: 40 us for the check's 12 trigrams
    on the demo against 18, 79 against 22 on AutoRAG-ko. Its hits per column (28 bytes) held 18.6 MB, and
    weighing them on every query made the warm p95 4.3 ms against 2.3."""

    CACHE_BYTES = 256 << 20

    def __init__(self, conn, weights=FIELD_WEIGHTS):
        self._conn = conn
        self.columns = [r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")]
        # whole numbers: f is then exact whatever order FTS5 adds a row's hits in (it adds a weight per hit)
        if len(weights) != len(self.columns) or any(float(w) != int(w) for w in weights):
            raise ValueError(f"{len(self.columns)} whole-number column weights, got {weights}")
        self.weights = tuple(float(w) for w in weights)
        totals = conn.execute(f"SELECT block FROM {TABLE}_data WHERE id = 1").fetchone()
        v = varints(bytes(totals[0])) if totals and totals[0] else [0]
        self.rows = v[0]                                       # N (xRowCount)
        self.avgdl = float(sum(v[1:1 + len(self.columns)])) / float(self.rows) if self.rows else 0.0
        got = conn.execute(f"SELECT id, sz FROM {TABLE}_docsize").fetchall()
        ids = np.fromiter((r[0] for r in got), np.int64, len(got))
        self.size = np.zeros(int(ids.max()) + 1 if len(ids) else 0, np.float64)   # rowid -> D (xColumnSize -1)
        self.size[ids] = varint_sums([bytes(r[1]) for r in got], len(self.columns))
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB} USING fts5vocab(main, {TABLE}, instance)")
        self._cols = " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(self.columns))
        self._lists = ByteBudgetCache(self.CACHE_BYTES)     # term -> (rowids, its parts), None if no row holds it

    @classmethod
    def open(cls, conn) -> FtsBm25 | None:
        """The scorer of the FTS5 table on `conn`, or None when it lacks what bm25 reads (its size table)."""
        try:
            return cls(conn)
        except (*DB_ERRORS, ValueError):       # no docsize table (columnsize=0), a record not as read here, weights
            return None

    @property
    def nbytes(self) -> int:
        return self.size.nbytes + self._lists.nbytes

    @property
    def terms_held(self) -> int:
        return len(self._lists)

    def term_list(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(rowids ascending, the term's part of each one's score) of one folded trigram; None if no row holds it."""
        if term not in self._lists:
            got = self._read(term)
            if got is not None:
                rows, f = got
                norm = f + K1 * ((1 - B) + (B * self.size[rows]) / self.avgdl)
                got = rows, idf(len(rows), self.rows) * ((f * (K1 + 1.0)) / norm)
            self._lists.put(term, got, got[0].nbytes + got[1].nbytes if got else 0)
        return self._lists[term]

    def _read(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        # every instance as "rowid column" in one string, parsed by numpy: 19 ms for "the"'s 14,839 instances
        # on the johngrib subset, against 32 ms fetching a tuple each
        text = self._conn.execute(f"SELECT group_concat(doc || ' ' || CASE col {self._cols} END, ' ') "
                                  f"FROM {VOCAB} WHERE term = ?", (term,)).fetchone()[0]
        if not text:
            return None
        pairs = np.fromstring(text, dtype=np.int64, sep=" ").reshape(-1, 2)
        ncol = len(self.columns)
        keys, counts = np.unique(pairs[:, 0] * ncol + pairs[:, 1], return_counts=True)
        rows, at = np.unique(keys // ncol, return_inverse=True)
        # each row's hits times its column's weight, summed: whole numbers, so exact
        f = np.bincount(at, weights=counts * np.asarray(self.weights)[keys % ncol], minlength=len(rows))
        return rows.astype(np.int32 if rows[-1] < 2**31 else np.int64), f

    def best(self, phrases: list[str], limit: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(rowids, bm25) of the `limit` best rows of the OR of `phrases`, and every row tied with the last of
        them, best first (bm25 ascending: FTS5's scores are negative), ties by rowid: what
        `SELECT rowid, bm25(chunks_fts, *weights) AS s ... MATCH '"p1" OR "p2" ...' ORDER BY s` gives, cut so.
        None when it cannot give FTS5's floats (the module docstring): the caller asks FTS5."""
        if any(_SAME_FOLD.fullmatch(p) is None for p in phrases):
            return None
        empty = np.zeros(0, np.int64), np.zeros(0, np.float64)
        if limit <= 0 or not self.rows:
            return empty
        ids, contrib = [], []
        for p in phrases:
            got = self.term_list(p.lower())
            if got is not None:
                ids.append(got[0])
                contrib.append(got[1])
        if not ids:
            return empty
        # each row's sum in phrase order from 0.0, as FTS5 adds them: bincount adds in input order
        rowids, at = np.unique(np.concatenate(ids), return_inverse=True)
        score = np.bincount(at, weights=np.concatenate(contrib), minlength=len(rowids))
        if len(rowids) > limit:
            cut = np.partition(score, len(score) - limit)[len(score) - limit]     # the limit-th best
            keep = np.flatnonzero(score >= cut)
            rowids, score = rowids[keep], score[keep]
        order = np.argsort(-score, kind="stable")                                 # ties stay in rowid order
        return rowids[order].astype(np.int64), -1.0 * score[order]
