"""Build and update an index: incremental by content hash, full rebuilds swapped in atomically.

Phases: list + diff the vault (cheap), parse + chunk what changed, embed what the cache lacks
(committed per batch: Ctrl-C keeps it), then write everything in ONE transaction (or, for a full
build, into a new file that replaces the old one with os.replace). The old index stays usable until then.
This module decides what to write and owns the lock, the fingerprint and the transaction; the writes
themselves (notes, chunks, vectors, graph tables) are in write.py.
"""

from __future__ import annotations

import os
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from search_core import SearchCoreError
from search_core.index import ngram_postings, pair_table
from search_core.index.layout import current_layout, refresh_layout
from search_core.index import short_tokens
from search_core.index import term_df
from search_core.index import word_df
from search_core.index.check import CHECKED_AT
from search_core.index.term_df import DB_ERRORS
from search_core.hashing import known_file_hashes, remember_file_hashes
from search_core.config import ChunkConfig
from search_core.files import LockBusy, PidLock
from search_core.index.embed_cache import EmbeddingCache
from search_core.index.write import (chunk_rows, communities_state, delete_chunks, delete_notes, graph_before,
                                    insert_prepared, kept_chunks,
                                    next_chunk_id, prepare, rebuild_graph, refresh_communities, refresh_nav,
                                    update_graph,
                                    update_short_tokens, write_notes)
from search_core.models import get_embedder
from search_core.paths import embed_cache_file
from search_core.ingest.note import Note
from search_core.ingest.parse import NAV_RULE, TEXT_RULE
from search_core.index.store import atomic, bump_generation, connect, ensure_vec_tables, get_meta, migrate, set_meta
from search_core.ingest.vault import Skipped, VaultFile, is_beir, is_korquad, list_vault, read_beir, read_korquad, read_note


