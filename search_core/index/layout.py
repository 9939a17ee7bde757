"""The vault's layout and vectors beside the index, memory-mapped by every process that searches.

A view of the index needs, before its first search, every vector (the dense channel's matrix, the
entity names' matrix) and the order of the vault (which chunks each note holds, in (note id, ord)
order). Read from SQLite that is a copy of every vec0 row and every chunk row into each process: at
100,000 chunks 2.6 s of CPU of a 3 s cold `search`, and the copy stays in every server's memory. So the
writer stores them once more, as flat arrays in files beside the index, and a view maps them: the
kernel's page cache holds the vectors once for every process, and a cold search reads only the pages it
touches.

The files: `index.sqlite.layout`, small and rewritten whole by every commit (what of the appended files
this commit maps, and what in them has died since), one order log (`index.sqlite.layout.order-<serial>`,
below), and one rows file per kind of vector
(`index.sqlite.layout.chunks-<serial>`, `index.sqlite.layout.entities-<serial>`: float32 rows, no header)
with its ids beside it (the same name + IDS: int64 a row), that an update only appends to. Rows are in
append order: an update marks the rows of the chunks it removed dead (listed in the small file; the
layout's `vec_ids` gives them -1) and appends the new ones as a segment, so it writes what changed, not
the vault (at 555,000 chunks the whole file was ~630 MiB a save). Every segment, a full
build's one included, is padded with zero rows (id -1) to a multiple of ROW_BLOCK: OpenBLAS's sgemv
computes the rows of a kernel's or a thread's tail in another order of sums, so a row's product with the
query differs in the last bit by where it sits; with no real row in a tail, every row's product is the same
float wherever it sits (measured in docs/lab-notes/scale-2026-12.md), so an updated index's dense scores
equal a fresh build's exactly. The dense channel masks the dead rows and breaks ties by vault place.
Once the dead rows pass DEAD_SHARE of a rows file, the next write copies the live rows into a new file.

The vault's order (note ids, and each note's chunk ids by ord) is a log too: one entry per note version, its
chunk ids in `order-<serial>` (int64), its chunk count in `.counts` (int64), its id in `.names` (UTF-8, each
ended by NUL, which no path holds). A fresh write puts every note in vault order (the base); an update appends
an entry for each note it rewrote or added, and the small file lists the base entries superseded since
(`order_dead`) and the appended entries still live in vault order (`order_pending`) with, for each, how many
base entries sort before it (`order_anchors`): a reader merges the two sorted runs. At 100,000 chunks the whole
order was 1.64 MB a save (~16 B a chunk); now a one-note update appends one entry and rewrites lists as long
as the edits since the base. Once the entries outside the live base pass DEAD_SHARE of the log's, the next
write starts a new log.

The small file is a cache of the index, never its source: its header records the generation and the
generation token (store.bump_generation) of the commit it was written for, and a view uses it only when
both equal the ones its own read snapshot sees. Any other commit leaves it stale, and the view reads
SQLite instead (`layout_from_index`), with the same vectors. The writer writes it inside its write
transaction, after bump_generation and before COMMIT, so that a server reloading after the commit finds it
current; the file of the commit before is kept as `index.sqlite.layout.prev` until the next write, and a
rows file is never cut below the rows a kept file names, so an update killed before its COMMIT leaves the
last committed index mapped whole (the next update cuts off what the killed one appended).

Format of the small file: MAGIC, then a JSON header (arrays: name -> [offset, dtype, shape]; rows: kind
-> the rows file, its row count and segments; order: the log, its entries, chunk ids and name bytes mapped,
its base; `<kind>_dead`: the rows dead, padding included) padded to HEADER_BYTES, then each array at a 64-byte
boundary, little-endian.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from search_core.files import atomic_replace
from search_core.index.store import get_meta

MAGIC = b"AUTORESEARCH-LAYOUT\n"
VERSION = 3
HEADER_BYTES = 4096
SUFFIX = ".layout"
PREVIOUS = ".prev"                        # the file of the commit before: layout_path(db) + PREVIOUS
ENTITIES_KEPT = "layout_entities_kept"    # meta: write.write_entities' rows left as they were, and when
# Every segment of rows is padded to a multiple of this: OpenBLAS's sgemv kernels (Haswell, 1 or 2 threads)
# take rows in blocks of up to 16 and sum a tail's rows another way; measured: zero-padded parts of 16 give
# every real row the same product at any position, parts cut at other counts differ in 1-400 of 200,000.
ROW_BLOCK = 16
# A rows file is copied into a new one (live rows only) once its dead rows (removed chunks and padding) pass
# this share: the dense product scans them too, so at 0.25 it costs at most 4/3 of the live rows', and the
# copy (the live rows, once) comes after at least a third of their count died: amortised, at most 3 rows
# copied per row an update wrote. One-note updates (~5 rows, a segment of 16) reach it after ~1,500 saves
# at 100,000 chunks.
DEAD_SHARE = 0.25
KINDS = ("chunks", "entities")
IDS = ".ids"                              # a rows file's ids (int64 a row, -1 for padding): its name + IDS
COUNTS = ".counts"                        # the order log's chunk count per entry (int64): its name + COUNTS
NAMES = ".names"                          # the order log's note ids, each ended by NUL: its name + NAMES
TAILS = ("", IDS, COUNTS, NAMES)          # the files one name in a small file's header stands for


@dataclass(frozen=True)
class RowsFile:
    """Where a layout's rows of one kind live: the file's name (rows_path: kind and serial, beside the index),
    how many rows this layout maps, and its segments as (first row, rows, generation that appended them)."""
    name: str
    rows: int
    segments: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class OrderLog:
    """Where a layout's vault order lives: the log's name (rows_path), the entries, chunk ids and name bytes
    this layout maps, its base (entries 0..base-1, in vault order), the lists of the small file, and, read:
    every entry's note id and chunk count, and the live entries in vault order (`live[i]` holds note i)."""
    name: str
    entries: int
    chunks: int
    name_bytes: int
    base: int
    dead: np.ndarray               # int64: base entries superseded since the base was written
    pending: np.ndarray            # int64: entries appended since, live, in vault order
    anchors: np.ndarray            # int64: per pending entry, the base entries (live or dead) that sort before it
    names: list                    # str per entry
    counts: np.ndarray             # int64 per entry
    live: np.ndarray               # int64 per note of the layout: its entry


