"""The vaults of benchmarks/bench_scale.py: past one copy of the text no two chunks embed the same text (the
embedding cache cannot shortcut a copy), every chunk of a note gets a vector, and the links resolve."""

from __future__ import annotations

import re

import pytest

from benchmarks.bench_scale import DATA, make_vault, pieces
from search_core.config import ChunkConfig
from search_core.ingest.chunk import chunk_note
from search_core.ingest.graph import LinkResolver
from search_core.ingest.vault import list_vault, read_note

needs_data = pytest.mark.skipif(not (DATA / "johngrib-wiki").exists(), reason=f"no data at {DATA}")


@needs_data
def test_a_vault_past_one_copy_embeds_no_text_twice_and_its_links_resolve(tmp_path):
    every = pieces(DATA)
    pool = [p for src in ("wiki", "autorag", "korquad") for p in [q for q in every if q.source == src][:4]]
    made = make_vault(3 * sum(p.chunks for p in pool), tmp_path / "vault", DATA, pool=pool)
    assert made["copies"] == 3 and made["notes"] == 36
    notes = [read_note(vf) for vf in list_vault(tmp_path / "vault")]
    assert len(notes) == 36
    texts = [c.embed_text() for n in notes for c in chunk_note(n)]
    assert abs(len(texts) - made["estimated_chunks"]) <= 0.05 * len(texts)     # "about" the target
    assert len(set(texts)) == len(texts)
    # a paragraph is never split, so a long one makes a note of more chunks than get vectors: few do
    with_vector = sum(min(len(chunk_note(n)), ChunkConfig().dense_per_note) for n in notes)
    assert with_vector >= 0.8 * len(texts)       # 95 % in the 100,000-chunk vault, 85 % in this sample
    resolver = LinkResolver([n.id for n in notes])
    ours = [(n.id, t) for n in notes                        # the links make_vault writes (the text has its own)
            for line in (tmp_path / "vault" / f"{n.id}.md").read_text(encoding="utf-8").splitlines()
            if line.startswith(("다음: ", "함께 읽기: ")) for t in re.findall(r"\[\[([^\]]+)\]\]", line)]
    assert len(ours) >= 36 and all(resolver.resolve(src, t) is not None for src, t in ours)
    again = make_vault(3 * sum(p.chunks for p in pool), tmp_path / "vault", DATA, pool=pool)
    assert again == made                                       # the recipe matches: the vault is reused


def test_the_slope_per_100k_chunks_is_read_between_the_two_largest_sizes_a_figure_has():
    from benchmarks.bench_scale import slope_per_100k
    sizes = [{"chunks": 1_016, "target_chunks": 1000, "cpu": 0.5},
             {"chunks": 10_202, "target_chunks": 10000, "cpu": 0.6},
             {"chunks": 102_169, "target_chunks": 100000, "cpu": 1.7},
             {"chunks": 567_010, "target_chunks": 555000, "cpu": None}]
    # (1.7 - 0.6) / (102,169 - 10,202) * 100,000 = 1.19609...
    cost, a, b = slope_per_100k(sizes, lambda r: r["cpu"])
    assert (a, b) == (10000, 100000)
    assert abs(cost - 1.1960807) < 1e-6
    assert slope_per_100k(sizes[:1], lambda r: r["cpu"]) is None
