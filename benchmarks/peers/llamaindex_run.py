"""LlamaIndex's hybrid retrieval over vectors and chunks handed in: run by benchmarks/bench_peers.py with the
python of a venv of its own (llama-index-core, llama-index-retrievers-bm25), never imported into ours.

    VENV/bin/python llamaindex_run.py FOLDER

FOLDER holds chunks.json ([[note id, text, 1 if it has a vector], ...]), vectors.npy (one row per chunk, zeros
where it has none), queries.json ([text, ...]),
qvectors.npy (one row per query) and params.json ({"depth": chunks each retriever returns}). Written back:
result.json ({"ranked": per query the note ids in order, "ms": per query, "build_s"}) and held.npy (each chunk's
vector as the vector store holds it, for the caller's cosine check: NaN where the store kept none).

The system: TextNodes, those with a vector carrying it, in a VectorStoreIndex (SimpleVectorStore, exact cosine),
BM25Retriever.from_defaults over the same nodes (its defaults: bm25s, English stemmer and stop words, words of
two or more characters), fused by QueryFusionRetriever in reciprocal_rerank mode (RRF, k 60) with one query
(num_queries 1: no LLM writes extra queries). Nothing is embedded here: a query's vector is the one handed in.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.retrievers.bm25 import BM25Retriever


class HandedInVectors(BaseEmbedding):
    """The query vectors the caller computed, looked up by the query's text: anything else asked is an error
    (every chunk carries its vector already, so the index never asks)."""

    table: dict = {}

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.table[query]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self.table[query]

    def _get_text_embedding(self, text: str) -> list[float]:
        raise RuntimeError("a chunk without its vector reached the embedding model")


def main(folder: Path) -> None:
    chunks = json.loads((folder / "chunks.json").read_text(encoding="utf-8"))
    queries = json.loads((folder / "queries.json").read_text(encoding="utf-8"))
    depth = json.loads((folder / "params.json").read_text())["depth"]
    vectors, qvectors = np.load(folder / "vectors.npy"), np.load(folder / "qvectors.npy")
    embed = HandedInVectors(table={q: v.tolist() for q, v in zip(queries, qvectors)})
    Settings.embed_model, Settings.llm = embed, MockLLM()
    t0 = time.perf_counter()
    # the chunk's place in metadata keeps two chunks of equal text apart (RRF matches nodes by hash), and is
    # kept out of the text BM25 reads
    nodes = [TextNode(id_=f"c{i}", text=text, embedding=vectors[i].tolist() if has else None,
                      metadata={"chunk": i, "note": nid},
                      excluded_embed_metadata_keys=["chunk", "note"], excluded_llm_metadata_keys=["chunk", "note"])
             for i, (nid, text, has) in enumerate(chunks)]
    # the dense side holds the chunks we embedded (an index embeds dense_per_note a note), BM25 reads them all
    index = VectorStoreIndex([n for n in nodes if n.embedding is not None], embed_model=embed)
    vector = index.as_retriever(similarity_top_k=depth)
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=min(depth, len(nodes)))
    fusion = QueryFusionRetriever([vector, bm25], mode="reciprocal_rerank", similarity_top_k=depth,
                                  num_queries=1, use_async=False, llm=MockLLM())
    build = time.perf_counter() - t0
    stored = index.vector_store.data.embedding_dict      # a node of empty text is not stored: NaN
    held = np.array([stored.get(f"c{i}", [np.nan] * vectors.shape[1]) for i in range(len(nodes))], dtype=np.float32)
    np.save(folder / "held.npy", held)
    ranked, ms = [], []
    for q, qv in zip(queries, qvectors):
        t0 = time.perf_counter()
        hits = fusion.retrieve(QueryBundle(query_str=q, embedding=qv.tolist()))
        ms.append((time.perf_counter() - t0) * 1000)
        ranked.append(list(dict.fromkeys(h.node.metadata["note"] for h in hits)))
    (folder / "result.json").write_text(json.dumps({"ranked": ranked, "ms": ms, "build_s": build}), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