@dataclass(frozen=True)
class VaultLayout:
    """The vault's order and its vectors, as arrays. Places: a chunk's position in (note id, ord) order.
    Matrix rows are in append order; a row whose id is -1 (a removed chunk's, or padding) is dead."""
    note_ids: tuple[str, ...]      # notes that hold chunks, in vault (note id) order
    note_start: np.ndarray         # int64 [notes + 1]: note i holds places note_start[i]:note_start[i + 1]
    chunk_at: np.ndarray           # int64 [chunks]: place -> chunk id
    vec_ids: np.ndarray            # int64 [rows]: matrix row -> chunk id (-1: dead)
    matrix: np.ndarray             # float32 [rows, dim]
    entity_ids: np.ndarray         # int64 [entity rows]: row -> entity id (-1: dead)
    entity_matrix: np.ndarray      # float32 [entity rows, dim]
    stamp: tuple[int, str | None] | None = None     # (generation, token) a mapped file was written for
    files: tuple[RowsFile, RowsFile] | None = None  # (chunks, entities) of a mapped file
    order: OrderLog | None = None                   # the vault order's log, of a mapped file

    def live(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(chunk ids, their vectors, entity ids, their vectors), live rows only, by id: what two layouts of
        one commit hold alike, however their rows are ordered."""
        out = []
        for ids, mat in ((self.vec_ids, self.matrix), (self.entity_ids, self.entity_matrix)):
            rows = np.flatnonzero(ids >= 0)
            rows = rows[np.argsort(ids[rows], kind="stable")]
            out += [ids[rows], mat[rows]]
        return tuple(out)


@dataclass(frozen=True)
class LayoutSource:
    """Where a view's layout came from: the file beside the index, or SQLite (and why not the file)."""
    mapped: bool
    reason: str


def layout_path(db: str | Path) -> Path:
    db = Path(db)
    return db.with_name(db.name + SUFFIX)


def companion_files(db: str | Path) -> list[Path]:
    """Every layout file beside `db`: the small file, the previous commit's, the rows files."""
    main = layout_path(db)
    return sorted(p for p in main.parent.glob(main.name + "*") if p.name == main.name or p.name.startswith(main.name + "."))


def rows_path(db: str | Path, name: str) -> Path:
    """The rows file `name` (as a layout's header names it: kind and serial) of the index `db`."""
    main = layout_path(db)
    return main.with_name(f"{main.name}.{name}")


def db_path(conn) -> Path | None:
    """The file of a connection's main database (None for an in-memory one)."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return Path(file) if file else None
    return None


def _stamp(conn) -> tuple[int, str | None]:
    return int(get_meta(conn, "generation", 0)), get_meta(conn, "generation_token")


def pad_rows(n: int) -> int:
    """Rows a segment of n rows takes, padding included."""
    return -(-n // ROW_BLOCK) * ROW_BLOCK


def _padded(ids: np.ndarray, mat: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    n, full = len(ids), pad_rows(len(ids))
    out_ids = np.full(full, -1, np.int64)
    out_ids[:n] = ids
    out = np.zeros((full, dim), np.float32)
    if n:
        out[:n] = mat
    return out_ids, out


# ---------------------------------------------------------------- from SQLite

def _vectors(conn, table: str, ids: list[int] | None = None) -> tuple[np.ndarray, list[bytes]]:
    """(row ids, raw float32 blobs) of a vec0 table: every row (row id order), or those of `ids`."""
    out_ids, blobs = [], []
    if ids is None:
        rows = conn.execute(f"SELECT rowid, embedding FROM {table} ORDER BY rowid")
    else:
        # one point read per id: vec0 answers `rowid = ?` from its rowid table, while `rowid IN (...)` is
        # not offered to it as a lookup
        rows = (r for i in ids for r in conn.execute(f"SELECT rowid, embedding FROM {table} WHERE rowid = ?", (i,)))
    for rowid, blob in rows:
        out_ids.append(rowid)
        blobs.append(blob)
    return np.asarray(out_ids, np.int64), blobs


def _matrix(blobs: list[bytes], n: int, dim: int | None = None) -> np.ndarray:
    if not n:
        return np.zeros((0, dim or 0), np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(n, -1)


def _order(conn, notes=None):
    """(note ids, note_start, chunk_at) in vault order: of every note that holds chunks, or of those of `notes`."""
    nids, cids = [], []
    if notes is None:
        rows = conn.execute("SELECT id, note_id FROM chunks ORDER BY note_id, ord")
    else:                                  # batches in name order, each in (note id, ord) order: the whole is
        notes = sorted(set(notes))         # (SQLite's BINARY order of UTF-8 is Python's order of code points)
        rows = (r for i in range(0, len(notes), 500) for r in conn.execute(
            f"SELECT id, note_id FROM chunks WHERE note_id IN ({','.join('?' * len(notes[i:i + 500]))}) "
            "ORDER BY note_id, ord", notes[i:i + 500]))
    for cid, nid in rows:
        cids.append(cid)
        nids.append(nid)
    chunk_at = np.asarray(cids, np.int64)
    first = [i for i in range(len(nids)) if i == 0 or nids[i] != nids[i - 1]]
    return tuple(nids[i] for i in first), np.asarray(first + [len(nids)], np.int64), chunk_at


def _dim(conn, table: str) -> int:
    row = conn.execute(f"SELECT embedding FROM {table} LIMIT 1").fetchone()
    return len(row[0]) // 4 if row else 0


def layout_from_index(conn) -> VaultLayout:
    """The layout read from SQLite (inside the caller's transaction or snapshot), as a fresh build writes it:
    rows by id, each matrix one segment padded to ROW_BLOCK."""
    note_ids, note_start, chunk_at = _order(conn)
    ids, blobs = _vectors(conn, "chunk_vec")
    mat = _matrix(blobs, len(ids))
    ent_ids, ent_blobs = _vectors(conn, "entity_vec")
    ent_mat = _matrix(ent_blobs, len(ent_ids))
    vec_ids, matrix = _padded(ids, mat, mat.shape[1] if len(ids) else _dim(conn, "chunk_vec"))
    entity_ids, entity_matrix = _padded(ent_ids, ent_mat, ent_mat.shape[1] if len(ent_ids) else _dim(conn, "entity_vec"))
    return VaultLayout(note_ids, note_start, chunk_at, vec_ids, matrix, entity_ids, entity_matrix)


# ---------------------------------------------------------------- the files

def _append(path: Path, committed: int, data: np.ndarray) -> None:
    """Cut the file at `path` back to the `committed` bytes the last commit's layout maps (what an update killed
    before its commit appended) and append `data`, synced."""
    with open(path, "r+b") as f:
        f.truncate(committed)
        if data.nbytes:
            f.seek(0, os.SEEK_END)
            f.write(np.ascontiguousarray(data).tobytes())
        f.flush()
        os.fsync(f.fileno())


def _write_new(path: Path, mode: int, data: np.ndarray) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(np.ascontiguousarray(data).tobytes())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    atomic_replace(tmp, path)


def _mode(db: Path) -> int:
    try:                                   # readable by whoever may read the index (mkstemp: 0600)
        return os.stat(db).st_mode & 0o777
    except FileNotFoundError:
        return 0o644


@dataclass(frozen=True)
class RowsWrite:
    """One kind's rows after a write: the file, the ids of every row it maps, and the bytes written."""
    file: RowsFile
    ids: np.ndarray
    written: int
    dim: int


def write_rows(db: Path, kind: str, generation: int, previous: VaultLayout | None, keep: np.ndarray | None,
               new_ids: np.ndarray, new_matrix: np.ndarray, dim: int) -> RowsWrite:
    """The rows of `kind` for the commit to come: the previous layout's rows with `keep` False marked dead and
    the new ones appended as a segment padded to ROW_BLOCK; or, with no previous file (or its dead rows past
    DEAD_SHARE, or another dimension), a new file of the kept and the new rows. A rows file is cut back to
    the previous layout's row count first (what an update killed before its commit appended) and never below."""
    k = KINDS.index(kind)
    prev_file = previous.files[k] if previous is not None and previous.files is not None else None
    prev_ids = (previous.vec_ids, previous.entity_ids)[k] if previous is not None else None
    prev_mat = (previous.matrix, previous.entity_matrix)[k] if previous is not None else None
    new_ids, new_mat = _padded(new_ids, new_matrix, dim)
    if prev_file is not None and prev_mat.shape[1] == dim:
        ids = np.where(keep, prev_ids, -1)
        dead = int((ids < 0).sum()) + len(new_ids) - int((new_ids >= 0).sum())
        if dead <= DEAD_SHARE * (len(ids) + len(new_ids)):
            segments = prev_file.segments
            _append(rows_path(db, prev_file.name), prev_file.rows * dim * 4, new_mat)
            _append(rows_path(db, prev_file.name + IDS), prev_file.rows * 8, new_ids)
            if len(new_ids):
                segments = segments + ((prev_file.rows, len(new_ids), generation),)
            return RowsWrite(RowsFile(prev_file.name, prev_file.rows + len(new_ids), segments),
                             np.concatenate([ids, new_ids]), new_mat.nbytes + new_ids.nbytes, dim)
    kept_ids = np.zeros(0, np.int64)
    kept_mat = np.zeros((0, dim), np.float32)
    if prev_file is not None and prev_mat.shape[1] == dim:
        rows = np.flatnonzero(keep & (prev_ids >= 0))
        kept_ids, kept_mat = prev_ids[rows], prev_mat[rows]
    real = new_ids >= 0
    ids, mat = _padded(np.concatenate([kept_ids, new_ids[real]]),
                       np.concatenate([kept_mat, new_mat[real]]) if len(kept_ids) + int(real.sum()) else kept_mat, dim)
    name = f"{kind}-{os.urandom(6).hex()}"
    _write_new(rows_path(db, name), _mode(db), np.ascontiguousarray(mat, np.float32))
    _write_new(rows_path(db, name + IDS), _mode(db), ids)
    return RowsWrite(RowsFile(name, len(ids), ((0, len(ids), generation),) if len(ids) else ()), ids,
                     mat.nbytes + ids.nbytes, dim)


def _names_bytes(note_ids) -> np.ndarray:
    return np.frombuffer("".join(n + "\0" for n in note_ids).encode("utf-8"), np.uint8)


def resolve_order(names: list, counts: np.ndarray, chunk_ids: np.ndarray, base: int, dead: np.ndarray,
                  pending: np.ndarray, anchors: np.ndarray) -> tuple[tuple, np.ndarray, np.ndarray, np.ndarray]:
    """(note ids, note_start, chunk_at, live entries) of an order log: its live base entries and its pending
    ones (each placed before the base entries from its anchor on) merged. A log as a fresh write left it is
    used as it lies: chunk_at is then the log's chunk ids themselves."""
    first = np.cumsum(counts) - counts
    if not len(dead) and not len(pending) and base == len(counts):
        live = np.arange(base, dtype=np.int64)
        note_start = np.append(first, first[-1] + counts[-1] if base else 0).astype(np.int64)
        return tuple(names), note_start, chunk_ids, live
    base_live = np.delete(np.arange(base, dtype=np.int64), dead)
    live = np.insert(base_live, np.searchsorted(base_live, anchors, "left"), pending)
    cnt = counts[live]
    note_start = np.zeros(len(live) + 1, np.int64)
    np.cumsum(cnt, out=note_start[1:])
    chunk_at = chunk_ids[np.repeat(first[live] - note_start[:-1], cnt) + np.arange(note_start[-1])]
    return tuple(names[i] for i in live.tolist()), note_start, chunk_at, live


def write_order(db: Path, note_ids: tuple, note_start: np.ndarray, chunk_at: np.ndarray) -> OrderLog:
    """A new order log of the vault order given (every entry in the base)."""
    name = f"order-{os.urandom(6).hex()}"
    counts = np.diff(note_start).astype(np.int64)
    names = _names_bytes(note_ids)
    for tail, data in (("", np.asarray(chunk_at, np.int64)), (COUNTS, counts), (NAMES, names)):
        _write_new(rows_path(db, name + tail), _mode(db), data)
    empty = np.zeros(0, np.int64)
    return OrderLog(name, len(counts), len(chunk_at), names.nbytes, len(counts), empty, empty, empty,
                    list(note_ids), counts, np.arange(len(counts), dtype=np.int64))


def append_order(conn, db: Path, previous: VaultLayout, moved) -> OrderLog | None:
    """The order log of the commit to come, when only the notes of `moved` (ids) may have changed their chunks
    since `previous`: their entries superseded, an entry appended for each that still holds chunks, the lists
    of the small file remade. None (write a new log) when the entries outside the live base would pass
    DEAD_SHARE, or when the result would not hold every chunk of the index (a note changed that `moved` left
    out)."""
    prev = previous.order
    moved = sorted(set(moved))
    dead, pending = set(prev.dead.tolist()), set(prev.pending.tolist())
    gone = 0
    for nid in moved:
        i = bisect.bisect_left(previous.note_ids, nid)
        if i < len(previous.note_ids) and previous.note_ids[i] == nid:
            e = int(prev.live[i])
            (dead.add if e < prev.base else pending.discard)(e)
            gone += int(prev.counts[e])
    note_ids, note_start, chunk_at = (_order(conn, moved) if moved
                                      else ((), np.zeros(1, np.int64), np.zeros(0, np.int64)))
    entries = prev.entries + len(note_ids)
    if entries - (prev.base - len(dead)) > DEAD_SHARE * entries:
        return None
    total = int(previous.note_start[-1]) - gone + len(chunk_at)
    if total != conn.execute("SELECT count(*) FROM chunks").fetchone()[0]:
        return None
    counts = np.diff(note_start).astype(np.int64)
    names = _names_bytes(note_ids)
    _append(rows_path(db, prev.name), prev.chunks * 8, chunk_at)
    _append(rows_path(db, prev.name + COUNTS), prev.entries * 8, counts)
    _append(rows_path(db, prev.name + NAMES), prev.name_bytes, names)
    all_names = prev.names + list(note_ids)
    anchor = dict(zip(prev.pending.tolist(), prev.anchors.tolist()))
    for e in range(prev.entries, entries):
        anchor[e] = bisect.bisect_left(all_names, all_names[e], 0, prev.base)
    pend = np.asarray(sorted(pending | set(range(prev.entries, entries)), key=all_names.__getitem__), np.int64)
    anchors = np.asarray([anchor[e] for e in pend.tolist()], np.int64)
    dead_arr = np.asarray(sorted(dead), np.int64)
    all_counts = np.concatenate([prev.counts, counts])
    return OrderLog(prev.name, entries, prev.chunks + len(chunk_at), prev.name_bytes + names.nbytes, prev.base,
                    dead_arr, pend, anchors, all_names, all_counts, np.zeros(0, np.int64))


def write_layout(db: str | Path, layout: VaultLayout, generation: int, token: str,
                 files: tuple[RowsFile, RowsFile], order: OrderLog) -> Path:
    """Write the small layout file of `db` for the commit (generation, token), whose rows are in `files` and
    whose vault order is in `order` (written before), atomically (files.atomic_replace)."""
    # the rows' ids are in the rows files' `.ids` beside them, as appended; here only the rows dead since
    # (a removed chunk's or entity's, and padding): the small index of superseded rows; the same for the
    # order log's entries
    arrays = {"chunks_dead": np.flatnonzero(layout.vec_ids < 0).astype(np.int64),
              "entities_dead": np.flatnonzero(layout.entity_ids < 0).astype(np.int64),
              "order_dead": order.dead, "order_pending": order.pending, "order_anchors": order.anchors}
    dims = {"chunks": int(layout.matrix.shape[1]), "entities": int(layout.entity_matrix.shape[1])}
    spec, offset = {}, HEADER_BYTES
    for name, a in arrays.items():
        offset = -(-offset // 64) * 64
        spec[name] = [offset, a.dtype.str, list(a.shape)]
        offset += a.nbytes
    rows = {kind: {"file": f.name, "rows": f.rows, "dim": dims[kind], "segments": [list(s) for s in f.segments[-64:]],
                   "segment_count": len(f.segments)}
            for kind, f in zip(KINDS, files)}
    order_head = {"file": order.name, "entries": order.entries, "chunks": order.chunks,
                  "name_bytes": order.name_bytes, "base": order.base}
    header = MAGIC + json.dumps({"version": VERSION, "generation": generation, "token": token, "size": offset,
                                 "arrays": spec, "rows": rows, "order": order_head}).encode()
    if len(header) > HEADER_BYTES:
        raise ValueError(f"layout header of {len(header)} bytes does not fit in {HEADER_BYTES}")
    db = Path(db)
    dest = layout_path(db)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), _mode(db))
            f.write(header.ljust(HEADER_BYTES, b"\0"))
            for name, a in arrays.items():
                f.seek(spec[name][0])
                f.write(np.ascontiguousarray(a).tobytes())
            f.truncate(offset)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return atomic_replace(tmp, dest)


