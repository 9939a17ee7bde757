"""Reading a vault: files -> parsed notes -> chunks, and the link graph between notes."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "note": ("Note", "Chunk", "Link", "Section"),
    "parse": ("parse_note",),
    "vault": ("list_vault", "read_note", "read_beir", "read_korquad", "Skipped", "VaultFile"),
    "chunk": ("chunk_note", "dense_selection"),
    "graph": ("LinkResolver", "communities", "cooccurrence", "entities_for"),
})
