"""txtai's hybrid search over vectors and chunks handed in: run by benchmarks/bench_peers.py with the python
of a venv of its own (txtai, torch for CPU), never imported into ours.

    VENV/bin/python txtai_run.py FOLDER

FOLDER as for llamaindex_run.py (chunks.json, vectors.npy, queries.json, qvectors.npy, params.json); written
back: result.json and held.npy (each chunk's vector as the ANN index holds it, NaN for a chunk without one).

The system: Embeddings(hybrid=True), so txtai's own BM25 keyword index (its tokenizer, terms index,
normalized scores) beside a dense index, fused by txtai's hybrid scoring (its default weights). The dense
side is the `external` method: the vectors are ours, looked up by text (a chunk's text while indexing, a
query's while searching), and the ANN backend is `numpy` (exact inner product: the nearest chunks, not an
approximation of them). Nothing is embedded here.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
from txtai import Embeddings


class HandedInVectors:
    """txtai's `transform` for the external method: texts in, our vectors out. While indexing, txtai hands the
    chunks over in the order they were given (in batches), so the vectors are read in that order (two chunks
    of equal text may carry different vectors: the heading path is embedded with the text), each batch
    checked against the chunks' texts; while searching, a query's vector is looked up by its text."""

    def __init__(self, texts: list, vectors: np.ndarray, query_vectors: dict):
        self.texts, self.vectors, self.query_vectors = texts, vectors, query_vectors
        self.at = 0
        self.phase = "index"

    def __call__(self, texts):
        if self.phase == "search":
            return np.array([self.query_vectors[t] for t in texts], dtype=np.float32)
        n = len(texts)
        if list(texts) != self.texts[self.at:self.at + n]:
            raise RuntimeError(f"txtai asked for chunks {self.at}..{self.at + n} out of order")
        self.at += n
        return self.vectors[self.at - n:self.at]


def main(folder: Path) -> None:
    chunks = json.loads((folder / "chunks.json").read_text(encoding="utf-8"))
    queries = json.loads((folder / "queries.json").read_text(encoding="utf-8"))
    depth = json.loads((folder / "params.json").read_text())["depth"]
    vectors, qvectors = np.load(folder / "vectors.npy"), np.load(folder / "qvectors.npy")
    # a chunk we did not embed (an index embeds dense_per_note a note) gets a stand-in unit vector here and its
    # row is zeroed after indexing: txtai's numpy backend scores a zero row 0 and drops it as deleted, so the
    # chunk is found by BM25 alone, as in ours
    handed_vectors = vectors.copy()
    handed_vectors[[i for i, c in enumerate(chunks) if not c[2]], 0] = 1.0
    handed = HandedInVectors([c[1] for c in chunks], handed_vectors, dict(zip(queries, qvectors)))
    t0 = time.perf_counter()
    def transform(texts):          # a plain function: txtai calls any other callable once to make one
        return handed(texts)

    emb = Embeddings(method="external", transform=transform, backend="numpy", hybrid=True, content=False)
    emb.index([(i, text, None) for i, (_, text, _) in enumerate(chunks)])
    none = [i for i, c in enumerate(chunks) if not c[2]]
    emb.ann.backend[none] = 0.0
    build = time.perf_counter() - t0
    held = np.asarray(emb.ann.backend, dtype=np.float32).copy()
    held[none] = np.nan
    np.save(folder / "held.npy", held)
    handed.phase = "search"
    ranked, ms = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = emb.search(q, depth)
        ms.append((time.perf_counter() - t0) * 1000)
        ranked.append(list(dict.fromkeys(chunks[int(i)][0] for i, _ in hits)))
    (folder / "result.json").write_text(json.dumps({"ranked": ranked, "ms": ms, "build_s": build}), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
