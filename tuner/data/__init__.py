"""Question sets: gold sets in our YAML, BEIR and KorQuAD formats, and how they are split."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "gold": ("GoldSet", "Question", "load_gold", "split_gold", "GoldError"),
})
