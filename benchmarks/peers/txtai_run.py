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
    """txtai's `transform` for the external method: texts in, our vectors out. While indexing a text is a
    chunk's; while searching, a query's (two equal texts may be a chunk and a query: the phase decides)."""

    def __init__(self, chunk_vectors: dict, query_vectors: dict):
        self.tables = {"index": chunk_vectors, "search": query_vectors}
        self.phase = "index"

    def __call__(self, texts):
        table = self.tables[self.phase]
        return np.array([table[t] for t in texts], dtype=np.float32)


def main(folder: Path) -> None:
    chunks = json.loads((folder / "chunks.json").read_text(encoding="utf-8"))
    queries = json.loads((folder / "queries.json").read_text(encoding="utf-8"))
    depth = json.loads((folder / "params.json").read_text())["depth"]
    vectors, qvectors = np.load(folder / "vectors.npy"), np.load(folder / "qvectors.npy")
    # two chunks of equal text carry equal vectors (the same passage embedded), so a text names its vector; a
    # chunk we did not embed (an index embeds dense_per_note a note) gets a stand-in unit vector here and its
    # row is zeroed after indexing: txtai's numpy backend scores a zero row 0 and drops it as deleted, so the
    # chunk is found by BM25 alone, as in ours
    stand_in = np.zeros(vectors.shape[1], np.float32)
    stand_in[0] = 1.0
    vectors_of = {}
    for (_, text, has), v in zip(chunks, vectors):
        if has:
            vectors_of[text] = v
    for _, text, has in chunks:
        vectors_of.setdefault(text, stand_in)
    handed = HandedInVectors(vectors_of, dict(zip(queries, qvectors)))
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
