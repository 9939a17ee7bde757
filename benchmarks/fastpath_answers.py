"""The fast path's decisions and answers on every question bench_fastpath.py reads, written down and compared,
so a change meant to make the path cheaper can show it changed nothing.

    python benchmarks/fastpath_answers.py --write FILE [--sets demo,autorag,johngrib,baekjungho] [--cache DIR]
    python benchmarks/fastpath_answers.py --against FILE [...]

Per question, with the fast path on (bench_fastpath's margin): its KeywordEvidence (first, margin, cut,
fts5_ran, agree, decided), every list the Retrieval holds (note id, chunk id, score, in order), whether it
was fast, the ranked note ids as deep as evaluation reads them (K_LIST), and the top hits' snippets.
--against compares a new run with FILE and exits 1 on the first set with a difference, naming the questions.
FILE holds question text: keep it outside the repository (a KorQuAD-free set list, but AutoRAG-ko's
questions are still not ours to commit)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_fastpath import open_set  # noqa: E402
from benchmarks.bench_peers import BenchSet  # noqa: E402



def answers(s, bs: BenchSet, margin: float) -> dict[str, dict]:
    """question -> what the fast path decided and answered (fast path on, evaluation's depth)."""
    from search_core.config import SearchConfig
    from search_core.search.ranking import K_LIST
    cfg = SearchConfig(embedder=s.embedder_name, fast_path_margin=margin)
    out = {}
    for q in bs.questions:
        r = s.retrieve_for(q.query, cfg)
        res = s.rank(r, cfg, limit_fused=K_LIST)
        e = r.evidence
        out[q.query] = {
            "evidence": None if e is None else [e.first, e.margin, e.cut, e.fts5_ran, e.agree, e.decided],
            "fast": r.fast,
            "lists": {c: [[h.note_id, h.chunk_id, h.score] for h in hits] for c, hits in sorted(r.lists.items())},
            "ranked": list(res.ranked),
            "hits": [[h.note_id, h.chunk_id, h.snippet, h.score] for h in res.hits],
            "gate": [res.gate.inject, res.gate.kind, res.gate.reason],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="demo,autorag,johngrib,baekjungho")
    ap.add_argument("--margin", type=float, default=0.2)
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/fastpath"))
    got = ap.add_mutually_exclusive_group(required=True)
    got.add_argument("--write", type=Path)
    got.add_argument("--against", type=Path)
    args = ap.parse_args()
    before = json.loads(args.against.read_text()) if args.against else None
    result = {}
    for key in args.sets.split(","):
        bs, s = open_set(key, args.cache)
        result[key] = answers(s, bs, args.margin)
        s.close()
        fast = sum(a["fast"] for a in result[key].values())
        if before is not None:
            # through JSON both ways: floats and tuples compare as the file holds them
            now = json.loads(json.dumps(result[key]))
            was = before.get(key)
            if was is None:
                sys.exit(f"{key}: {args.against} has no answers for this set; write them with --write first")
            differ = [q for q in dict.fromkeys([*was, *now]) if was.get(q) != now.get(q)]
            print(f"{key}: {len(now)} questions, {fast} on the fast path, {len(differ)} differ", flush=True)
            if differ:
                for q in differ[:5]:
                    print(f"  differs: {q!r}")
                sys.exit(1)
        else:
            print(f"{key}: {len(result[key])} questions, {fast} on the fast path", flush=True)
    if args.write:
        from search_core.files import atomic_write_text
        atomic_write_text(args.write, json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
