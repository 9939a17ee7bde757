"""Posting lists of character n-grams with their counts, stored in the index file at index time: the
keyword channel's BM25 (search_core.search.channels.ngram_sparse) reads the lists of a query's terms, each
once per view (NgramIndex).

A Korean word carries its particles ("127끼리", "임베딩을"), so whole words rarely match; FTS5's trigrams
miss the two-syllable stems most Korean words are ("검색", "요약"). Terms here: a word is cut where the script
changes (Hangul syllables against letters and digits), then a Hangul run gives its character 2- and
3-grams (a run of one or two syllables: itself) and any other run is one term, lower-cased (an English or
code word matches as itself, "rerere", "undodir"). A BM25 over such terms, one document per note (bm25s),
tied or beat the four-channel search on two of three Korean sets; fused with FTS5 (keyword_index = "both")
it is at or above FTS5 alone on the demo and johngrib (BENCHMARKS.md, peers).

One row per term: the sorted chunk ids holding it and how many times each holds it (int32 each); one row
per chunk: its number of terms (BM25's document length). A full build writes every row; an incremental
write moves only the terms of the chunks it removed and added, like short_tokens.update, so the lists
equal a fresh build's (chunk ids aside; tests/search_core/index/test_incremental_equal.py). Derived data,
not part of the fingerprint: an index without the table still searches (the sparse channel then runs on
FTS5 and says so), and any `autoresearch index` run on the vault adds it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from search_core.byte_cache import ByteBudgetCache

from search_core.index.store import get_meta, set_meta

META_KEY = "ngram_postings"
VERSION = 2                    # 2: terms from the text and the note fields, not the heading path
DTYPE = np.int32
# a run of Hangul syllables, or a run of other word characters: "GraphRAG의" -> graphrag, 의; "127끼리" -> 127, 끼리
RUN_RE = re.compile(r"[\uac00-\ud7a3]+|[^\W\uac00-\ud7a3]+")
HANGUL_RE = re.compile(r"[\uac00-\ud7a3]")


def terms_of(text: str) -> list[str]:
    """The terms of `text` in order, with repeats (the rule in the module docstring)."""
    out: list[str] = []
    for w in RUN_RE.findall(text.lower()):
        if len(w) > 2 and HANGUL_RE.match(w):
            out += [w[i:i + 2] for i in range(len(w) - 1)]
            out += [w[i:i + 3] for i in range(len(w) - 2)]
        else:
            out.append(w)
    return out


_DOC_SQL = ("SELECT c.id, c.ord, c.text, n.title, n.aliases, n.tags, n.summary FROM chunks c "
            "JOIN notes n ON n.id = c.note_id")


def _doc(ord_: int, text: str, title: str, aliases: str, tags: str, summary: str) -> str:
    """What a chunk's terms are read from: its text, and for the note's first chunk also the title, aliases,
    tags and summary, so a note's summed counts hold each of them once. A chunk's context (the heading path,
    every chunk of the note repeating the title) was read at first: on the demo set the n-gram channel alone
    fell from hit@5 0.917 / MRR 0.825 to 0.833 / 0.743 with it (BENCHMARKS.md, peers)."""
    if ord_ != 0:
        return text
    return "\n".join([title, " ".join(json.loads(aliases)), " ".join(json.loads(tags)), summary, text])


def chunk_docs(conn, chunk_ids: list[int] | None = None) -> list[tuple[int, str]]:
    """(chunk id, the text its terms are read from), by chunk id; every chunk when `chunk_ids` is None."""
    if chunk_ids is None:
        return [(r[0], _doc(*r[1:])) for r in conn.execute(_DOC_SQL + " ORDER BY c.id")]
    out = []
    for i in range(0, len(chunk_ids), 500):
        part = list(chunk_ids[i:i + 500])
        out += [(r[0], _doc(*r[1:])) for r in conn.execute(
            _DOC_SQL + f" WHERE c.id IN ({','.join('?' * len(part))})", part)]
    return sorted(out)


def chunk_terms(doc: str) -> Counter:
    return Counter(terms_of(doc))


def _ddl(conn) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS ngram_postings (term TEXT PRIMARY KEY, chunks BLOB NOT NULL, "
                 "tfs BLOB NOT NULL) WITHOUT ROWID")
    conn.execute("CREATE TABLE IF NOT EXISTS ngram_lengths (chunk_id INTEGER PRIMARY KEY, terms INTEGER NOT NULL)")


def build(conn) -> int:
    """(Re)write every list from the chunks table. Call inside the writer's transaction. The postings are
    gathered as flat (term number, chunk, count) arrays and split per term with one sort, and rows go in in
    term order (the primary key's): johngrib's 18,315 chunks, 1.7 M postings, 133,642 terms."""
    _ddl(conn)
    conn.execute("DELETE FROM ngram_postings")
    conn.execute("DELETE FROM ngram_lengths")
    vocab: dict[str, int] = {}
    term_no, chunk, count, lengths = [], [], [], []
    for cid, doc in chunk_docs(conn):
        tf = chunk_terms(doc)
        lengths.append((cid, sum(tf.values())))
        for term, n in tf.items():
            term_no.append(vocab.setdefault(term, len(vocab)))
            chunk.append(cid)
            count.append(n)
    conn.executemany("INSERT INTO ngram_lengths(chunk_id, terms) VALUES (?, ?)", lengths)
    terms = list(vocab)
    rank = np.empty(len(terms), np.int64)                  # term number -> its place in sorted term order
    rank[np.array(sorted(range(len(terms)), key=terms.__getitem__), np.int64)] = np.arange(len(terms))
    key = rank[np.array(term_no, np.int64)] if term_no else np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")                 # chunk ids ascend within a term (read in id order)
    key, ids, tfs = key[order], np.array(chunk, DTYPE)[order], np.array(count, DTYPE)[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, np.int64)
    ends = np.r_[starts[1:], len(key)]
    by_rank = sorted(terms)
    conn.executemany("INSERT INTO ngram_postings(term, chunks, tfs) VALUES (?, ?, ?)",
                     ((by_rank[int(key[a])], ids[a:b].tobytes(), tfs[a:b].tobytes())
                      for a, b in zip(starts.tolist(), ends.tolist())))
    set_meta(conn, META_KEY, {"version": VERSION})
    return len(terms)


def is_built(conn) -> bool:
    meta = get_meta(conn, META_KEY)
    return isinstance(meta, dict) and meta.get("version") == VERSION


def update(conn, removed: list[tuple[int, str]], added: list[tuple[int, str]]) -> None:
    """After an incremental write: removed chunks leave the lists of their terms, added chunks join
    theirs. Both are chunk_docs rows, the removed read before the write (the note's old title and tags),
    the added after it."""
    gone: dict[str, set[int]] = {}
    for cid, doc in removed:
        for term in chunk_terms(doc):
            gone.setdefault(term, set()).add(cid)
    new: dict[str, list[tuple[int, int]]] = {}
    lengths = []
    for cid, doc in sorted(added):
        tf = chunk_terms(doc)
        lengths.append((cid, sum(tf.values())))
        for term, n in tf.items():
            new.setdefault(term, []).append((cid, n))
    conn.executemany("DELETE FROM ngram_lengths WHERE chunk_id = ?", [(cid,) for cid, _ in removed])
    conn.executemany("INSERT OR REPLACE INTO ngram_lengths(chunk_id, terms) VALUES (?, ?)", lengths)
    for term in sorted(set(gone) | set(new)):
        row = conn.execute("SELECT chunks, tfs FROM ngram_postings WHERE term = ?", (term,)).fetchone()
        ids = np.frombuffer(row[0], DTYPE) if row else np.zeros(0, DTYPE)
        tfs = np.frombuffer(row[1], DTYPE) if row else np.zeros(0, DTYPE)
        if term in gone:
            keep = ~np.isin(ids, np.fromiter(gone[term], DTYPE))
            ids, tfs = ids[keep], tfs[keep]
        if term in new:
            ids = np.concatenate([ids, np.array([c for c, _ in new[term]], DTYPE)])
            tfs = np.concatenate([tfs, np.array([n for _, n in new[term]], DTYPE)])
            order = np.argsort(ids, kind="stable")          # sorted already unless an id was reused below
            ids, tfs = ids[order], tfs[order]
        if len(ids):
            conn.execute("INSERT OR REPLACE INTO ngram_postings(term, chunks, tfs) VALUES (?, ?, ?)",
                         (term, ids.tobytes(), tfs.tobytes()))
        else:
            conn.execute("DELETE FROM ngram_postings WHERE term = ?", (term,))


def postings(conn, term: str) -> tuple[np.ndarray, np.ndarray]:
    """(chunk ids, counts) of one term; empty arrays for a term no chunk holds."""
    row = conn.execute("SELECT chunks, tfs FROM ngram_postings WHERE term = ?", (term,)).fetchone()
    if row is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.frombuffer(row[0], DTYPE).astype(np.int64), np.frombuffer(row[1], DTYPE).astype(np.int64)


def posting_count(conn, term: str) -> int:
    """How many chunks hold `term` (the length of its list), without reading the list."""
    row = conn.execute("SELECT length(chunks) FROM ngram_postings WHERE term = ?", (term,)).fetchone()
    return int(row[0]) // np.dtype(DTYPE).itemsize if row else 0


@dataclass(frozen=True)
class TermList:
    """One term's postings in a view's vault order: its chunks (places ascending, with their counts) and its
    notes (note numbers ascending, with the counts summed over the note's chunks); len(note_no) is the
    term's document frequency over notes."""
    chunk_place: np.ndarray     # int32
    chunk_tf: np.ndarray        # int32
    note_no: np.ndarray         # int32
    note_tf: np.ndarray         # int32

    @property
    def nbytes(self) -> int:
        return self.chunk_place.nbytes + self.chunk_tf.nbytes + self.note_no.nbytes + self.note_tf.nbytes


class NgramIndex:
    """The n-gram lists of one view, read per term from the index file on the thread that asks, and kept
    (up to CACHE_BYTES) for the view's life. Reading every list when a view loads, as this class did first,
    cost a cold search 20 s and 2.4 GiB at 255,000 chunks (a 3 GB table), and a search reads the lists of
    its own terms only (~20-60).

    Places are a view's vault order (chunk i of the vault order is place i; notes numbered in vault order
    own contiguous places: note j owns places start[j]:start[j + 1]). The document lengths (one row per
    chunk) are read whole when the index is made: BM25 needs every note's length for its average."""

    CACHE_BYTES = 256 << 20    # lists kept per view; at 525,000 chunks a frequent bigram's list is ~4 MB

    def __init__(self, conn, chunk_at: np.ndarray, place_note: np.ndarray, note_ids: tuple, place_of: np.ndarray):
        self._conn, self._place_of = conn, place_of
        # term -> its TermList (None: no chunk of this view holds it); (term, k1, b) -> (its list, its BM25
        # parts): bm25_lists. One budget for both
        self._kept = ByteBudgetCache(self.CACHE_BYTES)
        n = len(chunk_at)
        # one string of every (chunk, length) pair, parsed by numpy: a row per chunk through Python costs 4x
        # (0.149 against 0.036 s of CPU at 255,000 chunks)
        text = conn.execute("SELECT group_concat(chunk_id || ' ' || terms, ' ') FROM ngram_lengths").fetchone()[0]
        rows = np.fromstring(text or "", dtype=np.int64, sep=" ").reshape(-1, 2)
        by_id = np.zeros(max(int(chunk_at.max()) + 1 if n else 0, int(rows[:, 0].max()) + 1 if len(rows) else 0), np.float64)
        by_id[rows[:, 0]] = rows[:, 1]
        self.chunk_len = by_id[chunk_at] if n else np.zeros(0, np.float64)
        # the runs of the view's note of each place (IndexView.place_note): the notes that own chunks, numbered in
        # vault order
        first = np.r_[True, place_note[1:] != place_note[:-1]] if n else np.zeros(0, bool)
        self.start = np.r_[np.flatnonzero(first), n].astype(np.int64)
        self.note_ids = [note_ids[i] for i in place_note[self.start[:-1]].tolist()]
        self.note_of_place = (np.cumsum(first) - 1).astype(np.int64)
        self.note_len = np.add.reduceat(self.chunk_len, self.start[:-1]) if n else np.zeros(0)
        self.avg_note_len = float(self.note_len.mean()) if n else 0.0

    @property
    def nbytes(self) -> int:
        arrays = (self.chunk_len, self.start, self.note_of_place, self.note_len)
        return sum(a.nbytes for a in arrays) + self._kept.nbytes

    @property
    def terms_held(self) -> int:
        """How many terms' lists (or their absence) this view has read and keeps."""
        return sum(isinstance(key, str) for key in self._kept.keys())

    def term_lists(self, terms: list[str]) -> list[TermList]:
        """The lists of `terms` this view holds, in their order (a term no chunk of it holds is left out)."""
        out = []
        for term in terms:
            if term not in self._kept:
                got = self._read(term)
                self._kept.put(term, got, got.nbytes if got else 0)
            if self._kept[term] is not None:
                out.append(self._kept[term])
        return out

    def bm25_lists(self, terms: list[str], k1: float, b: float) -> list[tuple[TermList, np.ndarray, np.ndarray]]:
        """term_lists(terms), each list with its BM25 parts under (k1, b): per note its
        idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average length)), per chunk idf * tf / (tf + k1);
        idf = ln(1 + (N - df + .5) / (df + .5)) over notes (df: the list's notes). They read only this view's
        counts, so a term's are computed once and kept beside its list (within CACHE_BYTES: 8 bytes a posting
        more): redone on every query, that arithmetic over the postings was ~a quarter of the n-gram channel
        (66 against 49 us on the demo's fast-path questions, 195 against 148 on AutoRAG-ko's)."""
        out = []
        n = len(self.note_ids)
        for term in terms:
            got = self._kept.get((term, k1, b))
            if got is None:
                found = self.term_lists([term])
                if not found:
                    continue
                t = found[0]
                df = len(t.note_no)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                tf = t.note_tf.astype(np.float64)
                norm = k1 * (1 - b + b * self.note_len[t.note_no] / max(self.avg_note_len, 1e-9))
                chunk_tf = t.chunk_tf.astype(np.float64)
                got = (t, np.full(df, idf) * tf * (k1 + 1) / (tf + norm),
                       np.full(len(chunk_tf), idf) * chunk_tf / (chunk_tf + k1))
                self._kept.put((term, k1, b), got, got[1].nbytes + got[2].nbytes)
            out.append(got)
        return out

    def _read(self, term: str) -> TermList | None:
        row = self._conn.execute("SELECT chunks, tfs FROM ngram_postings WHERE term = ?", (term,)).fetchone()
        if row is None:
            return None
        ids = np.frombuffer(row[0], DTYPE).astype(np.int64)
        tfs = np.frombuffer(row[1], DTYPE)
        keep = (ids >= 0) & (ids < len(self._place_of))   # chunks this view does not hold are no one's postings
        keep[keep] = self._place_of[ids[keep]] >= 0
        places, tfs = self._place_of[ids[keep]], tfs[keep]
        if not len(places):
            return None
        if not np.all(places[1:] > places[:-1]):          # chunk ids follow the vault order until an update
            order = np.argsort(places, kind="stable")
            places, tfs = places[order], tfs[order]
        # (note, count) runs: places ascend and a note's places are contiguous
        notes = self.note_of_place[places]
        heads = np.flatnonzero(np.r_[True, notes[1:] != notes[:-1]])
        return TermList(places.astype(np.int32), tfs.astype(np.int32), notes[heads].astype(np.int32),
                        np.add.reduceat(tfs.astype(np.int64), heads).astype(np.int32))
