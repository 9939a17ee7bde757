"""Document frequencies of Latin-script words (names), stored in the index file at index time.

The gate's unknown_latin feature asks whether the index ever saw each Latin-script word of a Korean
question ("Pinecone 설정 방법"), by its trigrams (term_df). A name whose trigrams all occur inside other
words passes that test: "pinecone" (pin, ine, nec, eco, con, one), "faiss", "redis" are "seen" in the
demo vault, which never names them; the third round's trigram feature fired on 7 of its 38 near-topic
tuning probes (BENCHMARKS.md, gate). Here the index writer stores, per word, the number of chunks that
hold it as a whole word: a lookup is one primary-key read (~2 us).

Derived data, not part of the fingerprint, like trigram_df: tagged with the index generation, so a table
left stale by a writer that does not keep it is never read; an index without it still searches, and its
gate falls back to the trigram test (and says so in `search --explain`). A full build counts every FTS
row; an incremental write moves the counts by the rows it removed and added (apply_delta), which is what a
rebuild would count (the rebuild took 0.7-3.6 s on johngrib's 18,315 chunks for a one-note change; the
delta a few ms), and a table that was not current before the write is rebuilt instead.
"""

from __future__ import annotations

import re

from search_core.index.store import get_meta, set_meta
from search_core.index.term_df import DB_ERRORS, apply_counts, read_df, table_is_current

META_KEY = "latin_word_df"
VERSION = 1
# A word is a maximal run of ASCII letters and digits that holds at least one letter, lower-cased: anything
# else (Hangul, '-', '+', '.', '_', spaces) ends it, so a Korean particle never sticks and a compound is read
# as its parts, on both sides alike: "LightRAG를" -> lightrag; "GPT-4o" -> gpt, 4o; "sqlite-vec" -> sqlite,
# vec; "C++" -> c; "e5-small" -> e5, small; "2024년" -> nothing (a number is not a name).
_RUN_RE = re.compile(r"[a-z0-9]+")
_LETTER_RE = re.compile(r"[a-z]")


def latin_words(text: str) -> list[str]:
    """The Latin-script words of `text` by the rule above, in order, with repeats."""
    return [w for w in _RUN_RE.findall(text.lower()) if _LETTER_RE.search(w)]


def _ddl(conn) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS latin_word_df (word TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID")


def build(conn) -> int:
    """(Re)write the table from every chunk's FTS row (title, aliases, tags, summary, body: what the
    trigram vocabulary counts too). Call inside the writer's transaction, after bump_generation."""
    _ddl(conn)
    conn.execute("DELETE FROM latin_word_df")
    df: dict[str, int] = {}
    for row in conn.execute("SELECT title, aliases, tags, summary, body FROM chunks_fts"):
        for w in set(latin_words("\n".join(v for v in row if v))):
            df[w] = df.get(w, 0) + 1
    conn.executemany("INSERT INTO latin_word_df(word, df) VALUES (?, ?)", df.items())
    set_meta(conn, META_KEY, {"version": VERSION, "words": len(df), "generation": get_meta(conn, "generation", 0)})
    return len(df)


def _row_words(row) -> set[str]:
    return set(latin_words("\n".join(v for v in row if v)))


def apply_delta(conn, removed_rows, added_rows) -> None:
    """Move the counts by FTS rows (title, aliases, tags, summary, body) that left and joined the index.
    Only for a table that was current before this write; call after bump_generation, like build."""
    delta: dict[str, int] = {}
    for row in removed_rows:
        for w in _row_words(row):
            delta[w] = delta.get(w, 0) - 1
    for row in added_rows:
        for w in _row_words(row):
            delta[w] = delta.get(w, 0) + 1
    words = (get_meta(conn, META_KEY) or {}).get("words", 0) + apply_counts(conn, "latin_word_df", "word", delta)
    set_meta(conn, META_KEY, {"version": VERSION, "words": int(words), "generation": get_meta(conn, "generation", 0)})


def is_current(conn) -> bool:
    """The table exists and was written by the last indexing commit."""
    return table_is_current(conn, META_KEY, VERSION)


def lookup(conn, words: list[str]) -> dict[str, int]:
    """df of each word from the table (absent: 0)."""
    return read_df(conn, "latin_word_df", "word", words)


STALE = ("the index has no current word table (written before it existed, or by a writer without it): "
         "unknown_names used the trigram test; any `autoresearch index` run on the vault adds the table")


def counts(view, conn, words: list[str]) -> dict[str, int] | None:
    """Chunks holding each word as a whole word, or None when the index has no current table (the caller
    falls back and says so with STALE). One cache on the view, which is rebuilt with the index. A failed
    lookup also answers None: a feature never fails a search over it."""
    if conn is None:
        return None
    try:
        caches = view.caches
        if caches.word_df_stored is None:
            caches.word_df_stored = is_current(conn)
        if not caches.word_df_stored:
            return None
        cache = caches.word_df
        todo = [w for w in words if w not in cache]
        if todo:
            cache.update(lookup(conn, todo))
    except DB_ERRORS:
        return None
    return {w: cache[w] for w in words}
