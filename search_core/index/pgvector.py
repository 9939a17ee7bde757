"""The dense channel on PostgreSQL + pgvector: an optional backend for a vault past one machine's memory.

Chosen per index, by a settings file beside it (`index.sqlite.pgvector.toml`, written by `sync`), not by the
SearchConfig: the DSN names a server, not a knob the tuner may turn; a config is hashed into the ledger and
applies to every index a verb opens (runs/active.toml), while a PostgreSQL table holds the vectors of one
index; and a DSN may carry a password, which must never reach a ledger row. An index without the file
searches with numpy over its memory-mapped matrix (search_core.index.layout), as it always did.

The SQLite index stays the source of truth. The table is derived from it, and the meta row beside it
(`autoresearch_dense_tables`) records the index generation and generation token (store.bump_generation) it
was written for: a search whose view sees another commit is refused with an error naming the fix (`sync`),
never answered from vectors of another commit. `sync` loads the table whole the first time (binary COPY,
then the HNSW index built once), and afterwards writes only the difference: rows whose chunk is gone or was
rewritten (chunk id, note, ord or the hash of the embedded text changed) are deleted, new chunks inserted.
An `index` update of a vault whose index has the file runs it after its commit (indexer.index_vault).

The difference comes from the index's own change record, not from reading every key on both sides (3.4 s at
525,000 chunks, loaded, for one changed note): the first sync installs into the SQLite index two SQLite
triggers and two small tables (CHANGE_LOG_SQL). Every row added to, removed from or rewritten in `chunks`
appends its chunk id to `pgvector_changes` (by any writer, in the writer's own transaction, so the record
commits or rolls back with the rows), and every commit's generation token is entered in `pgvector_commits`
with the last change number at that point. A sync finds the table's commit (its token) there and reads only the
chunk ids changed after it; applying a chunk id is idempotent (delete the row, insert the index's current
one if it still has a vector), so a change counted twice costs nothing. A table whose commit is not in the
record (synced before the record existed, or the index was rebuilt or restored from a copy) is compared key by
key once, as before.

The record is pruned by what every table synced from the index has read: each sync, once its PostgreSQL
transaction has committed (never before: a sync killed earlier must find every change again), enters in
`pgvector_readers` the change number its table now holds, and the changes at or below the lowest of them, with
the commits before it, are deleted. A table the index no longer feeds (its settings file now names another)
is forgotten; synced again, it is compared key by key once. The change numbers never restart
(AUTOINCREMENT), so a record pruned empty goes on numbering past every commit it entered.

Search: `exact` is a sequential scan ordered by inner product, the numpy product's ranking (ties to the
vault's order: note id in byte order, then ord, as the view's matrix rows are); `hnsw` reads pgvector's
HNSW index (m, ef_construction at build, ef_search per query: pgvector returns at most ef_search rows, so a
channel asking for more rows reads with ef_search raised to that many; `read_rows` past pgvector's 1000 reads
on with its iterative scan and keeps the best). Inner products (vector_ip_ops):
the embedders' vectors are unit length and the numpy channel ranks by the same product.
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_core import SearchCoreError
from search_core.files import atomic_write_text
from search_core.hashing import hash_json

SUFFIX = ".pgvector.toml"
META_TABLE = "autoresearch_dense_tables"
INSTALL = "pip install 'autoresearch[pgvector]'"
SEARCH_MODES = ("exact", "hnsw")
TABLE_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
COPY_BATCH_BYTES = 8 << 20
MAX_PARTITIONS = 64
MAX_READ_ROWS = 20_000          # an HNSW scan's rows a search may ask for (pgvector's default max_scan_tuples)
CHANGES = "pgvector_changes"
COMMITS = "pgvector_commits"
READERS = "pgvector_readers"
CHANGE_LOG_TRIGGERS = ("pgvector_chunk_added", "pgvector_chunk_removed", "pgvector_chunk_rewritten", "pgvector_commit")
# The index's change record (see the module's docstring). The meta value is the JSON text store.set_meta
# writes (a quoted token); INSERT OR REPLACE fires AFTER INSERT triggers, so every bump_generation is entered.
# A commit's change number is the last one ever given (sqlite_sequence), not the largest left: pruning may
# leave the record empty.
CHANGE_LOG_SQL = (
    f"CREATE TABLE IF NOT EXISTS {CHANGES} (seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id INTEGER NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {COMMITS} (token TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID",
    f"CREATE TABLE IF NOT EXISTS {READERS} (reader TEXT PRIMARY KEY, dsn TEXT NOT NULL, table_name TEXT NOT NULL, "
    f"seq INTEGER NOT NULL) WITHOUT ROWID",
    f"CREATE TRIGGER IF NOT EXISTS pgvector_chunk_added AFTER INSERT ON chunks BEGIN "
    f"INSERT INTO {CHANGES}(chunk_id) VALUES (NEW.id); END",
    f"CREATE TRIGGER IF NOT EXISTS pgvector_chunk_removed AFTER DELETE ON chunks BEGIN "
    f"INSERT INTO {CHANGES}(chunk_id) VALUES (OLD.id); END",
    f"CREATE TRIGGER IF NOT EXISTS pgvector_chunk_rewritten AFTER UPDATE OF id, note_id, ord, text_hash, has_vector "
    f"ON chunks BEGIN INSERT INTO {CHANGES}(chunk_id) VALUES (OLD.id); INSERT INTO {CHANGES}(chunk_id) "
    f"VALUES (NEW.id); END",
    f"CREATE TRIGGER IF NOT EXISTS pgvector_commit AFTER INSERT ON meta WHEN NEW.key = 'generation_token' BEGIN "
    f"INSERT OR REPLACE INTO {COMMITS}(token, seq) VALUES (NEW.value, "
    f"(SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{CHANGES}'), 0))); END",
)


@dataclass(frozen=True)
class PgvectorSettings:
    """Where an index's dense vectors live in PostgreSQL and how they are searched (the file beside the index).

    The HNSW defaults, measured on the hardest vectors we have, 525,000 of bench_pgvector's
    test-embedder windows (a query's top 10 within 0.007 of each other): the table in 4 hash partitions, one
    graph each, m 32, ef_construction 200 (a 6-minute build), ef_search 800: recall@10 0.985 against exact,
    p50 / p95 96 / 125 ms beside numpy's 25 / 31 in the same run (ef_search 600: 0.981, 1000: 0.986). One graph
    of all 525,000 stops short of 0.98 however it is built or read (m 32, ef_construction 512, a 49-minute build:
    0.961; reading 2,000 rows: 0.9745): its walk settles among thousands of near-ties, a quarter as many per
    partition. read_rows (a relaxed iterative scan past 1000, the exact best kept) is off by default. ef_search
    below the rows the channel asks for (depth x 4 = 200) changes nothing: the scan is raised to them. Real
    e5-small vectors reach 0.9975 with one graph at m 16, ef_construction 64, ef_search 200 on the 14,143 this
    machine has. BENCHMARKS.md, scale: pgvector."""
    dsn: str
    table: str
    search: str = "exact"          # "exact" (the numpy lists) or "hnsw"
    m: int = 32
    ef_construction: int = 200
    ef_search: int = 800
    read_rows: int = 0             # HNSW: rows the scan reads, the best of them kept (0: the rows the channel asks)
    partitions: int = 4            # the table hash-partitioned by chunk id, one HNSW graph each (fewer near-ties
                                   # per graph: 4 gave 0.985 where one graph stops at 0.9745, BENCHMARKS.md)

    def validate(self, where: str) -> "PgvectorSettings":
        if not isinstance(self.dsn, str) or not self.dsn.strip():
            raise SearchCoreError(f"{where}: `dsn` must name a PostgreSQL server, e.g. "
                                  "dsn = \"postgresql://user@host:5432/dbname\"")
        if not isinstance(self.table, str) or not TABLE_RE.match(self.table):
            raise SearchCoreError(f"{where}: `table` {self.table!r} is not a plain table name (lower-case letters, "
                                  "digits and _, at most 63, not starting with a digit)")
        if self.search not in SEARCH_MODES:
            raise SearchCoreError(f"{where}: `search` {self.search!r} is not one of {', '.join(SEARCH_MODES)}")
        for name, low, high in (("m", 2, 100), ("ef_construction", 4, 1000), ("ef_search", 1, 1000),
                                ("read_rows", 0, MAX_READ_ROWS), ("partitions", 1, MAX_PARTITIONS)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
                raise SearchCoreError(f"{where}: `{name}` {v!r} must be a whole number from {low} to {high} "
                                      "(pgvector's limits)")
        if self.ef_construction < 2 * self.m:
            raise SearchCoreError(f"{where}: `ef_construction` {self.ef_construction} must be at least twice "
                                  f"`m` ({2 * self.m}), as pgvector requires")
        return self

    def hnsw_params(self) -> dict | None:
        return {"m": self.m, "ef_construction": self.ef_construction} if self.search == "hnsw" else None


def settings_path(db: str | Path) -> Path:
    db = Path(db)
    return db.with_name(db.name + SUFFIX)


def default_table(db: str | Path) -> str:
    """One table per index file: its absolute path, hashed (two indexes may share a server)."""
    return "autoresearch_dense_" + hash_json(str(Path(db).resolve()), 12)


def read_settings(db: str | Path) -> PgvectorSettings | None:
    """The settings beside `db`, or None when the index searches with numpy (no file)."""
    path = settings_path(db)
    if not path.exists():
        return None
    import tomllib
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SearchCoreError(f"pgvector settings file {path} is not valid UTF-8 TOML ({e}): fix it, rewrite it "
                              f"with `autoresearch pgvector sync --db {db} --dsn DSN`, or delete it to search with "
                              "numpy") from None
    fields = {f.name for f in dataclasses.fields(PgvectorSettings)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise SearchCoreError(f"{path}: unknown key(s) {unknown}; the keys are {sorted(fields)}")
    missing = [k for k in ("dsn", "table") if k not in data]
    if missing:
        raise SearchCoreError(f"{path}: missing {missing}; write it with `autoresearch pgvector sync --db {db} "
                              "--dsn DSN` or delete it to search with numpy")
    return PgvectorSettings(**data).validate(str(path))


def write_settings(db: str | Path, settings: PgvectorSettings) -> Path:
    import tomli_w
    text = ("# The dense channel of this index searches PostgreSQL + pgvector (search_core/index/pgvector.py).\n"
            "# Delete this file to search with numpy again; `autoresearch pgvector sync` rewrites it.\n")
    return atomic_write_text(settings_path(db), text + tomli_w.dumps(dataclasses.asdict(settings)))


def shown_dsn(dsn: str) -> str:
    """The DSN as an error may print it: no password."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
        d = conninfo_to_dict(dsn)
        d.pop("password", None)
        return make_conninfo(**d)
    except Exception:
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", dsn)


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise SearchCoreError(f"the pgvector dense backend needs the PostgreSQL driver psycopg, which is not "
                              f"installed: {INSTALL}") from None
    return psycopg


def connect(dsn: str, where: str = ""):
    """A psycopg connection (autocommit: every unit of work is an explicit transaction), or a SearchCoreError
    naming the DSN tried and what to do."""
    try:
        psycopg = _psycopg()
    except SearchCoreError as e:
        raise SearchCoreError(f"{e} (to reach PostgreSQL at {shown_dsn(dsn)}{where})") from None
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SearchCoreError(f"cannot connect to PostgreSQL at {shown_dsn(dsn)}{where} ({detail}): start the "
                              "server, or fix `dsn`; the server needs the pgvector extension "
                              "(Debian: apt-get install postgresql-15-pgvector; .ci/postgres.sh builds it "
                              "where the release has no package)") from None
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as e:
            conn.close()
            raise SearchCoreError(f"PostgreSQL at {shown_dsn(dsn)} has no pgvector extension and it could not be "
                                  f"created ({str(e).strip().splitlines()[0]}): install pgvector on the server "
                                  "(Debian: postgresql-15-pgvector) and run `CREATE EXTENSION vector` as a "
                                  "superuser in that database") from None
    return conn


def _ident(name: str):
    from psycopg import sql
    return sql.Identifier(name)


def _sql(text: str, **names):
    from psycopg import sql
    return sql.SQL(text).format(**{k: _ident(v) for k, v in names.items()})


def _ensure_meta(pg) -> None:
    pg.execute(f"""CREATE TABLE IF NOT EXISTS {META_TABLE} (
        name text PRIMARY KEY, index_path text NOT NULL, generation bigint NOT NULL, token text NOT NULL,
        fingerprint text NOT NULL, dim integer NOT NULL, rows bigint NOT NULL, hnsw jsonb,
        synced_at timestamptz NOT NULL DEFAULT now())""")


def _table_meta(pg, table: str) -> dict | None:
    if pg.execute("SELECT to_regclass(%s)", (META_TABLE,)).fetchone()[0] is None:
        return None
    row = pg.execute(f"SELECT generation, token, fingerprint, dim, rows, hnsw, index_path FROM {META_TABLE} "
                     "WHERE name = %s", (table,)).fetchone()
    if row is None:
        return None
    return dict(zip(("generation", "token", "fingerprint", "dim", "rows", "hnsw", "index_path"), row))


# ---------------------------------------------------------------- sync

@dataclass(frozen=True)
class SyncReport:
    table: str
    mode: str                  # "full" or "incremental" or "current" (nothing to write)
    generation: int
    rows: int                  # rows in the table after the sync
    inserted: int
    deleted: int
    hnsw_built: bool
    seconds: float
    load_seconds: float        # the COPY of the rows
    index_seconds: float       # the HNSW build
    keys_read: int = 0         # chunk keys read from each side to find the difference (the changed ones only,
                               # when the table's commit is in the index's change record)
    pruned: int = 0            # changes dropped from the index's change record: read by every table synced from it


@dataclass(frozen=True)
class IndexState:
    """What one read snapshot of the index holds, for a sync: its commit, its fingerprint, and its chunk keys
    (chunk id, note id, ord, text hash): every one, or (`changed` not None) only those of the chunks changed
    since the table's commit, `changed` being every chunk id the change record names since then."""
    generation: int
    token: str
    fingerprint: str
    dim: int
    rows: list
    changed: list[int] | None
    vectors: int               # chunks with a vector in this commit
    layout: object


def install_change_log(db: Path) -> None:
    """The change record's tables and triggers in the index, with its current commit entered at change 0 (the
    record is empty as of that commit: a table synced to it reads only what changes after). Idempotent. A
    record made before it was pruned (numbered by the largest change left, which restarts once pruned empty)
    is moved into one numbered by AUTOINCREMENT, its changes and numbers kept."""
    from search_core.index.store import atomic, connect as sqlite_connect, get_meta
    conn = sqlite_connect(db)
    try:
        made = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (CHANGES,)).fetchone()
        numbered = made is not None and "AUTOINCREMENT" in made[0].upper()
        if numbered and conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                     (READERS,)).fetchone():
            return
        with atomic(conn):
            old = made is not None and not numbered
            if old:
                for trigger in CHANGE_LOG_TRIGGERS:
                    conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
                conn.execute(f"ALTER TABLE {CHANGES} RENAME TO {CHANGES}_unnumbered")
            for stmt in CHANGE_LOG_SQL:
                conn.execute(stmt)
            if old:
                conn.execute(f"INSERT INTO {CHANGES}(seq, chunk_id) SELECT seq, chunk_id FROM {CHANGES}_unnumbered")
                conn.execute(f"DROP TABLE {CHANGES}_unnumbered")
                high = conn.execute(f"SELECT max(coalesce((SELECT max(seq) FROM {CHANGES}), 0), "
                                    f"coalesce((SELECT max(seq) FROM {COMMITS}), 0))").fetchone()[0]
                conn.execute("DELETE FROM sqlite_sequence WHERE name = ?", (CHANGES,))
                conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (CHANGES, high))
            token = get_meta(conn, "generation_token")
            if token is not None:
                conn.execute(f"INSERT OR IGNORE INTO {COMMITS}(token, seq) VALUES (?, 0)", (json.dumps(token),))
    finally:
        conn.close()


