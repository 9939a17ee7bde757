"""A deterministic embedder for tests that need vectors but not their meaning.

Each text becomes its hashed character bigrams and trigrams (lowercased, whitespace collapsed), counted
into DIM - 1 buckets with a hashed sign and L2-normalised, then set beside one component every text
shares (SHARED of the squared length): the cosine of two texts is SHARED + (1 - SHARED) x the cosine of
their n-gram counts, so texts sharing many n-grams score near 1 and texts sharing none near SHARED, packed
into 0.7-1.0 as e5-small's are (the cosine gate's thresholds and the spaces' ranges then mean the same).
No model, no weights, no threads: a 138-note vault embeds in well under a second, and the same text gives
the same vector in every process.

It is a real Embedder (search_core.models.base), registered by name in tests/conftest.py the way an
application registers a model, so an index built with it records `hash-ngram` in its fingerprint and
everything that opens that index (handle, searcher, evaluation, sweep) uses it. Tests that assert on what
vectors mean (the gate's calibration on real cosines, model A/B, retrieval quality) keep e5-small.
"""

from __future__ import annotations

import re

import numpy as np

from search_core.models.base import Embedder, normalize

NAME = "hash-ngram"
DIM = 256
NGRAMS = (2, 3)
SHARED = 0.7
_SPACE = re.compile(r"\s+")
_MIX = np.int64(0x9E3779B1)       # odd 32-bit multiplier (Fibonacci hashing); int64 products wrap alike everywhere


def _ngram_hashes(text: str) -> np.ndarray:
    cps = np.frombuffer(_SPACE.sub(" ", text.lower()).strip().encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    parts = []
    for n in NGRAMS:
        if cps.size < n:
            continue
        h = np.full(cps.size - n + 1, n, dtype=np.int64)
        for i in range(n):
            h = h * _MIX + cps[i:cps.size - n + 1 + i]
        parts.append(h)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class HashedNgramEmbedder(Embedder):
    name = NAME
    dim = DIM
    default_threshold = 0.82     # e5-small's: the cosines are packed alike (SHARED)
    length_unit = "chars"

    def embed(self, texts, *, is_query=False):
        counts = np.zeros((len(texts), DIM - 1), np.float32)
        for row, text in enumerate(texts):
            h = _ngram_hashes(text)
            if h.size:
                counts[row] = np.bincount((h >> 8) % (DIM - 1), weights=np.where(h & 1, 1.0, -1.0), minlength=DIM - 1)
        out = np.empty((len(texts), DIM), np.float32)
        out[:, :-1] = normalize(counts) * np.float32(np.sqrt(1 - SHARED)) if len(texts) else counts
        out[:, -1] = np.sqrt(SHARED)
        return normalize(out) if len(texts) else out

    def fingerprint(self):
        return {"name": NAME, "impl": "tests.helpers.fake_embedder", "dim": DIM, "ngrams": list(NGRAMS), "shared": SHARED,
                "query_prefix": "", "passage_prefix": ""}
