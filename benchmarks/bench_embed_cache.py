"""What a large embedding cache costs on disk and to open: a cache of N e5-small-sized vectors (384 floats) is
built once at FILE, then EmbeddingCache's first use (the header read; a file in the layout before is migrated by
the first) is timed 5 times.

    python benchmarks/bench_embed_cache.py [--rows 500000] [--file /work/cache/NAME/cache500k.sqlite]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from search_core.index.embed_cache import EmbeddingCache, text_hash  # noqa: E402

UNBOUNDED = 10**12           # the build and the opens must not evict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--file", required=True, help="where the cache is built (outside the repo)")
    args = ap.parse_args()
    path = Path(args.file)
    if not path.exists():
        c = EmbeddingCache(path, max_bytes=UNBOUNDED)
        rng = np.random.default_rng(0)
        for b in range(0, args.rows, 5000):
            c.put_many("m", {text_hash(f"t {i}"): rng.standard_normal(384).astype(np.float32)
                             for i in range(b, min(args.rows, b + 5000))})
        c.close()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        c = EmbeddingCache(path, max_bytes=UNBOUNDED)
        c.conn
        times.append(time.perf_counter() - t0)
        c.close()
    print(f"{args.rows} rows, {path.stat().st_size // 2**20} MB: open {[round(t, 2) for t in times]} s, "
          f"median {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
