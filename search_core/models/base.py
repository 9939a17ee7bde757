"""Model kinds: one abstract method each (embed / score), a fingerprint, and the error for missing weights."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from search_core import SearchCoreError


class ModelUnavailable(SearchCoreError):
    """The model cannot load here: the message says which weights, where we looked, and how to get them."""


class Embedder(ABC):
    name: str
    dim: int
    query_prefix: str = ""
    passage_prefix: str = ""
    # Default gate on the top dense cosine. 0.615 is what our users run today on their model;
    # each embedder overrides it because cosine scales differ (e5 packs everything into 0.7-0.9).
    default_threshold: float = 0.615
    # What one text's embedding cost grows with, for the tuner's cost model: "tokens" where the model can
    # count them, else "chars" (an HTTP server's tokenizer is not ours to run).
    length_unit: str = "chars"
    # May two threads call embed() at once, each limited to its share of the cores (threads.embed_batches)?
    # Only where measured: the call must release the GIL, keep its buffers per call, and obey the OpenMP limit.
    concurrent_calls: bool = False

    def text_length(self, text: str, *, is_query: bool = False) -> int:
        """The length of `text` in `length_unit`s (what embedding it costs grows with)."""
        return len(text)

    @abstractmethod
    def embed(self, texts: list[str], *, is_query: bool = False) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""

    @abstractmethod
    def fingerprint(self) -> dict:
        """What makes two embedders' vectors comparable: name, weights hash or revision, dim, prefixes."""


class Reranker(ABC):
    name: str

    @abstractmethod
    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """One relevance score per passage, higher is better."""

    def fingerprint(self) -> dict:
        return {"name": self.name}


def normalize(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.maximum(n, 1e-12)


