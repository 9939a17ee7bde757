"""Is an index file damaged? SQLite's own checks, FTS5's integrity-check, every vector row read, and a
sample of stored vectors compared with fresh embeddings of the chunk text they were made from.

Why all four: 64 KB of random bytes inside the vector blobs passes `PRAGMA quick_check` (blob content has
no checksum) and `stats`, yet `search` then fails reading the vectors; 512-byte writes inside a vector
change its values with no error anywhere, which only re-embedding shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_core import SearchCoreError
from search_core.index.store import connect, sqlite_file_problem

# a stored vector and a fresh embedding of the same text agree to >= 0.9999 cosine on this machine
# (the same model, the same bytes); 0.99 leaves room for a different CPU's float order, and a damaged
# vector lands far below it (random bytes give NaN or a cosine near 0).
VECTOR_COSINE_MIN = 0.99
DEFAULT_SAMPLE = 16


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class CheckReport:
    db: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def message(self) -> str:
        if self.ok:
            return f"{self.db}: ok ({'; '.join(f'{c.name}: {c.detail}' for c in self.checks)})"
        bad = [c for c in self.checks if not c.ok]
        return (f"index {self.db} is damaged: {'; '.join(f'{c.name}: {c.detail}' for c in bad)}. "
                f"Rebuild it: `autoresearch index VAULT --db {self.db} --full` (the vault is the source; "
                "nothing in the index is lost)")

    def as_dict(self) -> dict:
        return {"db": self.db, "ok": self.ok, "checks": [c.__dict__ for c in self.checks]}


def _db_error():
    import sqlean
    return sqlean.DatabaseError


def _pragma(conn, pragma: str) -> Check:
    try:
        rows = [r[0] for r in conn.execute(f"PRAGMA {pragma}")]
    except _db_error() as e:
        return Check(pragma, False, str(e))
    if rows == ["ok"]:
        return Check(pragma, True, "ok")
    lines = [l for r in rows for l in str(r).splitlines() if l.strip() and not l.startswith("***")]
    return Check(pragma, False, "; ".join(lines[:3]) + (f" (and {len(lines) - 3} more)" if len(lines) > 3 else ""))


def _fts(conn) -> Check:
    try:
        conn.execute("BEGIN")
        try:
            conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        finally:
            conn.execute("ROLLBACK")
    except _db_error() as e:
        return Check("fts5 integrity-check", False, str(e))
    return Check("fts5 integrity-check", True, "ok")


def _vectors_readable(conn) -> Check:
    """Read every row of both vec0 tables; count them against the chunks that say they have one."""
    try:
        want = conn.execute("SELECT count(*) FROM chunks WHERE has_vector").fetchone()[0]
        n, bad = 0, 0
        for (blob,) in conn.execute("SELECT embedding FROM chunk_vec"):
            n += 1
            v = np.frombuffer(blob, dtype=np.float32)
            bad += int(not np.isfinite(v).all())
        n_ent = sum(1 for _ in conn.execute("SELECT embedding FROM entity_vec"))
        want_ent = conn.execute("SELECT count(*) FROM entities").fetchone()[0]
    except _db_error() as e:
        return Check("vectors readable", False, str(e))
    if n != want or n_ent != want_ent:
        return Check("vectors readable", False, f"{n} chunk vectors for {want} chunks that have one, "
                                                f"{n_ent} entity vectors for {want_ent} entities")
    if bad:
        return Check("vectors readable", False, f"{bad} of {n} chunk vectors hold NaN or infinity")
    return Check("vectors readable", True, f"{n} chunk and {n_ent} entity vectors")


def _vectors_match_text(conn, sample: int) -> Check:
    """Re-embed `sample` chunks spread evenly over the index and compare with the stored vectors; the
    chunk text is also checked against the hash its vector was made from."""
    from search_core.index.embed_cache import text_hash
    from search_core.models import get_embedder
    try:
        fp = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()[0])
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE has_vector ORDER BY id")]
        pick = [ids[int(i)] for i in np.linspace(0, len(ids) - 1, min(sample, len(ids)))] if ids else []
        rows = []
        for cid in pick:
            note, context, text, th = conn.execute(
                "SELECT note_id, context, text, text_hash FROM chunks WHERE id = ?", (cid,)).fetchone()
            blob = conn.execute("SELECT embedding FROM chunk_vec WHERE rowid = ?", (cid,)).fetchone()
            rows.append((cid, note, f"{context}\n{text}" if text else context, th, blob[0] if blob else None))
    except (_db_error(), TypeError, ValueError) as e:
        return Check("vectors match their text", False, f"cannot read chunks: {e}")
    changed = [f"chunk {cid} of {note}: text does not match the hash its vector was made from"
               for cid, note, t, th, _ in rows if text_hash(t) != th]
    if changed:
        return Check("vectors match their text", False, "; ".join(changed[:3]))
    emb = get_embedder(fp["embedder"]["name"])
    if emb.fingerprint() != fp["embedder"]:
        return Check("vectors match their text", True, "skipped: this embedder build differs from the index's")
    fresh = emb.embed([t for _, _, t, _, _ in rows]) if rows else np.zeros((0, emb.dim), np.float32)
    worst = []
    for (cid, note, _, _, blob), f in zip(rows, fresh):
        stored = np.frombuffer(blob, dtype=np.float32) if blob is not None else np.zeros(emb.dim, np.float32)
        cos = float(stored @ f / max(np.linalg.norm(stored) * np.linalg.norm(f), 1e-12)) if stored.size == f.size else -1.0
        if not cos >= VECTOR_COSINE_MIN:             # NaN fails too
            worst.append(f"chunk {cid} of {note}: stored vector vs a fresh embedding, cosine {cos:.3f}")
    if worst:
        return Check("vectors match their text", False, f"{len(worst)} of {len(rows)} sampled: " + "; ".join(worst[:3]))
    return Check("vectors match their text", True, f"{len(rows)} sampled, cosine >= {VECTOR_COSINE_MIN}")


# The whole-file quick_check reads every page: 0.8-5.7 s on johngrib's 110 MB, more than everything else a
# one-note update does. Before an update it runs when the last one is older than this; in between, the
# update checks what it must (check_before_update), and `autoresearch check` runs the full check any time.
WHOLE_FILE_CHECK_EVERY_S = 24 * 3600
CHECKED_AT = "checked_at"            # meta: time.time() of the last whole-file check that passed
EXPECTED_TABLES = ("meta", "notes", "chunks", "chunks_fts", "links", "belongs_to", "entities", "cooccurrence",
                   "communities", "chunk_vec", "entity_vec")


def _schema(conn) -> Check:
    from search_core.index.store import SCHEMA_VERSION
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        fp = conn.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        json.loads(fp[0]) if fp else None
    except (_db_error(), ValueError) as e:
        return Check("schema", False, f"cannot read the schema: {e}")
    missing = [t for t in EXPECTED_TABLES if t not in names]
    if 1 <= version < SCHEMA_VERSION and not missing and fp:
        # an older schema is not damage: the next open for writing migrates it (store.migrate)
        return Check("schema", True, f"v{version} (migrated to v{SCHEMA_VERSION} when next opened for writing)")
    if version != SCHEMA_VERSION or missing or not fp:
        return Check("schema", False, f"schema v{version} (want v{SCHEMA_VERSION})" +
                     (f", missing tables {', '.join(missing)}" if missing else "") + ("" if fp else ", no fingerprint"))
    return Check("schema", True, f"v{version}")


def _vector_blobs(conn) -> Check:
    """Every vector slot of both vec0 tables, read as the raw blobs sqlite-vec keeps them in (one row per
    1,024 vectors): the reads walk every overflow chain, which is where damage hides from SQLite's own
    checks, at a tenth of the cost of reading the vectors row by row (johngrib: 9.4 MB, 20-90 ms)."""
    try:
        out = []
        for table in ("chunk_vec", "entity_vec"):
            bad = n = 0
            for (blob,) in conn.execute(f"SELECT vectors FROM {table}_vector_chunks00"):
                v = np.frombuffer(blob, dtype=np.float32)
                n += 1
                bad += int(not np.isfinite(v).all())
            if bad:
                return Check("vector pages", False, f"{bad} of {n} {table} blocks hold NaN or infinity")
            rows = conn.execute(f"SELECT count(*) FROM {table}_rowids").fetchone()[0]
            out.append(rows)
        want = conn.execute("SELECT count(*) FROM chunks WHERE has_vector").fetchone()[0]
        want_ent = conn.execute("SELECT count(*) FROM entities").fetchone()[0]
    except _db_error() as e:
        return Check("vector pages", False, str(e))
    if out != [want, want_ent]:
        return Check("vector pages", False, f"{out[0]} chunk vectors for {want} chunks that have one, "
                                            f"{out[1]} entity vectors for {want_ent} entities")
    return Check("vector pages", True, f"{out[0]} chunk and {out[1]} entity vectors")


def _open_for_check(p: Path):
    """(connection, None), or (None, the report that says why the file cannot be checked)."""
    problem = sqlite_file_problem(p)
    if problem is not None:
        why = f"not a SQLite file ({problem}: the header is damaged or this is another kind of file)"
        return None, CheckReport(str(p), (Check("sqlite header", False, why),))
    try:
        return connect(p), None
    except _db_error() as e:
        return None, CheckReport(str(p), (Check("open", False, str(e)),))


def check_before_update(db: str | Path, *, now: float | None = None) -> CheckReport:
    """What an incremental update checks before it writes: the header, the schema and every vector page,
    plus the whole-file check (check_index quick) when the last one passed more than a day ago. The pages
    the update itself reads (the changed notes' rows) are checked by SQLite as it reads them: an error
    there stops the update (indexer.py) with the same message."""
    import time
    from search_core.index.store import get_meta, set_meta
    p = Path(db)
    conn, failed = _open_for_check(p)
    if failed is not None:
        return failed
    now = time.time() if now is None else now
    try:
        checks = [_schema(conn)]
        if checks[0].ok:
            checked = get_meta(conn, CHECKED_AT, 0)
            if not isinstance(checked, (int, float)) or now - checked > WHOLE_FILE_CHECK_EVERY_S:
                checks.append(_pragma(conn, "quick_check"))
                if checks[-1].ok:
                    checks.append(_vectors_readable(conn))
                if all(c.ok for c in checks):
                    conn.execute("BEGIN IMMEDIATE")
                    set_meta(conn, CHECKED_AT, now)
                    conn.execute("COMMIT")
            else:
                checks.append(_vector_blobs(conn))
        return CheckReport(str(p), tuple(checks))
    finally:
        conn.close()


def check_index(db: str | Path, *, quick: bool = False, sample: int = DEFAULT_SAMPLE) -> CheckReport:
    """The full check (integrity_check, FTS5, every vector read, `sample` vectors re-embedded), or the quick
    one (quick_check and every vector read; no model). An incremental write runs check_before_update."""
    p = Path(db)
    if not p.exists():
        raise SearchCoreError(f"no index at {p}; build one with `autoresearch index VAULT --db {p}`")
    conn, failed = _open_for_check(p)
    if failed is not None:
        return failed
    try:
        checks = [_pragma(conn, "quick_check" if quick else "integrity_check")]
        if not quick:
            checks.append(_fts(conn))
        checks.append(_vectors_readable(conn))
        if not quick and sample > 0 and all(c.ok for c in checks):
            checks.append(_vectors_match_text(conn, sample))
        return CheckReport(str(p), tuple(checks))
    finally:
        conn.close()