def _reader(settings: PgvectorSettings) -> tuple[str, str]:
    """A synced table's name in the change record: its server (the DSN without a password) and table."""
    dsn = shown_dsn(settings.dsn)
    return hash_json([dsn, settings.table], 16), dsn


def record_read(db: Path, settings: PgvectorSettings, token: str,
                forget: PgvectorSettings | None = None) -> int:
    """After a sync's PostgreSQL transaction committed: the table of `settings` holds commit `token`; enter the
    change number it has read up to, forget the table of `forget` (the index no longer feeds it), and drop the
    changes every table still entered has read, with the commits before the lowest. Returns the changes dropped."""
    from search_core.index.store import atomic, connect as sqlite_connect
    conn = sqlite_connect(db)
    try:
        with atomic(conn):
            if forget is not None and _reader(forget) != _reader(settings):
                conn.execute(f"DELETE FROM {READERS} WHERE reader = ?", (_reader(forget)[0],))
            read = conn.execute(f"SELECT seq FROM {COMMITS} WHERE token = ?", (json.dumps(token),)).fetchone()
            if read is None:
                return 0              # the index's commit is not in its record (restored from a copy): prune nothing
            key, dsn = _reader(settings)
            conn.execute(f"INSERT INTO {READERS}(reader, dsn, table_name, seq) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT(reader) DO UPDATE SET seq = excluded.seq", (key, dsn, settings.table, read[0]))
            low = conn.execute(f"SELECT min(seq) FROM {READERS}").fetchone()[0]
            pruned = conn.execute(f"DELETE FROM {CHANGES} WHERE seq <= ?", (low,)).rowcount
            conn.execute(f"DELETE FROM {COMMITS} WHERE seq < ?", (low,))
            return pruned
    finally:
        conn.close()


