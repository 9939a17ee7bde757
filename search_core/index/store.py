"""One SQLite file per index: connection with extensions, schema, migrations, meta, atomic writes, and the
one way to look at a SQLite file that may be live (peek, sqlite_file_problem; docs/architecture.md)."""

from __future__ import annotations

import json
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from search_core import SearchCoreError

SCHEMA_VERSION = 2


def sqlite_uri(path: str | Path, **params) -> str:
    """A `file:` URI for SQLite: the path percent-quoted (a folder named "notes #2?" is a path, not a query
    string), then the parameters."""
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(Path(path).resolve()))}" + (f"?{query}" if query else "")


def peek(path: str | Path):
    """A read-only connection for a look at a file that may be live in this process or another. It comes
    from the same SQLite library as connect(), so its close keeps this process's locks on the file (the
    rule for live files in docs/architecture.md); and it leaves no trace: without a -wal beside the file (no
    connection has it open in WAL mode) it is opened immutable, so no -wal, -shm or journal is created."""
    import sqlean
    wal = Path(str(path) + "-wal").exists()
    return sqlean.connect(sqlite_uri(path, mode="ro", **({} if wal else {"immutable": 1})), uri=True,
                          check_same_thread=False)


def sqlite_file_problem(path: str | Path) -> str | None:
    """Why the file at `path` is not a SQLite database (missing, a folder, empty, or SQLite cannot read its
    first page), or None when it is one. Asked of SQLite through peek(), never by reading the file's bytes:
    the close of any other descriptor of a live database drops every POSIX lock this process holds on it,
    and another process then checkpoints and unlinks the WAL under our connections."""
    import sqlean
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return "no such file"
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return "it is a folder"
    if st.st_size == 0:
        return "it is empty"
    try:
        conn = peek(p)
        try:
            conn.execute("PRAGMA schema_version").fetchone()     # reads the header and the first page
        finally:
            conn.close()
    except sqlean.Error as e:
        return str(e)                                          # "file is not a database", ...
    return None


