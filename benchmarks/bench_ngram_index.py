"""What the n-gram postings (search_core/index/ngram_postings.py) cost at index time, against bm25s.

    python benchmarks/bench_ngram_index.py [--vault /work/shared/data/johngrib-wiki/_wiki] [--work /work/cache/keyword]

The whole johngrib wiki is indexed once with the tests' hashed-n-gram embedder (tests/helpers/fake_embedder.py:
the keyword tables do not depend on the vectors, and e5-small would take ~13 minutes of both cores). Then:
- build: ngram_postings.build alone over every chunk (seconds), its rows and bytes (file size with the
  tables minus without, after VACUUM);
- update: one note edited (a line appended), the incremental `index_vault` run with the n-gram lists moved,
  and ngram_postings.update moving every chunk of that note out and back in (what a title edit costs);
Wall and CPU seconds both: the machine is shared, and CPU time is the figure load does not inflate.
- bm25s: indexing the same note documents with bm25s (it has no incremental update: a change re-indexes
  everything, so its build time is also its update time).
Results: runs/bench/ngram-index.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, write_result  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vault", type=Path, default=DATA / "johngrib-wiki" / "_wiki")
    ap.add_argument("--work", type=Path, default=Path("/work/cache/keyword"))
    args = ap.parse_args()
    from search_core.index import ngram_postings
    from search_core.index.indexer import index_vault
    from search_core.index.store import atomic, connect
    from search_core.models import register_embedder
    from tests.helpers.fake_embedder import NAME, HashedNgramEmbedder
    register_embedder(NAME, HashedNgramEmbedder)

    vault = args.work / "johngrib-full-vault"
    if not vault.exists():
        shutil.copytree(args.vault, vault)
    db = args.work / "johngrib-full-hashed.sqlite"
    t0 = time.perf_counter()
    rep = index_vault(vault, db, embedder=NAME, cache=args.work / "hashed-embed-cache.sqlite")
    index_s = time.perf_counter() - t0
    conn = connect(db)
    t0, c0 = time.perf_counter(), time.process_time()
    with atomic(conn):
        terms = ngram_postings.build(conn)
    build_s, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    rows = conn.execute("SELECT count(*), sum(length(chunks)) + sum(length(tfs)) FROM ngram_postings").fetchone()
    conn.close()
    # bytes: the same file without the two tables, vacuumed, against it with them, vacuumed
    with_t, without_t = args.work / "ngram-size-with.sqlite", args.work / "ngram-size-without.sqlite"
    for dst, drop in ((with_t, False), (without_t, True)):
        shutil.copyfile(db, dst)
        c = sqlite3.connect(dst)
        if drop:
            c.execute("DROP TABLE ngram_postings")
            c.execute("DROP TABLE ngram_lengths")
            c.commit()
        c.execute("VACUUM")
        c.close()
    size_with, size_without = with_t.stat().st_size, without_t.stat().st_size
    with_t.unlink()
    without_t.unlink()
    # one note edited: the whole incremental run, then the n-gram part of such a run alone
    note = sorted(vault.rglob("*.md"))[97]
    with note.open("a", encoding="utf-8") as f:
        f.write("\n\n한 노트만 바뀌었다: 엔그램 색인 측정.\n")
    t0 = time.perf_counter()
    index_vault(vault, db, embedder=NAME, cache=args.work / "hashed-embed-cache.sqlite")
    update_s = time.perf_counter() - t0
    conn = connect(db)
    nid = str(note.relative_to(vault))[:-3]
    ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE note_id = ?", (nid,))]
    docs = ngram_postings.chunk_docs(conn, ids)
    t0, c0 = time.perf_counter(), time.process_time()
    with atomic(conn):
        ngram_postings.update(conn, docs, docs)       # the note's chunks out and back in: a title edit moves that
    ngram_update_s, ngram_update_cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"vault": str(args.vault), "notes": rep.notes, "chunks": rep.chunks, "index_s_hashed_embedder": round(index_s, 1),
           "ngram_build_s": round(build_s, 2), "ngram_build_cpu_s": round(build_cpu, 2), "ngram_terms": terms, "posting_bytes": rows[1],
           "file_mb_with": round(size_with / 2**20, 1), "file_mb_without": round(size_without / 2**20, 1),
           "ngram_mb": round((size_with - size_without) / 2**20, 1),
           "one_note_update_s": round(update_s, 2), "whole_note_ngram_update_s": round(ngram_update_s, 3),
           "whole_note_ngram_update_cpu_s": round(ngram_update_cpu, 3),
           "note_chunks": len(ids)}
    try:
        import bm25s
        from benchmarks.bench_peers import char_tokens, note_documents
        _, texts = note_documents(conn)
        t0, c0 = time.perf_counter(), time.process_time()
        model = bm25s.BM25()
        model.index([char_tokens(d) for d in texts], show_progress=False)
        out["bm25s_build_s"] = round(time.perf_counter() - t0, 2)
        out["bm25s_build_cpu_s"] = round(time.process_time() - c0, 2)
        out["bm25s_update_s"] = out["bm25s_build_s"]
    except ImportError:
        out["bm25s"] = "not installed: pip install -e '.[bench]'"
    conn.close()
    print(out)
    print("written", write_result("ngram-index", out))


if __name__ == "__main__":
    main()
