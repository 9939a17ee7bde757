"""A summary of one index file."""

from __future__ import annotations

import os
from pathlib import Path

from search_core.index.store import get_meta, open_index
from search_core.index.watch import read_status
from search_core.index.write import communities_state


def index_stats(db: str | Path) -> dict:
    conn = open_index(db)
    try:
        one = lambda q: conn.execute(q).fetchone()[0]
        return {
            "db": str(db),
            "schema_version": one("PRAGMA user_version"),
            "vault": get_meta(conn, "vault"),
            "indexed_at": get_meta(conn, "indexed_at"),
            "notes": one("SELECT count(*) FROM notes"),
            "nav_notes": one("SELECT count(*) FROM notes WHERE is_nav"),
            # which notes are kept out of the answer lists as index pages, and why (parse.nav_reason); the
            # config's nav_globs add theirs at search time (`search --explain` names both)
            "nav_reasons": dict(conn.execute("SELECT id, nav_reason FROM notes WHERE is_nav ORDER BY id")),
            "chunks": one("SELECT count(*) FROM chunks"),
            "vectors": one("SELECT count(*) FROM chunk_vec"),
            "links": one("SELECT count(*) FROM links"),
            "unresolved_links": one("SELECT count(*) FROM links WHERE dst IS NULL"),
            "tags": one("SELECT count(DISTINCT tag) FROM belongs_to"),
            "entities": one("SELECT count(*) FROM entities"),
            "communities": one("SELECT count(DISTINCT community) FROM communities"),
            "notes_with_warnings": one("SELECT count(*) FROM notes WHERE warnings != '[]'"),
            "size_bytes": os.path.getsize(db),
            "communities_state": communities_state(conn),
            "watch": read_status(db),
            "fingerprint": get_meta(conn, "fingerprint"),
        }
    finally:
        conn.close()
