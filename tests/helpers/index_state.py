"""What an index holds, keyed by content rather than by row id: two indexes of the same vault compare equal
whether they were built at once or updated note by note (or recovered after a killed update)."""

from search_core.index.store import connect, get_meta


def derived_state(db) -> dict:
    """Everything an index holds, keyed by content rather than by row id."""
    c = connect(db)
    try:
        key = {cid: (nid, o) for cid, nid, o in c.execute("SELECT id, note_id, ord FROM chunks")}
        state = {
            "notes": sorted(c.execute("SELECT id, path, title, aliases, tags, summary, is_nav, nav_reason, "
                                      "content_hash, size, mtime_ns, warnings FROM notes")),
            "chunks": sorted(c.execute("SELECT note_id, ord, heading, context, text, text_hash, has_vector FROM chunks")),
            "fts": sorted((key[r[0]], *r[1:]) for r in
                          c.execute("SELECT rowid, title, aliases, tags, summary, body FROM chunks_fts")),
            "chunk_vec": sorted((key[r], v) for r, v in c.execute("SELECT rowid, embedding FROM chunk_vec")),
            "links": sorted(c.execute("SELECT src, target, anchor, kind, coalesce(dst, '') FROM links")),
            "belongs_to": sorted(c.execute("SELECT note_id, tag FROM belongs_to")),
            "entities": list(c.execute("SELECT id, name, norm, kind, note_id FROM entities ORDER BY id")),
            "entity_vec": sorted(c.execute("SELECT rowid, embedding FROM entity_vec")),
            "cooccurrence": sorted(c.execute("SELECT a, b, weight FROM cooccurrence")),
            "trigram_df": dict(c.execute("SELECT term, df FROM trigram_df")),
            "latin_word_df": dict(c.execute("SELECT word, df FROM latin_word_df")),
            "short_postings": {code: sorted(key[int(i)] for i in memoryview(blob).cast("i"))
                               for code, blob in c.execute("SELECT code, chunks FROM short_postings")},
            "ngram_postings": {term: sorted(zip((key[int(i)] for i in memoryview(ids).cast("i")),
                                                memoryview(tfs).cast("i")))
                               for term, ids, tfs in c.execute("SELECT term, chunks, tfs FROM ngram_postings")},
            "ngram_lengths": sorted((key[cid], n) for cid, n in c.execute("SELECT chunk_id, terms FROM ngram_lengths")),
            "fts_vocab_size": c.execute("SELECT count(*) FROM trigram_df").fetchone()[0],
            "meta_counts": ((get_meta(c, "trigram_df") or {}).get("terms"),
                            (get_meta(c, "latin_word_df") or {}).get("words")),
            "communities": dict(c.execute("SELECT note_id, community FROM communities")),
        }
        from search_core.index import ngram_postings, short_tokens, term_df, word_df
        state["current"] = (term_df.is_current(c), word_df.is_current(c), short_tokens.is_built(c),
                            ngram_postings.is_built(c))
        return state
    finally:
        c.close()