def _header(path: Path) -> tuple[dict, mmap.mmap]:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < HEADER_BYTES:
            raise ValueError(f"{size} bytes, shorter than its header")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)    # the mapping outlives the descriptor
    head = bytes(mm[:HEADER_BYTES])
    if not head.startswith(MAGIC):
        raise ValueError("not a layout file")
    meta = json.loads(head[len(MAGIC):].rstrip(b"\0"))
    if meta.get("version") != VERSION:
        raise ValueError(f"format version {meta.get('version')}, this autoresearch reads {VERSION}")
    if meta.get("size") != size:
        raise ValueError(f"{size} bytes, its header says {meta.get('size')}")
    return meta, mm


def _map_bytes(path: Path, n: int) -> np.ndarray:
    """The first `n` bytes of a file, mapped (a killed update may have appended more)."""
    if n == 0:
        return np.zeros(0, np.uint8)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < n:
            raise ValueError(f"{path.name}: {size} bytes, its layout names {n}")
        mm = mmap.mmap(f.fileno(), n, access=mmap.ACCESS_READ)
    return np.frombuffer(mm, dtype=np.uint8, count=n)


def _map_rows(path: Path, rows: int, dim: int) -> np.ndarray:
    """The first `rows` rows of a rows file, mapped (a killed update may have appended more)."""
    if rows == 0 or dim == 0:
        return np.zeros((rows, dim), np.float32)
    return _map_bytes(path, rows * dim * 4).view(np.float32).reshape(rows, dim)


