"""Fake-miss audit: for every miss, the top results that are probably right answers the gold list forgot.

A top-5 note is flagged (never counted as a hit) when it is
  - a near-duplicate of a gold note: Jaccard of character 5-gram shingles >= 0.5 over the note texts;
  - linked to or from a gold note;
  - a strong dense match: its cosine with the query clears the gate and beats every gold note's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NEAR_DUP_JACCARD = 0.5     # an old draft that repeats most of a note scores 0.6-0.9; related notes < 0.2
SHINGLE = 5


def shingles(text: str, n: int = SHINGLE) -> set[str]:
    t = re.sub(r"\s+", " ", text.lower()).strip()
    return {t[i:i + n] for i in range(max(len(t) - n + 1, 1))} if t else set()


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _note_text(searcher, nid: str, cache: dict) -> set[str]:
    if nid not in cache:
        rows = searcher.conn.execute("SELECT text FROM chunks WHERE note_id = ? ORDER BY ord", (nid,)).fetchall()
        cache[nid] = shingles("\n".join(r[0] for r in rows))
    return cache[nid]


@dataclass(frozen=True)
class GoldGap:
    """A top-5 note of a missed question that is probably a right answer its gold list forgot, and why."""
    question: str                # the question's id
    query: str
    gold: tuple[str, ...]
    note_id: str
    rank: int
    reasons: tuple[str, ...]     # near-duplicate, links, strong dense match: each with its figures

    def to_json(self) -> dict:
        return {"question": self.question, "query": self.query, "gold": list(self.gold), "note_id": self.note_id,
                "rank": self.rank, "reasons": list(self.reasons)}

    @classmethod
    def from_json(cls, d: dict) -> "GoldGap":
        return cls(d["question"], d["query"], tuple(d["gold"]), d["note_id"], d["rank"], tuple(d["reasons"]))


def possible_gold_gaps(searcher, rows, cfg) -> list[GoldGap]:
    view = searcher.view
    threshold = cfg.threshold if cfg.threshold is not None else searcher.embedder.default_threshold
    text_cache: dict = {}
    gaps = []
    for r in rows:
        if r.level == "probe" or (r.first_rank is not None and r.first_rank <= 5):
            continue
        qvec = None
        for nid in r.ranked[:5]:
            if nid in r.gold:
                continue
            reasons = []
            for g in r.gold:
                if g not in view.notes:
                    continue
                j = jaccard(_note_text(searcher, nid, text_cache), _note_text(searcher, g, text_cache))
                if j >= NEAR_DUP_JACCARD:
                    reasons.append(f"near-duplicate of gold {g} (shingle Jaccard {j:.2f})")
                if g in view.links_out.get(nid, ()):
                    reasons.append(f"links to gold {g}")
                if nid in view.links_out.get(g, ()):
                    reasons.append(f"linked from gold {g}")
            if qvec is None:
                qvec = searcher.query_cache.embed(searcher.embedder, [r.query])[0]
            cos = view.cosine(qvec, nid, view.best_chunk(qvec, nid))
            gold_cos = max((view.cosine(qvec, g, view.best_chunk(qvec, g)) for g in r.gold if g in view.notes),
                           default=0.0)
            if cos >= threshold and cos > gold_cos:
                reasons.append(f"strong dense match (cosine {cos:.3f} >= gate {threshold:.3f}, best gold {gold_cos:.3f})")
            if reasons:
                gaps.append(GoldGap(r.id, r.query, tuple(r.gold), nid, r.ranked.index(nid) + 1, tuple(reasons)))
    return gaps
