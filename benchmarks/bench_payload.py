"""Characters an agent receives per turn, before and after lean payloads: the injected block (what goes into
the prompt) and the whole /prefetch answer (what the provider parses), per question of a gold set.

"before" is the old shape, rebuilt here from the same search: raw-markdown snippets and every gate feature
in the answer; "after" is what the engine composes now (search_core.recall.engine, RecallBlock.as_dict).

    python benchmarks/bench_payload.py --db runs/demo.sqlite --gold experiments/gold/demo-holdout.yaml
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from search_core.recall.block import RecallBlock, compose_block, gate_features, header_for, hit_lines, strip_frontmatter

from search_core.recall.config import RecallConfig
from search_core.search.pipeline import SNIPPET_CHARS, Searcher
from search_core.search import channels as ch
from tuner.data.gold import load_gold


def raw_snippet(searcher: Searcher, chunk_id, query: str, note_id: str) -> str:
    """The snippet as it was cut before markup cleaning (the same window rule on the raw chunk text)."""
    _, text = searcher.chunk_text(chunk_id)
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return searcher.view.notes.get(note_id, {}).get("summary", "")[:SNIPPET_CHARS]
    low = text.lower()
    positions = [p for p in (low.find(t) for t in ch.TOKEN_RE.findall(query.lower()) if len(t) >= 2) if p >= 0]
    start = max(min(positions) - 40, 0) if positions else 0
    piece = text[start:start + SNIPPET_CHARS]
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")


def measure(db: Path, gold: Path) -> dict:
    cfg = RecallConfig()
    s = Searcher(db)
    rows = []
    try:
        for q in load_gold(gold).questions:
            res = s.search(q.query)
            shown = res.hits[: cfg.max_lines]
            feats = gate_features(res)
            before_lines = tuple(f"- {h.title} ({h.note_id}): {strip_frontmatter(raw_snippet(s, h.chunk_id, res.query, h.note_id))}"
                                 .rstrip(": ") for h in shown)
            before_block = compose_block(before_lines, cfg.char_budget)
            after_block = compose_block(hit_lines(shown), cfg.char_budget, header=header_for(feats))
            ids = tuple(h.note_id for h in shown)
            before = {"block": before_block, "injected": True, "gate": feats, "stopped_by": None, "call_id": 1,
                      "error": None, "notes": list(ids)}
            after = RecallBlock(after_block, True, feats, None, 1, None, ids).as_dict()
            rows.append({"id": q.id, "block_before": len(before_block), "block_after": len(after_block),
                         "answer_before": len(json.dumps(before, ensure_ascii=False)),
                         "answer_after": len(json.dumps(after, ensure_ascii=False)),
                         "search_before": len(json.dumps(res.as_dict(explain=True), ensure_ascii=False)),
                         "search_after": len(json.dumps(res.as_dict(explain=False), ensure_ascii=False)),
                         "markup_left": sum(after_block.count(m) for m in ("[[", "](", "]: http", "[^", "<!--"))})
    finally:
        s.close()
    out = {"db": str(db), "gold": str(gold), "questions": len(rows)}
    for k in ("block_before", "block_after", "answer_before", "answer_after", "search_before", "search_after"):
        vals = [r[k] for r in rows]
        out[k] = {"mean": round(statistics.mean(vals), 1), "median": statistics.median(vals), "total": sum(vals)}
    out["markup_left"] = sum(r["markup_left"] for r in rows)
    out["rows"] = rows
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--gold", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None, help="Write the JSON here too.")
    a = ap.parse_args()
    res = measure(a.db, a.gold)
    text = json.dumps({k: v for k, v in res.items() if k != "rows"}, ensure_ascii=False, indent=2)
    print(text)
    if a.out:
        a.out.write_text(json.dumps(res, ensure_ascii=False, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
