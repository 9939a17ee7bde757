"""The index file: its SQLite store, building and updating it, the embedding cache, the tables written at index time, checks and stats,
and the optional PostgreSQL + pgvector table of its dense channel."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "store": ("connect", "open_index", "atomic", "get_meta", "set_meta"),
    "indexer": ("index_vault", "IndexReport", "index_fingerprint"),
    "embed_cache": ("EmbeddingCache",),
    "handle": ("IndexHandle", "IndexChangedError"),
    "check": ("check_index", "CheckReport"),
    "stats": ("index_stats",),
    "pgvector": ("PgvectorSettings", "StaleTableError"),
})
