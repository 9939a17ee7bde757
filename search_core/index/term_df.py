"""Document frequencies of FTS5 trigrams, stored in the index file at index time.

The gate's BM25 normaliser (gate_features.query_idf) needs the document frequency of every trigram
of a query. Read from FTS5's vocabulary at search time, each first-seen term costs one fts5vocab
lookup that walks the term's whole doclist: 0.04 ms for a rare term, 0.43 ms for '다.\\n' (9,085
of 18,315 chunks) on the johngrib wiki, and the gate's feature cost p95 was 3.77 ms against a 2 ms
target (BENCHMARKS.md, gate). Here the index writer copies the vocabulary once into a WITHOUT ROWID
table (term -> df): on johngrib 290,174 terms, 0.38 s; a lookup is then one primary-key read
(~2 us).

It is derived data, not part of the fingerprint, like short_postings: an index without the table
(or with a stale one) still searches; the gate then reads fts5vocab as before. The writer rebuilds
the table after every write, full or incremental: one scan of the vocabulary is exact, needs no
copy of FTS5's tokenizer, and costs less than re-embedding one changed note.
"""

from __future__ import annotations

import sqlite3

from search_core.index.store import get_meta, set_meta

try:                                   # the engine's connections are sqlean's; plain sqlite3 in tests
    import sqlean
    DB_ERRORS: tuple = (sqlite3.Error, sqlean.Error)
except ImportError:                    # pragma: no cover
    DB_ERRORS = (sqlite3.Error,)

META_KEY = "trigram_df"
VERSION = 1
VOCAB = "temp.term_df_vocab"


def _vocab(conn) -> None:
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB} USING fts5vocab(main, chunks_fts, row)")


def build(conn) -> int:
    """(Re)write the table from FTS5's vocabulary. Call inside the writer's transaction, after the
    chunks are written and after bump_generation: the table records the generation it matches, so a
    write by code that does not keep the table (an older version) leaves it unused, not wrong."""
    conn.execute("CREATE TABLE IF NOT EXISTS trigram_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID")
    conn.execute("DELETE FROM trigram_df")
    _vocab(conn)
    conn.execute(f"INSERT INTO trigram_df(term, df) SELECT term, doc FROM {VOCAB}")
    n = conn.execute("SELECT count(*) FROM trigram_df").fetchone()[0]
    set_meta(conn, META_KEY, {"version": VERSION, "terms": int(n), "generation": get_meta(conn, "generation", 0)})
    return int(n)


def table_is_current(conn, meta_key: str, version: int) -> bool:
    """A derived table (this one, word_df's) exists and was written by the last indexing commit."""
    meta = get_meta(conn, meta_key)
    return (isinstance(meta, dict) and meta.get("version") == version
            and meta.get("generation") == get_meta(conn, "generation", 0))


def read_df(conn, table: str, column: str, keys: list[str]) -> dict[str, int]:
    """df of each key from a stored (key, df) table (absent: 0, as fts5vocab answers for an unseen term)."""
    out = dict.fromkeys(keys, 0)
    for i in range(0, len(keys), 500):       # SQLite's default limit on bound parameters is 32,766
        part = keys[i:i + 500]
        q = f"SELECT {column}, df FROM {table} WHERE {column} IN ({','.join('?' * len(part))})"
        out.update(dict(conn.execute(q, part).fetchall()))
    return out


def is_current(conn) -> bool:
    """The table exists and was written by the last indexing commit."""
    return table_is_current(conn, META_KEY, VERSION)


def lookup_stored(conn, terms: list[str]) -> dict[str, int]:
    return read_df(conn, "trigram_df", "term", terms)


def lookup_live(conn, terms: list[str]) -> dict[str, int]:
    """df from FTS5's vocabulary itself (an index written before the table existed)."""
    _vocab(conn)
    out = {}
    for t in terms:
        row = conn.execute(f"SELECT doc FROM {VOCAB} WHERE term = ?", (t,)).fetchone()
        out[t] = int(row[0]) if row else 0
    return out


def counts(view, conn, terms: list[str]) -> dict[str, int]:
    """Document (chunk) frequency of FTS5 trigram terms, for the sparse channel's term cap and the gate's
    features alike: from the stored table (one primary-key read per term), else from FTS5's vocabulary
    (a doclist walk per term: 0.04-0.43 ms on johngrib). One cache on the view, which is rebuilt with the
    index. A lookup that fails counts the term as 0 (rare): neither a search nor a feature fails over it."""
    cache = view.__dict__.setdefault("_term_df", {})
    todo = [t for t in terms if t not in cache]
    if todo and conn is not None:
        try:
            stored = view.__dict__.get("_term_df_stored")
            if stored is None:
                stored = view.__dict__["_term_df_stored"] = is_current(conn)
            cache.update(lookup_stored(conn, todo) if stored else lookup_live(conn, todo))
        except DB_ERRORS:
            pass
    return {t: cache.get(t, 0) for t in terms}
