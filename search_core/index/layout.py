"""The vault's layout and vectors beside the index, memory-mapped by every process that searches.

A view of the index needs, before its first search, every vector (the dense channel's matrix, the
entity names' matrix) and the order of the vault (which chunks each note holds, in (note id, ord)
order). Read from SQLite that is a copy of every vec0 row and every chunk row into each process: at
100,000 chunks 2.6 s of CPU of a 3 s cold `search`, and the copy stays in every server's memory. So the
writer stores them once more, as flat arrays in one file beside the index (`index.sqlite.layout`), and a
view maps that file: the kernel's page cache holds the vectors once for every process, and a cold
search reads only the pages it touches.

The file is a cache of the index, never its source: its header records the generation and the
generation token (store.bump_generation) of the commit it was written for, and a view uses it only when
both equal the ones its own read snapshot sees. Any other commit (an update by a writer that did not
rewrite it, a full rebuild: a new token, a crash between the file and the commit) leaves it stale, and
the view reads SQLite instead, as it always did (`layout_from_index`), with the same arrays. The writer
writes the file inside its write transaction, after bump_generation and before COMMIT, so that a server
reloading after the commit finds the file already current.

Format: MAGIC, then a JSON header (arrays: name -> [offset, dtype, shape]) padded to HEADER_BYTES,
then each array at a 64-byte boundary, little-endian; note ids as one JSON array of strings.
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_core.files import atomic_replace
from search_core.index.store import get_meta

MAGIC = b"AUTORESEARCH-LAYOUT\n"
VERSION = 1
HEADER_BYTES = 4096
SUFFIX = ".layout"
ENTITIES_KEPT = "layout_entities_kept"    # meta: write.write_entities' rows left as they were, and when


@dataclass(frozen=True)
class VaultLayout:
    """The vault's order and its vectors, as arrays. Places: a chunk's position in (note id, ord) order."""
    note_ids: tuple[str, ...]      # notes that hold chunks, in vault (note id) order
    note_start: np.ndarray         # int64 [notes + 1]: note i holds places note_start[i]:note_start[i + 1]
    chunk_at: np.ndarray           # int64 [chunks]: place -> chunk id
    vec_ids: np.ndarray            # int64 [vectors]: matrix row -> chunk id, rows in vault order
    matrix: np.ndarray             # float32 [vectors, dim]
    entity_ids: np.ndarray         # int64 [entity vectors], row id order
    entity_matrix: np.ndarray      # float32 [entity vectors, dim]


@dataclass(frozen=True)
class LayoutSource:
    """Where a view's layout came from: the file beside the index, or SQLite (and why not the file)."""
    mapped: bool
    reason: str


def layout_path(db: str | Path) -> Path:
    db = Path(db)
    return db.with_name(db.name + SUFFIX)


