"""Posting lists of character n-grams with their counts, stored in the index file at index time: the
keyword channel's BM25 (search_core.search.channels.ngram_sparse) reads them, from memory: a view loads every
list once (NgramIndex), so a query reads no row.

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
import re
from collections import Counter

import numpy as np

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


def lengths(conn) -> dict[int, int]:
    return dict(conn.execute("SELECT chunk_id, terms FROM ngram_lengths"))


# how NgramIndex finds a term: Python's str hash (salted per process; an index in memory lives in one). It
# hashes a string's code units as bytes, so strings of different widths can hash alike: "41" and "ㄴ"
# (U+3134, bytes 34 31) do on the demo vault; the name check in term_numbers tells them apart.
term_hash = hash


class NgramIndex:
    """Every posting list of the index file in memory, read once per view, as numpy arrays: a query then
    costs a few slices and two bincounts, no SQLite read and no per-term grouping (what bm25s does).

    Places are a view's vault order (chunk i of the vault order is place i; notes numbered in vault order
    own contiguous places: note j owns places start[j]:start[j + 1]). Per term, in term-number order:
    - its chunks: chunk_place[chunk_off[t]:chunk_off[t + 1]] ascending, with their counts (chunk_tf);
    - its notes: note_no[note_off[t]:note_off[t + 1]] ascending, with the summed counts (note_tf);
      the list's length is the term's document frequency over notes.
    A term is found by its str hash (Python's, fixed for the process that loaded it) in a sorted int64
    array, and checked against its UTF-8 bytes (term_bytes[term_at[t]:term_at[t + 1]]), so two terms of one
    hash never mix. Sizes: nbytes (measured in BENCHMARKS.md, the fast path)."""

    def __init__(self, conn, chunk_at: np.ndarray, chunk_note: dict, place_of: np.ndarray):
        stored = lengths(conn)
        self.chunk_len = np.array([stored.get(int(c), 0) for c in chunk_at.tolist()], np.float64)
        nids = [chunk_note[c] for c in chunk_at.tolist()]
        first = np.r_[True, np.array([a != b for a, b in zip(nids[1:], nids[:-1])], bool)] if nids else np.zeros(0, bool)
        self.start = np.r_[np.flatnonzero(first), len(nids)].astype(np.int64)
        self.note_ids = [nids[i] for i in self.start[:-1].tolist()]
        self.note_of_place = (np.cumsum(first) - 1).astype(np.int64)
        self.note_len = np.add.reduceat(self.chunk_len, self.start[:-1]) if len(nids) else np.zeros(0)
        self.avg_note_len = float(self.note_len.mean()) if len(nids) else 0.0
        terms, id_blobs, tf_blobs = [], [], []
        for term, ids, tfs in conn.execute("SELECT term, chunks, tfs FROM ngram_postings"):
            terms.append(term)
            id_blobs.append(ids)
            tf_blobs.append(tfs)
        size = np.dtype(DTYPE).itemsize
        counts = np.fromiter((len(b) // size for b in id_blobs), np.int64, len(id_blobs))
        ids = np.frombuffer(b"".join(id_blobs), DTYPE)
        tfs = np.frombuffer(b"".join(tf_blobs), DTYPE)
        del id_blobs, tf_blobs
        term_of = np.repeat(np.arange(len(terms), dtype=np.int64), counts)
        ids = ids.astype(np.int64)
        keep = (ids >= 0) & (ids < len(place_of))      # chunks this view does not hold are no one's postings
        keep[keep] = place_of[ids[keep]] >= 0
        n_places = max(len(chunk_at), 1)
        key = term_of[keep] * n_places + place_of[ids[keep]]    # by term, then vault order
        tfs = tfs[keep]
        del ids, keep
        if len(key) and not np.all(key[1:] > key[:-1]):   # chunk ids follow the vault order until an update
            order = np.argsort(key, kind="stable")
            key, tfs = key[order], tfs[order]
            del order
        term_of, places = np.divmod(key, n_places)
        del key
        self.chunk_place = places.astype(np.int32)
        self.chunk_tf = tfs.astype(np.int32)
        self.chunk_off = np.r_[0, np.cumsum(np.bincount(term_of, minlength=len(terms)))].astype(np.int64)
        # (term, note) runs: places ascend within a term and a note's places are contiguous
        notes = self.note_of_place[places] if len(places) else np.zeros(0, np.int64)
        new = np.r_[True, (term_of[1:] != term_of[:-1]) | (notes[1:] != notes[:-1])] if len(places) else np.zeros(0, bool)
        heads = np.flatnonzero(new)
        self.note_no = notes[heads].astype(np.int32)
        self.note_tf = (np.add.reduceat(tfs.astype(np.int64), heads) if len(heads) else np.zeros(0, np.int64)).astype(np.int32)
        self.note_off = np.r_[0, np.cumsum(np.bincount(term_of[heads], minlength=len(terms)))].astype(np.int64)
        encoded = [t.encode() for t in terms]
        self.term_at = np.r_[0, np.cumsum([len(b) for b in encoded])].astype(np.int64)
        self.term_bytes = b"".join(encoded)
        hashes = np.fromiter((term_hash(t) for t in terms), np.int64, len(terms))
        self.hash_order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[self.hash_order]

    @property
    def nbytes(self) -> int:
        arrays = (self.chunk_len, self.start, self.note_of_place, self.note_len, self.chunk_place, self.chunk_tf,
                  self.chunk_off, self.note_no, self.note_tf, self.note_off, self.term_at, self.hash_order,
                  self.hashes)
        return sum(a.nbytes for a in arrays) + len(self.term_bytes)

    def term_numbers(self, terms: list[str]) -> list[int]:
        """The term numbers of `terms` the index holds, in their order (a term it does not hold is left out)."""
        if not len(self.hashes) or not terms:
            return []
        want = np.fromiter((term_hash(t) for t in terms), np.int64, len(terms))
        at = np.searchsorted(self.hashes, want).tolist()
        out = []
        for term, h, i in zip(terms, want.tolist(), at):
            encoded = term.encode()
            while i < len(self.hashes) and self.hashes[i] == h:     # one hash, more than one term (term_hash)
                t = int(self.hash_order[i])
                if self.term_bytes[self.term_at[t]:self.term_at[t + 1]] == encoded:
                    out.append(t)
                    break
                i += 1
        return out
