"""Document frequencies of FTS5 trigrams, stored in the index file at index time.

The gate's BM25 normaliser (gate_features.query_idf) needs the document frequency of every trigram
of a query. Read from FTS5's vocabulary at search time, each first-seen term costs one fts5vocab
lookup that walks the term's whole doclist: 0.04 ms for a rare term, 0.43 ms for '다.\\n' (9,085
of 18,315 chunks) on the johngrib wiki, and the gate's feature cost p95 was 3.77 ms against a 2 ms
target (BENCHMARKS.md, gate). Here the index writer copies the vocabulary once into a WITHOUT ROWID
table (term -> df): on johngrib 290,174 terms, 0.38 s; a lookup is then one primary-key read
(~2 us).

It is derived data, not part of the fingerprint, like short_postings: an index without the table
(or with a stale one) still searches; the gate then reads fts5vocab as before. A full build copies
the vocabulary; an incremental write moves the counts by the rows it removed and added, tokenized by
FTS5 itself: the rows go into two small temporary FTS5 tables with the same tokenizer, whose own
vocabularies give each term's change (no copy of the tokenizer in Python, so the counts stay what a
rebuild would copy; a one-note change costs ms instead of the rebuild's 0.25-1.4 s on johngrib).
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


# the tokenizer of chunks_fts (store.py): the delta tables must split text exactly as it does
FTS_TOKENIZE = "trigram"


def apply_delta(conn, removed_rows, added_rows) -> None:
    """Move each term's count by the FTS rows (title, aliases, tags, summary, body) that left and joined
    the index. Only for a table that was current before this write; call after bump_generation."""
    delta: dict[str, int] = {}
    for sign, rows in ((-1, removed_rows), (1, added_rows)):
        if not rows:
            continue
        conn.execute("DROP TABLE IF EXISTS temp.term_df_delta")
        conn.execute("CREATE VIRTUAL TABLE temp.term_df_delta USING fts5(title, aliases, tags, summary, body, "
                     f"tokenize = '{FTS_TOKENIZE}')")
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.term_df_delta_vocab USING fts5vocab(temp, term_df_delta, row)")
        conn.executemany("INSERT INTO temp.term_df_delta(title, aliases, tags, summary, body) VALUES (?,?,?,?,?)",
                         [tuple(r) for r in rows])
        for term, doc in conn.execute("SELECT term, doc FROM temp.term_df_delta_vocab"):
            delta[term] = delta.get(term, 0) + sign * doc
        conn.execute("DROP TABLE temp.term_df_delta_vocab")
        conn.execute("DROP TABLE temp.term_df_delta")
    n = (get_meta(conn, META_KEY) or {}).get("terms", 0) + apply_counts(conn, "trigram_df", "term", delta)
    set_meta(conn, META_KEY, {"version": VERSION, "terms": int(n), "generation": get_meta(conn, "generation", 0)})


def apply_counts(conn, table: str, column: str, delta: dict[str, int]) -> int:
    """Add each key's change to a stored (key, df) table; a key whose count falls to 0 leaves it.
    Returns how many keys the table gained (negative: lost)."""
    up = [(k, d) for k, d in delta.items() if d]
    had = read_df(conn, table, column, [k for k, _ in up])
    conn.executemany(f"INSERT INTO {table}({column}, df) VALUES (?, ?) "
                     f"ON CONFLICT({column}) DO UPDATE SET df = df + excluded.df", up)
    gone = [(k,) for k, d in up if d < 0 and had[k] + d <= 0]
    conn.executemany(f"DELETE FROM {table} WHERE {column} = ?", gone)
    return sum(1 for k, _ in up if had[k] == 0) - len(gone)


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
    caches = view.caches
    cache = caches.term_df
    todo = [t for t in terms if t not in cache]
    if todo and conn is not None:
        try:
            stored = caches.term_df_stored
            if stored is None:
                stored = caches.term_df_stored = is_current(conn)
            cache.update(lookup_stored(conn, todo) if stored else lookup_live(conn, todo))
        except DB_ERRORS:
            pass
    return {t: cache.get(t, 0) for t in terms}