def db_path(conn) -> Path | None:
    """The file of a connection's main database (None for an in-memory one)."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return Path(file) if file else None
    return None


def _stamp(conn) -> tuple[int, str | None]:
    return int(get_meta(conn, "generation", 0)), get_meta(conn, "generation_token")


# ---------------------------------------------------------------- from SQLite

def _vectors(conn, table: str, ids: list[int] | None = None) -> tuple[np.ndarray, list[bytes]]:
    """(row ids, raw float32 blobs) of a vec0 table: every row, or those of `ids`."""
    out_ids, blobs = [], []
    if ids is None:
        rows = conn.execute(f"SELECT rowid, embedding FROM {table}")
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


def layout_from_index(conn, previous: VaultLayout | None = None, reread_from: int | None = None) -> VaultLayout:
    """The layout read from SQLite (inside the caller's transaction or snapshot). `previous`: a layout of an
    earlier commit whose vectors may be reused for chunk ids below `reread_from` (ids from there on may
    have been given to new chunks); every other vector is read from vec0."""
    nids, cids = [], []
    for cid, nid in conn.execute("SELECT id, note_id FROM chunks ORDER BY note_id, ord"):
        cids.append(cid)
        nids.append(nid)
    chunk_at = np.asarray(cids, np.int64)
    first = [i for i in range(len(nids)) if i == 0 or nids[i] != nids[i - 1]]
    note_ids = tuple(nids[i] for i in first)
    note_start = np.asarray(first + [len(nids)], np.int64)
    place_of = np.full(int(chunk_at.max()) + 1 if len(chunk_at) else 0, -1, np.int64)
    place_of[chunk_at] = np.arange(len(chunk_at))

    if previous is not None and reread_from is not None and len(previous.vec_ids):
        want = np.asarray([r[0] for r in conn.execute("SELECT id FROM chunks WHERE has_vector ORDER BY id")], np.int64)
        prev_row = np.full(max(int(previous.vec_ids.max()), int(want.max()) if len(want) else 0) + 1, -1, np.int64)
        prev_row[previous.vec_ids] = np.arange(len(previous.vec_ids))
        reuse = (want < reread_from) & (prev_row[want] >= 0) if len(want) else np.zeros(0, bool)
        fresh_ids, fresh_blobs = _vectors(conn, "chunk_vec", want[~reuse].tolist())
        dim = previous.matrix.shape[1]
        ids = np.concatenate([want[reuse], fresh_ids])
        mat = np.empty((len(ids), dim), np.float32)
        mat[:int(reuse.sum())] = previous.matrix[prev_row[want[reuse]]]
        mat[int(reuse.sum()):] = _matrix(fresh_blobs, len(fresh_ids), dim)
    else:
        ids, blobs = _vectors(conn, "chunk_vec")
        mat = _matrix(blobs, len(ids))
    # rows in vault order, rows of no place after them by id (a vector without its chunk row)
    known = (ids >= 0) & (ids < len(place_of))
    key = np.full(len(ids), -1, np.int64)
    key[known] = place_of[ids[known]]
    key = np.where(key >= 0, key, len(place_of) + ids)
    perm = np.argsort(key, kind="stable")
    vec_ids, matrix = ids[perm], mat[perm] if len(ids) else mat

    # entity vectors: rows 1..kept as the previous file has them when this transaction's write_entities left
    # them (or never ran), the rest read (a whole read of entity_vec inside the update's transaction: 1.4 s
    # at 100,000 chunks, against 0.1 s outside it)
    kept = None
    if previous is not None:
        mark = get_meta(conn, ENTITIES_KEPT)
        written_now = isinstance(mark, dict) and mark.get("generation") == int(get_meta(conn, "generation", 0)) - 1
        kept = int(mark["kept"]) if written_now else None
        if not written_now and len(previous.entity_ids):
            kept = int(previous.entity_ids.max())
    if kept is not None:
        now = np.asarray([r[0] for r in conn.execute("SELECT id FROM entities ORDER BY id")], np.int64)
        lend = previous.entity_ids[previous.entity_ids <= kept]
        fresh_ids, fresh_blobs = _vectors(conn, "entity_vec", now[now > kept].tolist())
        parts = [m for m in (previous.entity_matrix[:len(lend)], _matrix(fresh_blobs, len(fresh_ids))) if len(m)]
        ent_ids = np.concatenate([lend, fresh_ids])
        ent_mat = np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
    else:
        ent_ids, ent_blobs = _vectors(conn, "entity_vec")
        ent_mat = _matrix(ent_blobs, len(ent_ids))
    order = np.argsort(ent_ids, kind="stable")
    return VaultLayout(note_ids, note_start, chunk_at, vec_ids, matrix, ent_ids[order],
                       ent_mat[order] if len(ent_ids) else ent_mat)


# ---------------------------------------------------------------- the file

def _arrays(layout: VaultLayout) -> dict[str, np.ndarray]:
    names = np.frombuffer(json.dumps(list(layout.note_ids), ensure_ascii=False).encode("utf-8"), np.uint8)
    return {"note_start": layout.note_start, "chunk_at": layout.chunk_at, "vec_ids": layout.vec_ids,
            "matrix": np.ascontiguousarray(layout.matrix, np.float32), "entity_ids": layout.entity_ids,
            "entity_matrix": np.ascontiguousarray(layout.entity_matrix, np.float32), "note_ids": names}


def write_layout(db: str | Path, layout: VaultLayout, generation: int, token: str) -> Path:
    """Write the layout file of `db` for the commit (generation, token), atomically (files.atomic_replace)."""
    arrays = _arrays(layout)
    spec, offset = {}, HEADER_BYTES
    for name, a in arrays.items():
        offset = -(-offset // 64) * 64
        spec[name] = [offset, a.dtype.str, list(a.shape)]
        offset += a.nbytes
    header = MAGIC + json.dumps({"version": VERSION, "generation": generation, "token": token, "size": offset,
                                 "arrays": spec}).encode()
    if len(header) > HEADER_BYTES:
        raise ValueError(f"layout header of {len(header)} bytes does not fit in {HEADER_BYTES}")
    dest = layout_path(db)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            try:                                   # readable by whoever may read the index (mkstemp: 0600)
                os.fchmod(f.fileno(), os.stat(db).st_mode & 0o777)
            except FileNotFoundError:
                os.fchmod(f.fileno(), 0o644)
            f.write(header.ljust(HEADER_BYTES, b"\0"))
            for name, a in arrays.items():
                f.seek(spec[name][0])
                f.write(np.ascontiguousarray(a).tobytes())
            f.truncate(offset)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return atomic_replace(tmp, dest)


def map_layout(path: Path, generation: int, token: str | None) -> VaultLayout:
    """The layout in the file at `path`, mapped (nothing is copied: the arrays are views of the file's pages),
    if it was written for (generation, token); ValueError (why) if not."""
    if token is None:
        raise ValueError("the index records no generation token (written by an older autoresearch)")
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
    if (meta.get("generation"), meta.get("token")) != (generation, token):
        raise ValueError(f"written for generation {meta.get('generation')}, the index is at {generation}")
    if meta.get("size") != size:
        raise ValueError(f"{size} bytes, its header says {meta.get('size')}")
    arr = {}
    for name, (offset, dtype, shape) in meta["arrays"].items():
        count = int(np.prod(shape)) if shape else 1
        arr[name] = np.frombuffer(mm, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
    note_ids = tuple(json.loads(arr["note_ids"].tobytes().decode("utf-8")))
    return VaultLayout(note_ids, arr["note_start"], arr["chunk_at"], arr["vec_ids"], arr["matrix"],
                       arr["entity_ids"], arr["entity_matrix"])


def read_layout(conn, db: str | Path | None = None) -> tuple[VaultLayout, LayoutSource]:
    """The layout of the commit `conn`'s snapshot sees: mapped from the file beside the index when that file
    was written for this commit, else read from SQLite (the reason in the LayoutSource)."""
    db = Path(db) if db is not None else db_path(conn)
    generation, token = _stamp(conn)
    if db is not None:
        path = layout_path(db)
        try:
            return map_layout(path, generation, token), LayoutSource(True, f"mapped from {path.name}")
        except FileNotFoundError:
            reason = f"no {path.name} beside the index"
        except (OSError, ValueError, KeyError, TypeError) as e:
            reason = f"{path.name} not used: {e}"
    else:
        reason = "an index in memory"
    return layout_from_index(conn), LayoutSource(False, reason)


def current_layout(conn, db: str | Path) -> VaultLayout | None:
    """The mapped layout of `db` if its file is current for the commit `conn` sees, else None: a writer asks
    before its write, to lend the next file the vectors that did not change."""
    try:
        return map_layout(layout_path(db), *_stamp(conn))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def refresh_layout(conn, target: str | Path, previous: VaultLayout | None = None,
                   reread_from: int | None = None) -> Path:
    """Inside the writer's transaction, after bump_generation: write the layout file of the index file
    `target` for the commit about to be made (a full build writes into a temp file that then replaces
    `target`). `previous` (current_layout before the write) lends the vectors of chunk ids below
    `reread_from` (None: of every chunk id; the write added no chunk); every other vector is read from
    vec0."""
    if previous is not None and reread_from is None:
        reread_from = int(previous.vec_ids.max()) + 1 if len(previous.vec_ids) else 0
    layout = layout_from_index(conn, previous, reread_from)
    generation, token = _stamp(conn)
    return write_layout(target, layout, generation, token)