def _index_state(db: Path, since_token: str | None = None) -> IndexState:
    """The index's commit as one read snapshot sees it. `since_token`: the commit a table holds; when the
    change record knows it, only the keys of the chunks changed since are read."""
    from search_core.index.layout import read_layout
    from search_core.index.store import get_meta, open_index, read_snapshot
    conn = open_index(db)
    try:
        with read_snapshot(conn):
            generation = int(get_meta(conn, "generation", 0))
            token = get_meta(conn, "generation_token")
            fp = get_meta(conn, "fingerprint")
            changed = None
            if since_token is not None and conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = ?", (COMMITS,)).fetchone():
                seq = conn.execute(f"SELECT seq FROM {COMMITS} WHERE token = ?", (json.dumps(since_token),)).fetchone()
                if seq is not None:
                    changed = [r[0] for r in conn.execute(
                        f"SELECT DISTINCT chunk_id FROM {CHANGES} WHERE seq > ? ORDER BY chunk_id", seq)]
            if changed is None:
                rows = conn.execute("SELECT id, note_id, ord, text_hash FROM chunks WHERE has_vector ORDER BY id").fetchall()
                vectors = len(rows)
            else:
                rows = []
                for i in range(0, len(changed), 500):
                    part = changed[i:i + 500]
                    rows += conn.execute("SELECT id, note_id, ord, text_hash FROM chunks WHERE has_vector AND id IN "
                                         f"({','.join('?' * len(part))}) ORDER BY id", part).fetchall()
                vectors = None
            layout, _ = read_layout(conn, db)
    finally:
        conn.close()
    if token is None:
        raise SearchCoreError(f"{db} records no generation token (written by an older autoresearch); rebuild it "
                              f"with `autoresearch index VAULT --db {db} --full`, then sync")
    dim = int((fp.get("embedder") or {}).get("dim") or (layout.matrix.shape[1] if layout.matrix.size else 0))
    if vectors is None:
        vectors = int((layout.vec_ids >= 0).sum())     # one live row per chunk vector (-1: dead, layout.py)
    return IndexState(generation, token, hash_json(fp, 16), dim, rows, changed, vectors, layout)