@dataclass
class IndexReport:
    db: str
    mode: str                    # full | incremental
    notes: int = 0
    added: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    chunks: int = 0
    embedded: int = 0            # vectors computed now (not from the cache)
    vectors: int = 0             # chunks in the index with a vector (the dense channel searches these)
    dense_per_note: int = 0      # vectors per note the chunking allows (0 = every chunk)
    cache: str = ""              # the embedding cache used
    skipped: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    seconds: float = 0.0
    communities: dict | None = None   # current, or stale since N notes' graph changed (write.py)

    def vector_note(self) -> str:
        """How many chunks get a vector and why: every chunk stays in the keyword index, but only
        dense_per_note chunks of a note are embedded (the first half and the rest spread over the note)."""
        if self.vectors >= self.chunks:
            return "every chunk has a vector"
        return (f"{self.vectors} of {self.chunks} chunks have a vector: at most {self.dense_per_note} per note "
                "(dense_per_note; every chunk stays in the keyword index; --full --dense-per-note 0 embeds all)")

    def as_dict(self):
        d = dict(self.__dict__)
        d["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        return d


FILE_HASHES = "file_hashes"   # meta: hashing.known_file_hashes() of the writer (the model weights' hash)
NAV_RULE_KEY = "nav_rule"     # meta: the parse.NAV_RULE the notes' index-page flags were computed under
TEXT_RULE_KEY = "text_rule"   # meta: the parse.TEXT_RULE the notes' sections and chunks were cut under


def index_fingerprint(embedder, chunk_cfg: ChunkConfig) -> dict:
    return {"embedder": embedder.fingerprint(), "chunking": chunk_cfg.as_dict()}


@contextmanager
def index_lock(db: Path):
    """One writer per index. The lock file is removed when the run ends (however it ends); one left by a
    killed run holds no lock (the kernel dropped it) and is taken over and removed by the next run, which
    also removes the .building-PID files of a killed `--full` (we hold the lock: no build can be running)."""
    lock = PidLock(db.with_name(db.name + ".lock"), remove_on_release=True)
    try:
        lock.acquire()
    except LockBusy as e:
        raise SearchCoreError(f"another `autoresearch index` is already writing {db} (pid "
                              f"{e.holder if e.holder is not None else 'unknown'}); wait for it to finish, "
                              "then run this again") from None
    try:
        _remove_stale_builds(db)
        yield
    finally:
        lock.release()


def _remove_stale_builds(db: Path) -> None:
    for p in db.parent.glob(f"{db.name}.building-*"):
        p.unlink(missing_ok=True)


def fingerprint_mismatch_message(db, have: dict, want: dict) -> str:
    """Name what actually differs (embedder, its weights, or chunking) and a command that works."""
    from search_core.models import check_model_name
    h, w = have.get("embedder", {}), want.get("embedder", {})
    hn, wn = h.get("name"), w.get("name")
    keep = f"--embedder {hn}{ChunkConfig.flags_for(have.get('chunking', {}))}"
    if hn != wn:
        try:
            check_model_name("embedder", wn)
        except SearchCoreError as e:
            return f"{e}. Index {db} was built with {hn!r}: leave out --embedder (or pass --embedder {hn})"
        return (f"index {db} was built with embedder {hn!r}, you asked for {wn!r}; vectors from two models never "
                f"share an index. Rebuild it: `autoresearch index VAULT --db {db} --full --embedder {wn}"
                f"{ChunkConfig.flags_for(want.get('chunking', {}))}`, use another --db, or leave out --embedder to use {hn!r}")
    if h != w:
        return (f"index {db} was built with a different build of {hn!r} (weights {h.get('weights')} vs "
                f"{w.get('weights')}); vectors from two builds never share an index. Rebuild it: "
                f"`autoresearch index VAULT --db {db} --full {keep}`, or use another --db")
    hc, wc = have.get("chunking", {}), want.get("chunking", {})
    diffs = ", ".join(f"{k} {hc.get(k)} in the index vs {wc.get(k)} asked" for k in sorted(set(hc) | set(wc))
                      if hc.get(k) != wc.get(k))
    return (f"index {db} was built with other chunking ({diffs}); chunking applies to the whole index, so a "
            f"change needs a rebuild: `autoresearch index VAULT --db {db} --full --embedder {wn}"
            f"{ChunkConfig.flags_for(wc)}`, or leave out the chunk options to update it with its own")


def _load_vault(vault: str | Path) -> tuple[list[VaultFile] | None, list[Note] | None, list[Skipped]]:
    if is_beir(vault):
        notes, skipped = read_beir(vault)
        return None, notes, skipped
    if is_korquad(vault):
        notes, skipped = read_korquad(vault)
        return None, notes, skipped
    skipped: list[Skipped] = []
    return list_vault(vault, skipped), None, skipped


def index_vault(vault: str | Path, db: str | Path, *, embedder: str | None = None, full: bool = False,
                chunk_cfg: ChunkConfig | None = None, cache: str | Path | None = None,
                progress=None, communities: bool = False, stop=None) -> IndexReport:
    """Index `vault` into `db`. progress(stage, done, total) is called as work advances. `communities`:
    recompute the communities now, even if the update left fewer stale notes than the budget (write.py).
    `stop()`, asked between embedding batches, ends the run with StopRequested: the index is left as it
    was (a full build's temp file removed, an update's write never begun) and the vectors embedded so far
    stay in the cache, so the next run resumes where this one stopped."""
    t0 = time.perf_counter()
    db = Path(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    with index_lock(db):
        existing_fp = None
        if db.exists() and not full:
            conn, error = None, ""
            try:
                conn = connect(db)
                existing_fp = get_meta(conn, "fingerprint") if conn.execute("PRAGMA user_version").fetchone()[0] else None
                remember_file_hashes(get_meta(conn, FILE_HASHES) if existing_fp else None)
            except Exception as e:
                existing_fp, error = None, f" (it could not be read: {e}; it may be damaged)"
            finally:
                if conn is not None:
                    conn.close()
            if existing_fp is None:
                raise SearchCoreError(f"{db} exists but is not a finished autoresearch index{error}; "
                                      f"rebuild it with `autoresearch index VAULT --db {db} --full`")
        name = embedder or (existing_fp or {}).get("embedder", {}).get("name") or "e5-small"
        if chunk_cfg is None:
            chunk_cfg = ChunkConfig(**existing_fp["chunking"]) if existing_fp else ChunkConfig()
        if existing_fp is not None and name != existing_fp.get("embedder", {}).get("name"):
            # refused on the name, before the model loads (minilm-l6 pulls in torch: ~25 s to say no)
            raise SearchCoreError(fingerprint_mismatch_message(
                db, existing_fp, {"embedder": {"name": name}, "chunking": chunk_cfg.as_dict()}))
        emb = get_embedder(name)
        want_fp = index_fingerprint(emb, chunk_cfg)
        if existing_fp is not None and existing_fp != want_fp:
            raise SearchCoreError(fingerprint_mismatch_message(db, existing_fp, want_fp))
        if existing_fp is not None:
            from search_core.index.check import check_before_update
            health = check_before_update(db)          # never write into a damaged file, never report it "unchanged"
            if not health.ok:
                raise SearchCoreError(health.message())

        files, beir_notes, skipped = _load_vault(vault)
        n_found = len(files) if files is not None else len(beir_notes)
        if n_found == 0:
            raise SearchCoreError(f"vault {vault} has no .md notes (or corpus rows); nothing to index. "
                                  "Point at the folder that holds your notes" +
                                  ("; the existing index was left as it was" if db.exists() else ""))
        cache_db = EmbeddingCache(cache or embed_cache_file())
        cache_db.stop = stop
        cache_db.progress = progress           # a migration of the cache's layout reports too
        try:
            if existing_fp is None:
                report = _build_full(vault, db, files, beir_notes, skipped, emb, want_fp, chunk_cfg, cache_db, progress)
            else:
                try:
                    report = _update(vault, db, files, beir_notes, skipped, emb, chunk_cfg, cache_db, progress,
                                     refresh_communities_now=communities)
                except DB_ERRORS as e:
                    if "malformed" not in str(e) and "corrupt" not in str(e):
                        raise
                    # a damaged page among those the update read: the transaction rolled back
                    raise SearchCoreError(f"index {db} is damaged: {e}. Rebuild it: `autoresearch index VAULT "
                                          f"--db {db} --full` (the vault is the source; nothing in the index "
                                          "is lost)") from None
        finally:
            cache_db.close()
        if cache_db.warning():
            report.warnings.insert(0, cache_db.warning())
        if cache_db.eviction_note():
            report.warnings.append(cache_db.eviction_note())
        if cache_db.migrated:
            report.warnings.append(cache_db.migrated)
        report.vectors, report.dense_per_note, report.cache = _count(db, "chunks WHERE has_vector"), \
            chunk_cfg.dense_per_note, str(cache_db.path)
        # an index whose dense channel searches PostgreSQL (search_core.index.pgvector): its table follows the commit
        from search_core.index.pgvector import sync_after_update
        if (pg_warning := sync_after_update(db)) is not None:
            report.warnings.append(pg_warning)
    report.seconds = round(time.perf_counter() - t0, 3)
    return report


def _read_all(files, beir_notes, skipped, progress) -> list[Note]:
    if beir_notes is not None:
        return beir_notes
    notes = []
    for i, vf in enumerate(files):
        r = read_note(vf)
        (skipped.append(r) if isinstance(r, Skipped) else notes.append(r))
        if progress and (i % 50 == 0 or i == len(files) - 1):
            progress("parse", i + 1, len(files))
    return notes


def _build_full(vault, db, files, beir_notes, skipped, emb, fp, chunk_cfg, cache, progress) -> IndexReport:
    notes = _read_all(files, beir_notes, skipped, progress)
    if not notes:
        raise SearchCoreError(f"no note in {vault} could be read ({len(skipped)} skipped: "
                              f"{'; '.join(s.path + ': ' + s.reason for s in skipped[:3])})")
    stats = {vf.note_id: vf for vf in files} if files is not None else {}
    tmp = db.with_name(f"{db.name}.building-{os.getpid()}")
    report = IndexReport(db=str(db), mode="full", skipped=skipped)
    try:
        conn = connect(tmp)
        migrate(conn)
        ensure_vec_tables(conn, emb.dim)
        with atomic(conn):
            set_meta(conn, "fingerprint", fp)
            set_meta(conn, "vault", str(Path(vault).resolve()))
            set_meta(conn, CHECKED_AT, time.time())      # a new file: the whole-file check is due a day from now
            set_meta(conn, FILE_HASHES, known_file_hashes())
            set_meta(conn, NAV_RULE_KEY, NAV_RULE)
            set_meta(conn, TEXT_RULE_KEY, TEXT_RULE)
            report.embedded = write_notes(conn, notes, stats, emb, chunk_cfg, cache, progress)
            rebuild_graph(conn, emb, cache, progress)
            short_tokens.build(conn)
            ngram_postings.build(conn)
            pair_table.build(conn)
            set_meta(conn, "indexed_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
            bump_generation(conn)
            term_df.build(conn)                        # after the generation it records
            word_df.build(conn)                        # the same, for whole Latin-script words
            refresh_layout(conn, db)                   # the file beside the index, for this commit
        conn.execute("PRAGMA journal_mode = DELETE")    # a single self-contained file to swap in
        conn.close()
        _swap_in(tmp, db)
    finally:
        for p in (tmp, Path(str(tmp) + "-wal"), Path(str(tmp) + "-shm"), Path(str(tmp) + "-journal")):
            p.unlink(missing_ok=True)
    report.notes = report.added = len(notes)
    report.warnings = [f"{n.id}: {w}" for n in notes for w in n.warnings]
    report.chunks = _count(db, "chunks")
    return report


def _swap_in(tmp: Path, db: Path) -> None:
    """Replace db with tmp. The old file's WAL is checkpointed and removed first, so it can never be
    replayed onto the new file; readers that still hold the old file keep reading it."""
    if db.exists():
        try:
            old = connect(db)
            # a server's views each hold a read snapshot (handle.py) for as long as they are current: the
            # checkpoint would wait out the busy timeout (5 s) for readers that stay; the file goes anyway
            old.execute("PRAGMA busy_timeout = 0")
            old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            old.close()
        except Exception as e:
            # the old file is being replaced, so its un-checkpointed WAL is dropped with it below; say so
            # instead of passing in silence (a reader still holding the old file keeps its own snapshot)
            warnings.warn(f"could not checkpoint the old index {db} before replacing it: {e}", stacklevel=2)
        for suffix in ("-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    # a bare rename, not files.atomic_replace: SQLite synced tmp to disk when it left WAL mode (its checkpoint)
    os.replace(tmp, db)


def _count(db, table) -> int:
    conn = connect(db)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def _fts_rows(conn, chunk_ids: list[int]) -> list[tuple]:
    rows = []
    for i in range(0, len(chunk_ids), 500):
        part = chunk_ids[i:i + 500]
        rows += conn.execute(f"SELECT title, aliases, tags, summary, body FROM chunks_fts WHERE rowid IN "
                             f"({','.join('?' * len(part))})", part).fetchall()
    return rows


def _keep_current(conn) -> None:
    """After bump_generation in a write that moved no text: the count tables still hold, say so."""
    for mod in (term_df, word_df):
        meta = get_meta(conn, mod.META_KEY)
        if isinstance(meta, dict) and meta.get("version") == mod.VERSION:
            set_meta(conn, mod.META_KEY, {**meta, "generation": get_meta(conn, "generation", 0)})


def _write_delta(conn, emb, cache, progress, deleted, to_write, known, stats, prepared, kept) -> tuple[dict, int]:
    """Remove the deleted notes and the changed chunks of rewritten ones, insert the new versions, and
    move every derived table by what left and what arrived (counts subtracted and added), never
    recounting the whole vault. Runs inside the caller's transaction. Returns the communities' state and
    the first chunk id the new chunks were given (ids from there on may be reused: layout.py)."""
    dfs_current = {mod: mod.is_current(conn) for mod in (term_df, word_df)}   # before the generation moves
    rewritten = [n.id for n in to_write if n.id in known]
    gone_ids = deleted + rewritten
    keep_ids = {cid for ids in kept.values() for cid in ids}
    removed = [r for r in chunk_rows(conn, gone_ids) if r[0] not in keep_ids]
    removed_fts = _fts_rows(conn, [r[0] for r in removed])
    removed_docs = ngram_postings.chunk_docs(conn, [r[0] for r in removed])   # with the notes' old fields
    before = graph_before(conn, gone_ids)
    delete_notes(conn, deleted)
    delete_chunks(conn, [r[0] for r in removed if r[0] not in keep_ids])
    first_new = next_chunk_id(conn)      # what insert_prepared numbers from (ids may be reused)
    insert_prepared(conn, prepared, stats, existing=frozenset(rewritten))
    added_ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE id >= ?", (first_new,))]
    added_fts = _fts_rows(conn, added_ids)
    state = update_graph(conn, emb, cache, progress, before, [n.id for n in to_write])
    update_short_tokens(conn, removed, first_new)
    if ngram_postings.is_built(conn):
        ngram_postings.update(conn, removed_docs, ngram_postings.chunk_docs(conn, added_ids))
    else:
        ngram_postings.build(conn)
    if pair_table.is_built(conn):
        pair_table.update(conn, [r[0] for r in removed], added_ids)
    else:
        pair_table.build(conn)
    set_meta(conn, "indexed_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    set_meta(conn, FILE_HASHES, known_file_hashes())
    bump_generation(conn)
    for mod, current in dfs_current.items():   # after the generation they record
        if current:
            mod.apply_delta(conn, removed_fts, added_fts)
        else:
            mod.build(conn)
    return state, first_new


def _refresh_nav_flags(conn, db, files, beir_notes, written: list[Note]) -> None:
    """Every note's index-page flag under this NAV_RULE (the notes just written have it already)."""
    done = {n.id for n in written}
    if beir_notes is not None:
        notes = [n for n in beir_notes if n.id not in done]
    else:
        notes = [r for vf in files if vf.note_id not in done for r in [read_note(vf)] if isinstance(r, Note)]
    previous_layout = current_layout(conn, db)
    with atomic(conn):
        if refresh_nav(conn, notes):
            bump_generation(conn)                      # the searchers' views reload with the new flags
            _keep_current(conn)
            # the flags are not in the layout: every vector and the vault order stay, the small file is redone
            refresh_layout(conn, db, previous_layout, None, moved=())
        set_meta(conn, NAV_RULE_KEY, NAV_RULE)


def _update(vault, db, files, beir_notes, skipped, emb, chunk_cfg, cache, progress,
            refresh_communities_now: bool = False) -> IndexReport:
    conn = connect(db)
    migrate(conn)
    previous_layout = current_layout(conn, db)      # lends the next layout file the vectors that stay
    report = IndexReport(db=str(db), mode="incremental", skipped=skipped)
    known = {r[0]: (r[1], r[2], r[3]) for r in conn.execute("SELECT id, content_hash, size, mtime_ns FROM notes")}
    # cut under another TEXT_RULE (or before the rule was recorded): every note is written again once; a chunk
    # whose text is unchanged keeps its vector (kept_chunks), so this costs the writes, not the embeddings
    rewrite_all = get_meta(conn, TEXT_RULE_KEY) != TEXT_RULE
    to_write: list[Note] = []
    touch: list[tuple[int, int, str]] = []
    stats: dict[str, VaultFile] = {}
    if beir_notes is not None:
        present = {n.id for n in beir_notes}
        to_write = [n for n in beir_notes if rewrite_all or known.get(n.id, (None,))[0] != n.content_hash]
    else:
        present = {vf.note_id for vf in files}
        stats = {vf.note_id: vf for vf in files}
        for vf in files:
            old = known.get(vf.note_id)
            if old and old[1] == vf.size and old[2] == vf.mtime_ns and not rewrite_all:
                continue                               # size + mtime unchanged: not even read
            r = read_note(vf)
            if isinstance(r, Skipped):
                skipped.append(r)
                present.discard(vf.note_id)            # an unreadable file drops out of the index
                continue
            if old and old[0] == r.content_hash and not rewrite_all:
                touch.append((vf.size, vf.mtime_ns, vf.note_id))
            else:
                to_write.append(r)
    deleted = sorted(set(known) - present)
    report.added = sum(1 for n in to_write if n.id not in known)
    report.changed = len(to_write) - report.added
    report.deleted = len(deleted)
    report.unchanged = len(present) - len(to_write)
    report.warnings = [f"{n.id}: {w}" for n in to_write for w in n.warnings]
    if to_write or deleted or touch:
        # embed before the write transaction, so readers are never blocked by model time
        kept = kept_chunks(conn, [n for n in to_write if n.id in known], chunk_cfg)
        prepared = prepare(to_write, emb, chunk_cfg, cache, progress,
                           keep=frozenset((nid, o) for nid, o in conn.execute(
                               "SELECT note_id, ord FROM chunks WHERE id IN (%s)" % ",".join(
                                   str(i) for ids in kept.values() for i in ids))) if kept else frozenset())
        with atomic(conn):
            if deleted or to_write:
                report.communities, first_new = _write_delta(conn, emb, cache, progress, deleted, to_write,
                                                             known, stats, prepared, kept)
            conn.executemany("UPDATE notes SET size = ?, mtime_ns = ? WHERE id = ?", touch)
            if not (deleted or to_write):
                set_meta(conn, "indexed_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
                bump_generation(conn)                  # nothing derived moved: only the stat columns
                _keep_current(conn)
                first_new = None                       # no chunk added: every vector stays
            # the vault order moves only where notes were removed, rewritten or added
            refresh_layout(conn, db, previous_layout, first_new, moved=deleted + [n.id for n in to_write])
            set_meta(conn, TEXT_RULE_KEY, TEXT_RULE)
        report.embedded = prepared["embedded"]
    elif rewrite_all:                                  # an empty vault: nothing to cut again
        with atomic(conn):
            set_meta(conn, TEXT_RULE_KEY, TEXT_RULE)
    if not short_tokens.is_built(conn):      # an index written before the table existed: add it now
        with atomic(conn):
            short_tokens.build(conn)
    if not ngram_postings.is_built(conn):    # an index written before the n-gram lists existed
        with atomic(conn):
            ngram_postings.build(conn)
    if not pair_table.is_built(conn):        # an index written before the cross-script pairs were stored
        with atomic(conn):
            pair_table.build(conn)
    if not term_df.is_current(conn):         # written before the table existed, or by a writer without it
        with atomic(conn):
            term_df.build(conn)
    if not word_df.is_current(conn):         # the same for the word table (fourth round of the gate)
        with atomic(conn):
            word_df.build(conn)
    if get_meta(conn, NAV_RULE_KEY) != NAV_RULE:    # flags from an older rule (or none): every note read once
        # (after the count tables are current: the generation this bumps is recorded on them)
        _refresh_nav_flags(conn, db, files, beir_notes, to_write)
        with atomic(conn):                          # pairs are read from notes that are not index pages
            pair_table.build(conn)
    if current_layout(conn, db) is None:     # an index written before the file existed, or by an older format
        with atomic(conn):
            if get_meta(conn, "generation_token") is None:    # written before the token existed
                set_meta(conn, "generation_token", os.urandom(8).hex())
            refresh_layout(conn, db)
    if refresh_communities_now:
        with atomic(conn):
            report.communities = refresh_communities(conn)
    elif report.communities is None:
        report.communities = communities_state(conn)
    report.notes = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
    report.chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    conn.close()
    return report