def _map_order(main: Path, head: dict, arr: dict) -> OrderLog:
    """The order log a small file's header names (`main`: the small file's own name, no PREVIOUS), mapped;
    its live entries are resolved by the caller (resolve_order)."""
    name = head["file"]
    counts = _map_bytes(main.with_name(f"{main.name}.{name}{COUNTS}"), head["entries"] * 8).view(np.int64)
    raw = _map_bytes(main.with_name(f"{main.name}.{name}{NAMES}"), head["name_bytes"])
    names = raw.tobytes().decode("utf-8").split("\0")[:-1]
    if len(names) != head["entries"]:
        raise ValueError(f"{name}{NAMES}: {len(names)} note ids, its layout names {head['entries']}")
    return OrderLog(name, head["entries"], head["chunks"], head["name_bytes"], head["base"], arr["order_dead"],
                    arr["order_pending"], arr["order_anchors"], names, counts, np.zeros(0, np.int64))


def map_layout(path: Path, generation: int, token: str | None) -> VaultLayout:
    """The layout in the file at `path` and its rows files, mapped (nothing is copied: the arrays are views of
    the files' pages), if it was written for (generation, token); ValueError (why) if not."""
    if token is None:
        raise ValueError("the index records no generation token (written by an older autoresearch)")
    meta, mm = _header(path)
    if (meta.get("generation"), meta.get("token")) != (generation, token):
        raise ValueError(f"written for generation {meta.get('generation')}, the index is at {generation}")
    arr = {}
    for name, (offset, dtype, shape) in meta["arrays"].items():
        count = int(np.prod(shape)) if shape else 1
        arr[name] = np.frombuffer(mm, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
    files, mats, ids = [], [], []
    main = path.name[:-len(PREVIOUS)] if path.name.endswith(PREVIOUS) else path.name
    order = _map_order(path.with_name(main), meta["order"], arr)
    chunk_ids = _map_bytes(path.with_name(f"{main}.{order.name}"), order.chunks * 8).view(np.int64)
    note_ids, note_start, chunk_at, live = resolve_order(order.names, order.counts, chunk_ids, order.base,
                                                         order.dead, order.pending, order.anchors)
    order = replace(order, live=live)
    for kind in KINDS:
        r = meta["rows"][kind]
        files.append(RowsFile(r["file"], r["rows"], tuple(tuple(s) for s in r["segments"])))
        mats.append(_map_rows(path.with_name(f"{main}.{r['file']}"), r["rows"], r["dim"]))
        row_ids = _map_rows(path.with_name(f"{main}.{r['file']}{IDS}"), r["rows"], 2).view(np.int64).reshape(-1)
        row_ids = np.array(row_ids)                # a copy: the rows dead since they were appended marked -1
        row_ids[arr[f"{kind}_dead"]] = -1
        ids.append(row_ids)
    return VaultLayout(note_ids, note_start, chunk_at, ids[0], mats[0],
                       ids[1], mats[1], (generation, token), tuple(files), order)


def _mapped(db: Path, generation: int, token: str | None) -> tuple[VaultLayout, Path]:
    """The layout file beside `db` (or the previous commit's) written for (generation, token)."""
    main = layout_path(db)
    why = None
    for path in (main, main.with_name(main.name + PREVIOUS)):
        try:
            return map_layout(path, generation, token), path
        except FileNotFoundError:
            why = why or f"no {main.name} beside the index"
        except (OSError, ValueError, KeyError, TypeError) as e:
            why = why or f"{main.name} not used: {e}"
    raise ValueError(why)


def read_layout(conn, db: str | Path | None = None) -> tuple[VaultLayout, LayoutSource]:
    """The layout of the commit `conn`'s snapshot sees: mapped from the files beside the index when they were
    written for this commit, else read from SQLite (the reason in the LayoutSource)."""
    db = Path(db) if db is not None else db_path(conn)
    if db is not None:
        try:
            layout, path = _mapped(db, *_stamp(conn))
            return layout, LayoutSource(True, f"mapped from {path.name}")
        except ValueError as e:
            reason = str(e)
    else:
        reason = "an index in memory"
    return layout_from_index(conn), LayoutSource(False, reason)


def current_layout(conn, db: str | Path) -> VaultLayout | None:
    """The mapped layout of `db` if its file is current for the commit `conn` sees, else None: a writer asks
    before its write, to lend the next files the vectors that did not change."""
    try:
        return _mapped(Path(db), *_stamp(conn))[0]
    except ValueError:
        return None


def rows_named_by(path: Path) -> set[str]:
    """The rows files a small layout file names (none if it is missing or unreadable)."""
    try:
        meta, _ = _header(path)
        return {r["file"] for r in meta["rows"].values()} | {meta["order"]["file"]}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def refresh_layout(conn, target: str | Path, previous: VaultLayout | None = None,
                   reread_from: int | None = None, moved=None) -> int:
    """Inside the writer's transaction, after bump_generation: write the layout files of the index file
    `target` for the commit about to be made (a full build writes into a temp file that then replaces
    `target`). `previous` (current_layout before the write) lends the rows of chunk ids below `reread_from`
    (None: of every chunk id; the write added no chunk): the rows of the chunks gone are marked dead and the
    new ones appended; every other vector is read from vec0. `moved`: the ids of the only notes whose chunks
    the write may have changed (removed, rewritten or added notes; empty: none), whose entries the order log
    appends (append_order); None: the whole vault order is read and written anew. Returns the bytes written."""
    target = Path(target)
    generation, token = _stamp(conn)
    if previous is not None and (previous.files is None or previous.stamp is None
                                 or previous.stamp[0] != generation - 1):
        previous = None                    # not the commit this one follows (another writer came between)
    order = None
    if previous is None:
        fresh = layout_from_index(conn)
        note_ids, note_start, chunk_at = fresh.note_ids, fresh.note_start, fresh.chunk_at
        chunks = write_rows(target, "chunks", generation, None, None, fresh.vec_ids[fresh.vec_ids >= 0],
                            fresh.matrix[fresh.vec_ids >= 0], fresh.matrix.shape[1])
        ents = write_rows(target, "entities", generation, None, None, fresh.entity_ids[fresh.entity_ids >= 0],
                          fresh.entity_matrix[fresh.entity_ids >= 0], fresh.entity_matrix.shape[1])
    else:
        if moved is not None and previous.order is not None:
            order = append_order(conn, target, previous, moved)
        if order is None:
            note_ids, note_start, chunk_at = _order(conn)
        if reread_from is None:
            reread_from = int(previous.vec_ids.max()) + 1 if len(previous.vec_ids) else 0
        want = np.asarray([r[0] for r in conn.execute("SELECT id FROM chunks WHERE has_vector ORDER BY id")], np.int64)
        keep = (previous.vec_ids >= 0) & (previous.vec_ids < reread_from) & np.isin(previous.vec_ids, want)
        # `want` is sorted and distinct (ORDER BY id), so this is setdiff1d's answer without its two sorts
        # (~100 ms at 100,000 chunks, against ~1 for isin's table of ids)
        new_ids, blobs = _vectors(conn, "chunk_vec", want[~np.isin(want, previous.vec_ids[keep])].tolist())
        dim = previous.matrix.shape[1]
        chunks = write_rows(target, "chunks", generation, previous, keep, new_ids, _matrix(blobs, len(new_ids), dim), dim)
        # entity vectors: ids 1..kept as the previous file has them when this transaction's write_entities left
        # them (or never ran), the rest read (a whole read of entity_vec inside the update's transaction: 1.4 s
        # at 100,000 chunks, against 0.1 s outside it)
        mark = get_meta(conn, ENTITIES_KEPT)
        written_now = isinstance(mark, dict) and mark.get("generation") == generation - 1
        live = previous.entity_ids[previous.entity_ids >= 0]
        kept = int(mark["kept"]) if written_now else (int(live.max()) if len(live) else 0)
        keep = (previous.entity_ids >= 0) & (previous.entity_ids <= kept)
        now = np.asarray([r[0] for r in conn.execute("SELECT id FROM entities WHERE id > ? ORDER BY id", (kept,))],
                         np.int64)
        ent_ids, ent_blobs = _vectors(conn, "entity_vec", now.tolist())
        edim = previous.entity_matrix.shape[1] or (len(ent_blobs[0]) // 4 if ent_blobs else 0)
        ents = write_rows(target, "entities", generation, previous, keep, ent_ids,
                          _matrix(ent_blobs, len(ent_ids), edim), edim)
    if order is None:
        order = write_order(target, note_ids, note_start, chunk_at)
    empty = np.zeros(0, np.int64)
    layout = VaultLayout((), empty, empty, chunks.ids, np.zeros((0, chunks.dim), np.float32),
                         ents.ids, np.zeros((0, ents.dim), np.float32))
    main = layout_path(target)
    prev = main.with_name(main.name + PREVIOUS)
    if previous is not None and _is_file_of(main, previous.stamp):
        atomic_replace(main, prev)         # the committed file stays until this commit is made
    elif previous is None and main.exists() and target.exists():
        atomic_replace(main, prev)         # a full build: the index it replaces keeps its file until the swap
    path = write_layout(target, layout, generation, token, (chunks.file, ents.file), order)
    keep_files = {rows_path(target, n + tail) for n in {chunks.file.name, ents.file.name, order.name}
                  | rows_named_by(prev) for tail in TAILS}
    for p in companion_files(target):
        if p != path and p != prev and p not in keep_files:
            p.unlink(missing_ok=True)      # files no kept layout names (a killed update's, a copied-out file)
    order_bytes = (order.chunks + order.entries) * 8 + order.name_bytes
    if previous is not None and previous.order is not None and previous.order.name == order.name:
        order_bytes -= (previous.order.chunks + previous.order.entries) * 8 + previous.order.name_bytes
    return chunks.written + ents.written + order_bytes + path.stat().st_size


def _is_file_of(path: Path, stamp) -> bool:
    try:
        meta, _ = _header(path)
        return stamp is not None and (meta.get("generation"), meta.get("token")) == tuple(stamp)
    except (OSError, ValueError, KeyError, TypeError):
        return False