def hnsw_index_name(table: str) -> str:
    return table[:58] + "_hnsw"


def create_table(pg, table: str, dim: int, partitions: int = 1) -> None:
    """The table of one index's vectors, new (inside the caller's transaction). note_id in byte order (COLLATE
    "C"), as SQLite and Python compare strings: exact search breaks ties in the vault's order with it. With
    `partitions` > 1, hash-partitioned by chunk id: an index on it is one per partition, and a query through the
    table merges the partitions' scans (Merge Append)."""
    pg.execute(_sql("DROP TABLE IF EXISTS {t}", t=table))
    pg.execute(_sql("CREATE TABLE {t} (chunk_id bigint PRIMARY KEY, note_id text COLLATE \"C\" NOT NULL, "
                    "ord integer NOT NULL, text_hash text NOT NULL, embedding vector(%d) NOT NULL)" % dim
                    + (" PARTITION BY HASH (chunk_id)" if partitions > 1 else ""), t=table))
    for i in range(partitions if partitions > 1 else 0):
        pg.execute(_sql("CREATE TABLE {p} PARTITION OF {t} FOR VALUES WITH (MODULUS %d, REMAINDER %d)"
                        % (partitions, i), p=f"{table[:56]}_p{i}", t=table))


def table_partitions(pg, table: str) -> int:
    """How many partitions the table has (1: not partitioned)."""
    n = pg.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass(%s)", (table,)).fetchone()[0]
    return max(int(n), 1)


