"""The terms each chunk pairs across scripts (`지연 시간(latency)`: search_core.ingest.term_pairs), stored at
index time so a search reads the vault's pairs with one grouped query instead of reading every chunk's
text (0.9 s of CPU on the 536-note johngrib subset, linear in the vault).

Derived data, not part of the index fingerprint: an index without the table still searches, without the
expansion, and any `autoresearch index` run on it adds the table.
"""

from __future__ import annotations

from search_core.index.store import get_meta, set_meta
from search_core.ingest.term_pairs import pair_counts, pairs_from_counts

META_KEY = "term_pairs"
VERSION = 1


def _ddl(conn) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS term_pairs (chunk_id INTEGER NOT NULL, latin TEXT NOT NULL, "
                 "korean TEXT NOT NULL, n INTEGER NOT NULL)")
    conn.execute("CREATE INDEX IF NOT EXISTS term_pairs_chunk ON term_pairs(chunk_id)")


# Index pages are left out: a link list's notes ("[[rrf]] (같이 읽기)", "see also") pair a title with a comment.
_CHUNKS = "SELECT c.id, c.text FROM chunks c JOIN notes n ON n.id = c.note_id WHERE n.nav_reason = ''"


def _insert(conn, chunk_ids=None) -> None:
    rows = (conn.execute(_CHUNKS) if chunk_ids is None else
            (r for i in range(0, len(chunk_ids), 500) for r in conn.execute(
                f"{_CHUNKS} AND c.id IN ({','.join('?' * len(chunk_ids[i:i + 500]))})", list(chunk_ids[i:i + 500]))))
    conn.executemany("INSERT INTO term_pairs (chunk_id, latin, korean, n) VALUES (?, ?, ?, ?)",
                     [(cid, en, ko, n) for cid, text in list(rows) for (en, ko), n in pair_counts(text).items()])


def build(conn) -> None:
    """(Re)write every chunk's pairs. Call inside the writer's transaction."""
    _ddl(conn)
    conn.execute("DELETE FROM term_pairs")
    _insert(conn)
    set_meta(conn, META_KEY, {"version": VERSION})


def is_built(conn) -> bool:
    meta = get_meta(conn, META_KEY)
    return isinstance(meta, dict) and meta.get("version") == VERSION


def update(conn, removed_chunk_ids, added_chunk_ids) -> None:
    """After an incremental write: the removed chunks' pairs go, the added chunks' come in."""
    removed = list(removed_chunk_ids)
    for i in range(0, len(removed), 500):
        part = removed[i:i + 500]
        conn.execute(f"DELETE FROM term_pairs WHERE chunk_id IN ({','.join('?' * len(part))})", part)
    _insert(conn, list(added_chunk_ids))


def load(conn) -> dict[str, tuple[str, ...]]:
    """The vault's pairs (search_core.ingest.term_pairs.pairs_from_counts); {} for an index without the table."""
    if not is_built(conn):
        return {}
    return pairs_from_counts(conn.execute("SELECT latin, korean, SUM(n) FROM term_pairs GROUP BY latin, korean"))
