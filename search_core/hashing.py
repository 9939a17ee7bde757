"""The one helper for hashes of configs, fingerprints and files (engine and tuner alike).

Every value below is stored somewhere (ledger rows and pins, embedding-cache keys, index file names,
A/B result files), so each function reproduces, byte for byte, the hash its call sites computed before
they shared it (tests/search_core/test_hashing.py pins literal values). Two JSON spellings exist on purpose:
`ascii=True` is json.dumps' default escaping, which the embedding cache, the query-vector cache and
index file names were keyed with; `ascii=False` keeps Korean as UTF-8, as config hashes and pins were.
Content hashes (note bytes, chunk text, the recall log's privacy hash, the ledger chain) are not
configs or files and stay where they are.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def hash_text(text: str | bytes, n: int | None = 16) -> str:
    """sha256 hex of a string (UTF-8) or bytes, cut to n characters (None: all 64)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:n]


def canonical_json(obj, *, ascii: bool = False) -> str:
    """Keys sorted, so two equal dicts hash alike whatever their insertion order."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=ascii, default=str)


def hash_json(obj, n: int = 16, *, ascii: bool = False) -> str:
    """sha256 of a JSON-able value (configs, fingerprints, pins): see the module docstring for `ascii`."""
    return hash_text(canonical_json(obj, ascii=ascii), n)


_FILE_CACHE: dict[tuple[str, int, int], str] = {}


def hash_file(path: str | Path, n: int = 16) -> str:
    """sha256 of one file's bytes (weights files: hundreds of MB), read in 1 MiB blocks and memoised by
    (path, size, mtime), so a warm process never re-reads it."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _FILE_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _FILE_CACHE[key] = h.hexdigest()
    return _FILE_CACHE[key][:n]


def known_file_hashes() -> list[list]:
    """The memo as [path, size, mtime_ns, sha256] rows, for a caller that keeps it across processes (an
    index records the hash of the weights it was built with: a new process then skips the 0.2-0.4 s read
    of a 30 MB weights file while the file's size and mtime are unchanged)."""
    return [[p, size, mtime, h] for (p, size, mtime), h in _FILE_CACHE.items()]


def remember_file_hashes(rows) -> None:
    """Seed the memo with rows known_file_hashes() gave; a row whose file has since changed (size or
    mtime) is never looked up, because the key holds them."""
    for row in rows or []:
        try:
            p, size, mtime, h = row
            _FILE_CACHE.setdefault((str(p), int(size), int(mtime)), str(h))
        except (TypeError, ValueError):
            continue


def _files(p: Path) -> list[Path]:
    return sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]


# the files SQLite keeps beside a database, named after it: a live one's WAL and shared memory, a rollback's journal
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def _content_files(p: Path) -> list[Path]:
    """The files hash_tree reads: a file itself, or every file under a folder except SQLite databases and
    their companions (and an index's layout file). A database beside a gold set (an index built into a BEIR folder, its embedding cache)
    is state that moves with every write, not the set's content; and reading its bytes would drop every
    SQLite lock this process holds on it (docs/architecture.md, "Live files"), so whether a file is a
    database is asked of SQLite."""
    if not p.is_dir():
        return [p]
    from search_core.index.layout import SUFFIX as LAYOUT
    from search_core.index.store import sqlite_file_problem
    files = _files(p)
    names = {str(f) for f in files}
    # an index's layout files (search_core.index.layout: `<db>.layout`, `<db>.layout.<more>`) are its companions
    # too: written by every commit
    return [f for f in files
            if not any(str(f).endswith(c) and str(f)[:-len(c)] in names for c in SQLITE_COMPANIONS)
            and not (LAYOUT in f.name and str(f.parent / f.name[:f.name.index(LAYOUT)]) in names)
            and sqlite_file_problem(f) is not None]


def _rel(f: Path, p: Path) -> str:
    return str(f.relative_to(p)) if p.is_dir() else f.name


def hash_tree(path: str | Path | None, n: int = 16) -> str | None:
    """sha256 of a file's name and bytes, or of every file's relative path and bytes under a folder (BEIR
    gold sets are folders): what a sweep pins its gold set, holdout and space file by."""
    if path is None:
        return None
    p = Path(path)
    h = hashlib.sha256()
    for f in _content_files(p):
        h.update(_rel(f, p).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:n]


def stat_stamp(path: str | Path, n: int = 16) -> str:
    """sha256 of the relative path, size and mtime of every file under a folder (or of one file): changes
    when any note does, without reading a byte of them."""
    p = Path(path)
    h = hashlib.sha256()
    for f in ([p] if p.is_file() else _files(p)):
        st = f.stat()
        h.update(f"{f.relative_to(p) if f != p else f.name}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:n]