def create_hnsw(pg, table: str, m: int, ef_construction: int) -> None:
    pg.execute(_sql("CREATE INDEX {i} ON {t} USING hnsw (embedding vector_ip_ops) WITH (m = %d, ef_construction = %d)"
                    % (m, ef_construction), i=hnsw_index_name(table), t=table))


def write_meta(pg, table: str, db: Path, generation: int, token: str, fingerprint: str, dim: int, rows: int,
               hnsw: dict | None) -> None:
    """The table's row in the meta table: which commit of which index it holds."""
    from psycopg.types.json import Jsonb
    _ensure_meta(pg)
    pg.execute(f"INSERT INTO {META_TABLE} (name, index_path, generation, token, fingerprint, dim, rows, hnsw) "
               "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET "
               "index_path = EXCLUDED.index_path, generation = EXCLUDED.generation, token = EXCLUDED.token, "
               "fingerprint = EXCLUDED.fingerprint, dim = EXCLUDED.dim, rows = EXCLUDED.rows, "
               "hnsw = EXCLUDED.hnsw, synced_at = now()",
               (table, str(Path(db).resolve()), generation, token, fingerprint, dim, rows, Jsonb(hnsw) if hnsw else None))


def copy_rows(cur, table: str, rows, layout) -> int:
    """Binary COPY of (chunk_id, note_id, ord, text_hash, embedding) for `rows`; the vectors from the layout."""
    row_of = np.full(int(layout.vec_ids.max()) + 1 if len(layout.vec_ids) else 0, -1, np.int64)
    live = np.flatnonzero(layout.vec_ids >= 0)             # -1: a dead row (layout.py)
    row_of[layout.vec_ids[live]] = live
    dim = layout.matrix.shape[1] if layout.matrix.ndim == 2 else 0
    head_vec = struct.pack(">ihh", 4 + 4 * dim, dim, 0)
    n = 0
    with cur.copy(_sql("COPY {t} (chunk_id, note_id, ord, text_hash, embedding) FROM STDIN (FORMAT BINARY)",
                       t=table)) as copy:
        buf = [b"PGCOPY\n\xff\r\n\0" + struct.pack(">ii", 0, 0)]
        size = 0
        for cid, nid, ord_, th in rows:
            r = row_of[cid] if cid < len(row_of) else -1
            if r < 0:
                raise SearchCoreError(f"chunk {cid} is marked as having a vector but the index holds none; "
                                      "run `autoresearch check` on the index")
            nb, tb = nid.encode("utf-8"), th.encode("utf-8")
            rec = b"".join((struct.pack(">hiqi", 5, 8, cid, len(nb)), nb, struct.pack(">iii", 4, ord_, len(tb)), tb,
                            head_vec, layout.matrix[r].astype(">f4").tobytes()))
            buf.append(rec)
            size += len(rec)
            n += 1
            if size >= COPY_BATCH_BYTES:
                copy.write(b"".join(buf))
                buf, size = [], 0
        buf.append(struct.pack(">h", -1))
        copy.write(b"".join(buf))
    return n