def sqlite_tables(path: str | Path) -> set[str]:
    """The table names of a SQLite file, looked at through peek() (raises sqlean.DatabaseError on a file that
    is not one)."""
    conn = peek(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def connect(path: str | Path, *, readonly: bool = False):
    """A connection that can load sqlite-vec on every Python build (this machine's sqlite3 cannot)."""
    try:
        import sqlean as sqlite3
    except ImportError:  # pragma: no cover - only when the dependency was removed by hand
        raise SearchCoreError("the sqlean.py driver is missing: pip install sqlean-py") from None
    import sqlite_vec

    if readonly:
        conn = sqlite3.connect(sqlite_uri(path, mode="ro"), uri=True, check_same_thread=False)
    else:
        conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.isolation_level = None   # autocommit; transactions are explicit, via atomic()
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute("PRAGMA busy_timeout = 5000")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")   # searches keep running while an update is written
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def backup_copy(src: str | Path, dst: str | Path) -> Path:
    """A consistent copy of the SQLite file `src` into `dst` through SQLite's backup API: its WAL comes along, and
    a reader of an existing `dst` sees the copy as one commit (never a file copy: docs/architecture.md, Live
    files). `dst` is left in WAL mode."""
    import sqlean

    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    # the destination is opened without connect()'s WAL pragma: a backup into a WAL file cannot change its page
    # size, and the embedding cache's pages are 16 KB where a new file's are 4 KB ("attempt to write a readonly
    # database"); WAL is switched on after the copy
    a = connect(src, readonly=True)
    b = sqlean.connect(str(dst), isolation_level=None)
    try:
        b.execute("PRAGMA busy_timeout = 5000")
        a.backup(b)
        b.execute("PRAGMA journal_mode = WAL")
    finally:
        a.close()
        b.close()
    return dst


@contextmanager
def atomic(conn):
    """One transaction: everything inside lands, or (on any exception, Ctrl-C included) nothing does."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        # after SQLITE_FULL or an I/O error SQLite may have rolled the transaction back itself: a second
        # ROLLBACK would raise "no transaction is active" and hide why the write failed
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def _run_script(conn, script: str) -> None:
    # executescript() would COMMIT the open transaction; statements one by one stay inside atomic()
    for stmt in script.split(";\n"):
        if stmt.strip() and not all(l.strip().startswith("--") or not l.strip() for l in stmt.splitlines()):
            conn.execute(stmt)


def _v1(conn) -> None:
    _run_script(conn, """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE notes (
        id TEXT PRIMARY KEY, path TEXT, title TEXT NOT NULL, aliases TEXT NOT NULL DEFAULT '[]',
        tags TEXT NOT NULL DEFAULT '[]', summary TEXT NOT NULL DEFAULT '', is_nav INTEGER NOT NULL DEFAULT 0,
        content_hash TEXT NOT NULL, size INTEGER, mtime_ns INTEGER, warnings TEXT NOT NULL DEFAULT '[]');
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY, note_id TEXT NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
        ord INTEGER NOT NULL, heading TEXT NOT NULL, context TEXT NOT NULL, text TEXT NOT NULL,
        text_hash TEXT NOT NULL, has_vector INTEGER NOT NULL DEFAULT 0, UNIQUE (note_id, ord));
    CREATE INDEX chunks_note ON chunks(note_id);
    -- trigram: Korean has no spaces to trust, and substrings ("임베딩" in "임베딩을") must match
    CREATE VIRTUAL TABLE chunks_fts USING fts5(title, aliases, tags, summary, body, tokenize = 'trigram');
    -- cites: every [[link]]; dst is NULL while unresolved
    CREATE TABLE links (
        src TEXT NOT NULL REFERENCES notes(id) ON DELETE CASCADE, target TEXT NOT NULL, anchor TEXT NOT NULL,
        kind TEXT NOT NULL, dst TEXT);
    CREATE INDEX links_src ON links(src);
    CREATE INDEX links_dst ON links(dst);
    CREATE TABLE belongs_to (note_id TEXT NOT NULL REFERENCES notes(id) ON DELETE CASCADE, tag TEXT NOT NULL,
        PRIMARY KEY (note_id, tag));
    CREATE INDEX belongs_to_tag ON belongs_to(tag);
    -- entities: note titles, aliases and tags, matched against queries by name and by embedding
    CREATE TABLE entities (id INTEGER PRIMARY KEY, name TEXT NOT NULL, norm TEXT NOT NULL, kind TEXT NOT NULL,
        note_id TEXT, UNIQUE (norm, kind, note_id));
    CREATE INDEX entities_norm ON entities(norm);
    CREATE TABLE cooccurrence (a TEXT NOT NULL, b TEXT NOT NULL, weight REAL NOT NULL, PRIMARY KEY (a, b));
    CREATE TABLE communities (note_id TEXT PRIMARY KEY, community INTEGER NOT NULL);
    """)


def _v2(conn) -> None:
    # why a note is an index page (search_core.ingest.parse.nav_reason); is_nav stays its yes/no. A v1
    # index knew only the frontmatter flag: its link pages are found by the next `index` run, which
    # reads every note once for them (NAV_RULE in search_core.index.indexer)
    conn.execute("ALTER TABLE notes ADD COLUMN nav_reason TEXT NOT NULL DEFAULT ''")
    conn.execute("UPDATE notes SET nav_reason = 'frontmatter' WHERE is_nav")


MIGRATIONS = [_v1, _v2]   # MIGRATIONS[i] takes the schema from version i to i + 1


def migrate(conn) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SearchCoreError(f"index schema v{version} is newer than this autoresearch (v{SCHEMA_VERSION}); "
                              "upgrade autoresearch or rebuild with `autoresearch index VAULT --db FILE --full`")
    for v in range(version, SCHEMA_VERSION):
        with atomic(conn):
            MIGRATIONS[v](conn)
            conn.execute(f"PRAGMA user_version = {v + 1}")


def ensure_vec_tables(conn, dim: int) -> None:
    for table in ("chunk_vec", "entity_vec"):
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                     f"embedding float[{dim}] distance_metric=cosine)")


def get_meta(conn, key: str, default=None):
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return json.loads(row[0]) if row else default


def set_meta(conn, key: str, value) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value, ensure_ascii=False)))


def bump_generation(conn) -> int:
    """Inside a write transaction: count it. The searcher's reload stamp and the channel-list cache key
    read this counter, which changes on every indexing commit (indexed_at has one-second resolution).
    The token beside it is new on every commit too: a full rebuild starts again at generation 1, and the
    layout file beside the index (layout.py) must never pass for the file of another build's generation 1."""
    n = int(get_meta(conn, "generation", 0)) + 1
    set_meta(conn, "generation", n)
    set_meta(conn, "generation_token", os.urandom(8).hex())
    return n


@contextmanager
def read_snapshot(conn):
    """One read transaction: every SELECT inside sees the same committed state (WAL snapshot), so a
    view built from ~8 SELECTs never mixes two commits."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def is_lock_error(e: Exception) -> bool:
    return "locked" in str(e) or "busy" in str(e)


def open_index(path: str | Path):
    """Open an existing index for searching; a missing or foreign file gets an error that names the fix."""
    p = Path(path)
    if not p.exists():
        raise SearchCoreError(f"no index at {p}; build one with `autoresearch index VAULT --db {p}`")
    conn = None
    try:
        conn = connect(p)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        fp = get_meta(conn, "fingerprint") if version else None
    except Exception as e:
        if conn is not None:
            conn.close()
        if is_lock_error(e):
            raise SearchCoreError(f"{p} is locked by another process ({e}); the index is fine: wait for the "
                                  "writer to finish (or stop it) and try again") from None
        raise SearchCoreError(f"{p} is not an autoresearch index ({e}); rebuild with "
                              f"`autoresearch index VAULT --db {p} --full`") from None
    if not fp:
        conn.close()
        raise SearchCoreError(f"{p} is not a finished autoresearch index; rebuild with "
                              f"`autoresearch index VAULT --db {p} --full`")
    migrate(conn)
    return conn