def sync(db: str | Path, settings: PgvectorSettings | None = None, *, full: bool = False) -> SyncReport:
    """Make the PostgreSQL table of `db` hold the vectors of its current commit. `settings`: write them beside
    the index once the table is current (None: the file already there). The table is loaded whole when it
    does not exist, when `full`, or when it holds another embedder's or another build's vectors; otherwise only
    the rows that changed are written, found through the index's change record when it knows the table's
    commit. One PostgreSQL transaction: a sync that fails, or is killed, leaves the table as it was."""
    db = Path(db)
    where = settings_path(db)
    if settings is None:
        settings = read_settings(db)
        if settings is None:
            raise SearchCoreError(f"{db} has no pgvector settings ({where}); give a DSN: "
                                  f"`autoresearch pgvector sync --db {db} --dsn postgresql://user@host/dbname`")
        previous = settings
    else:
        settings.validate("pgvector settings")
        try:
            previous = read_settings(db)
        except SearchCoreError:
            previous = None                  # a broken file: rewritten below with the settings given
    t0 = time.perf_counter()
    pg = connect(settings.dsn, f" (the pgvector settings of {db})")
    # before the snapshot below: every change committed after it is in the record
    install_change_log(db)
    load_s = index_s = 0.0
    hnsw_built = False
    try:
        t = settings.table
        with pg.transaction():
            _ensure_meta(pg)
            # one sync of a table at a time (two `index` runs of one vault are already serialised by its lock;
            # this covers two indexes given the same table name)
            pg.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (t,))
            meta = _table_meta(pg, t)
            exists = pg.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0] is not None
            state = _index_state(db, None if full or not exists or meta is None else meta["token"])
            generation, token, fp, dim = state.generation, state.token, state.fingerprint, state.dim
            if (not full and exists and meta is not None and (meta["generation"], meta["token"]) == (generation, token)
                    and meta["hnsw"] == settings.hnsw_params() and table_partitions(pg, t) == settings.partitions):
                # the table holds this commit already (an `index` run that changed nothing): no diff to read.
                # An earlier transaction committed it, so the record may be pruned up to it now.
                pruned = _settings_written(db, settings, previous, token)
                return SyncReport(t, "current", generation, int(meta["rows"]), 0, 0, False,
                                  round(time.perf_counter() - t0, 3), 0.0, 0.0, pruned=pruned)
            whole = (full or not exists or meta is None or meta["dim"] != dim or meta["fingerprint"] != fp
                     or table_partitions(pg, t) != settings.partitions)
            if whole and state.changed is not None:
                state = _index_state(db)                 # every row, for the load (of the commit it then sees)
                generation, token, fp, dim = state.generation, state.token, state.fingerprint, state.dim
            rows = state.rows
            cur = pg.cursor()
            hnsw = settings.hnsw_params()
            index_name = hnsw_index_name(t)
            inserted = deleted = 0
            keys_read = 0
            if whole:
                create_table(pg, t, dim, settings.partitions)
                t1 = time.perf_counter()
                inserted = copy_rows(cur, t, rows, layout=state.layout)
                load_s = time.perf_counter() - t1
                have_index = False
            else:
                if state.changed is not None:
                    # the change record's chunk ids: the table's rows of them go, the index's current ones come
                    gone, new = state.changed, rows
                    keys_read = len(gone)
                    if gone:
                        deleted = pg.execute(_sql("DELETE FROM {t} WHERE chunk_id = ANY(%s)", t=t), (gone,)).rowcount
                else:
                    have = {r[0]: r[1:] for r in pg.execute(_sql("SELECT chunk_id, note_id, ord, text_hash FROM {t}", t=t))}
                    want = {r[0]: tuple(r[1:]) for r in rows}
                    gone = [cid for cid, v in have.items() if want.get(cid) != tuple(v)]
                    new = [r for r in rows if have.get(r[0]) is None or tuple(have[r[0]]) != tuple(r[1:])]
                    keys_read = len(have)
                    if gone:
                        pg.execute(_sql("DELETE FROM {t} WHERE chunk_id = ANY(%s)", t=t), (gone,))
                    deleted = len(gone)
                t1 = time.perf_counter()
                inserted = copy_rows(cur, t, new, layout=state.layout) if new else 0
                load_s = time.perf_counter() - t1
                have_index = pg.execute("SELECT to_regclass(%s)", (index_name,)).fetchone()[0] is not None
                if have_index and (hnsw is None or (meta or {}).get("hnsw") != hnsw):
                    pg.execute(_sql("DROP INDEX {i}", i=index_name))
                    have_index = False
            if hnsw is not None and not have_index:
                t1 = time.perf_counter()
                create_hnsw(pg, t, hnsw["m"], hnsw["ef_construction"])
                index_s = time.perf_counter() - t1
                hnsw_built = True
            write_meta(pg, t, db, generation, token, fp, dim, state.vectors, hnsw)
        if not whole and not inserted and not deleted and not hnsw_built:
            mode = "current"
        else:
            mode = "full" if whole else "incremental"
        if whole or hnsw_built or inserted + deleted > 0.1 * max(state.vectors, 1):
            pg.execute(_sql("ANALYZE {t}", t=t))        # the planner's counts, when they moved by a tenth
    finally:
        pg.close()
    # only now, the table's transaction committed: a sync killed before this point has pruned nothing
    pruned = _settings_written(db, settings, previous, token)
    return SyncReport(t, mode, generation, state.vectors, inserted, deleted, hnsw_built,
                      round(time.perf_counter() - t0, 3), round(load_s, 3), round(index_s, 3), keys_read, pruned)


def _settings_written(db: Path, settings: PgvectorSettings, previous: PgvectorSettings | None, token: str) -> int:
    """After the table holds commit `token`: the settings file names it, the change record knows what it has
    read (and forgets the table the file named before, when another). Returns the changes pruned."""
    if previous != settings:
        write_settings(db, settings)
    return record_read(db, settings, token, forget=previous)


# ---------------------------------------------------------------- search

class StaleTableError(SearchCoreError):
    """The PostgreSQL table holds the vectors of another commit of the index than the one searched."""


class PgvectorDense:
    """The dense channel's scan, answered by PostgreSQL: `search(qvec, n)` -> (chunk id, score) best first, in the
    order the numpy channel gives (score, then vault order), for the commit (generation, token) of one view."""

    def __init__(self, db: Path, settings: PgvectorSettings, generation: int, token: str | None):
        self.db, self.settings = Path(db), settings
        self.generation, self.token = int(generation), token
        self._pg = None
        self._lock = threading.Lock()     # one connection: the query's and a sub-question's searches take turns

    def _conn(self):
        if self._pg is None or self._pg.closed:
            self._pg = connect(self.settings.dsn, f" (the pgvector settings of {self.db}, {settings_path(self.db)})")
            weakref.finalize(self, self._pg.close)      # a view dropped without close() lets its connection go
        return self._pg

    def cost_key(self) -> dict:
        """What decides this backend's cost per search (a cost calibration's key): the mode and graph settings,
        never the DSN (it may carry a password) or the table."""
        s = self.settings
        return {"name": "pgvector", "search": s.search} | (
            {"m": s.m, "ef_construction": s.ef_construction, "ef_search": s.ef_search, "read_rows": s.read_rows}
            if s.search == "hnsw" else {}) | ({"partitions": s.partitions} if s.partitions > 1 else {})

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
            self._pg = None

    def _stale(self, meta: dict | None) -> StaleTableError:
        fix = f"`autoresearch pgvector sync --db {self.db}`"
        t, where = self.settings.table, shown_dsn(self.settings.dsn)
        if meta is None:
            return StaleTableError(f"the pgvector table {t} at {where} does not exist or was never synced from "
                                   f"{self.db}: run {fix} (or delete {settings_path(self.db)} to search with numpy)")
        if meta["generation"] != self.generation:
            return StaleTableError(f"the pgvector table {t} at {where} holds generation {meta['generation']} of "
                                   f"{meta['index_path']}, this search reads generation {self.generation} of "
                                   f"{self.db}: the table is stale; run {fix}")
        return StaleTableError(f"the pgvector table {t} at {where} holds generation {meta['generation']} of another "
                               f"build of {meta['index_path']} (rebuilt since, or another index): the table is stale; "
                               f"run {fix}")

    def check(self) -> None:
        """Raise StaleTableError unless the table holds this view's commit."""
        with self._lock:
            pg = self._conn()
            meta = _table_meta(pg, self.settings.table)
            if meta is None or (meta["generation"], meta["token"]) != (self.generation, self.token):
                raise self._stale(meta)

    def search(self, qvec: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The n closest chunks (with every chunk tied with the n-th, as numpy's cut keeps them, for exact)."""
        q = "[" + ",".join(f"{x:.9g}" for x in np.asarray(qvec, np.float32).tolist()) + "]"
        t = self.settings.table
        with self._lock:
            pg = self._conn()
            psycopg = _psycopg()
            try:
                with pg.transaction():
                    pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    meta = _table_meta(pg, t)
                    if meta is None or (meta["generation"], meta["token"]) != (self.generation, self.token):
                        raise self._stale(meta)
                    if self.settings.search == "exact":
                        pg.execute("SET LOCAL enable_indexscan = off")
                        rows = pg.execute(_sql(
                            "SELECT chunk_id, d FROM (SELECT chunk_id, note_id, ord, embedding <#> %s::vector AS d "
                            "FROM {t} ORDER BY d FETCH FIRST %s ROWS WITH TIES) s ORDER BY d, note_id, ord", t=t),
                            (q, n)).fetchall()
                    else:
                        # an HNSW scan returns at most ef_search rows: read at least the n asked for; past
                        # pgvector's 1000, an iterative scan reads on (pgvector 0.8), out of order, sorted here
                        k = max(n, self.settings.read_rows)
                        pg.execute("SELECT set_config('hnsw.ef_search', %s, true)",
                                   (str(min(max(self.settings.ef_search, k), 1000)),))
                        if k > 1000:
                            pg.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                            pg.execute("SELECT set_config('hnsw.max_scan_tuples', %s, true)", (str(max(20_000, 4 * k)),))
                        got = pg.execute(_sql("SELECT chunk_id, note_id, ord, embedding <#> %s::vector AS d FROM {t} "
                                              "ORDER BY embedding <#> %s::vector LIMIT %s", t=t), (q, q, k)).fetchall()
                        got.sort(key=lambda r: (r[3], r[1].encode("utf-8"), r[2]))
                        rows = [(r[0], r[3]) for r in got[:n]]
            except psycopg.OperationalError as e:
                self.close()
                raise SearchCoreError(f"PostgreSQL at {shown_dsn(self.settings.dsn)} failed during a dense search "
                                      f"({str(e).strip().splitlines()[0] if str(e).strip() else e}): is the server "
                                      f"up? (the pgvector settings of {self.db})") from None
        return [(int(cid), -float(d)) for cid, d in rows]


def backend_for(db: str | Path | None, generation: int, token: str | None) -> PgvectorDense | None:
    """The pgvector dense backend of a view of `db` at (generation, token), or None when the index has no
    settings file (numpy). The driver must be installed now; the server and the table's commit are checked by
    every search, not here: a server's view is rebuilt right after an `index` commit, before that run's sync
    of the table, and a view must be buildable then (its searches are refused until the sync ends)."""
    if db is None:
        return None
    settings = read_settings(db)
    if settings is None:
        return None
    try:
        _psycopg()
    except SearchCoreError as e:
        raise SearchCoreError(f"{e} (the index {db} searches its dense channel on PostgreSQL at "
                              f"{shown_dsn(settings.dsn)}, {settings_path(db)}; delete that file to search with "
                              "numpy)") from None
    return PgvectorDense(Path(db), settings, generation, token)


def sync_after_update(db: str | Path) -> str | None:
    """After an `index` run committed to `db`: bring its pgvector table up to date if it has one. Returns a
    warning for the index report when the sync failed (the index is committed either way; searches through the
    table are refused until a sync succeeds), else None."""
    if not settings_path(db).exists():
        return None
    try:
        sync(db)
    except SearchCoreError as e:
        return (f"the pgvector table was not updated ({e}); searches of {db} are refused until "
                f"`autoresearch pgvector sync --db {db}` succeeds")
    return None
