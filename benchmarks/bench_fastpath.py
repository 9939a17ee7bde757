"""The fast path (SearchConfig.fast_path_margin) against every channel, and against bm25s-char, in one run.

    python benchmarks/bench_fastpath.py [--sets demo,autorag,johngrib,baekjungho] [--margin 0.2]
        [--cache /work/cache/fastpath]

Every question is searched twice through Searcher.search, interleaved (fast path off, then on), warm, the
query cache emptied before each search; bm25s-char (benchmarks/bench_peers.py) answers the same questions
in the same run. Reported per set and part (tune: what the margin was chosen on; holdout: not looked at
when choosing): the share of answerable questions the fast path answers, hit@5 / MRR@10 of the fast-path
answers beside the full path's on the same questions, the whole set with the fast path on and off, the
probes (questions the vault cannot answer) the fast path takes and so injects, against the probes the gate
model injects with the fast path off; warm p50 of the fast-path questions beside bm25s-char's p50 on the same
questions, and the p95 of every question with the fast path on and off. Beside the whole search's p50 on
the fast-path questions: the check's own (the n-gram list, and FTS5 when the margin holds) and the n-gram
list's alone on the same questions, the part that does what bm25s does; the n-gram lists' size in memory.
Those p50s time each search once, right after the full path's search of the same question (whose model run
leaves the CPU caches cold) while bm25s runs its questions in a tight loop; so the ratio to bm25s is taken in
a pass of its own (`--reps`, "paired"), the same protocol for both, three ways: in turn (each fast-path question
asked of one and then the other), apart (each system's own loop over the questions, so each keeps the CPU's
caches to itself, as bm25s does above) and after other work (as in turn, with OTHER_WORK_BYTES of memory written
and read, untimed, before each question: what a process that did anything else between two questions, an agent's
turn, finds in the caches), `--reps` rounds, each question's median CPU ms, the p50 of those.

Sets: the demo (tune: demo-tune, demo-gate-tune, demo-probes; holdout: demo-holdout, demo-gate-holdout,
demo-gate-holdout2), AutoRAG-ko (seeded halves), the johngrib subset vault of bench_peers (tune:
johngrib-tune; holdout: johngrib-holdout, -blind, -week, -final, -last; johngrib-next stays unread) and
BAEKJungHo's wiki (its tune set only; its holdout stays unsearched). Indexes are read from --cache (built
there by bench_peers.py's layout when missing). Results: runs/bench/fastpath.json and a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_peers import JOHNGRIB_SETS, BenchSet, build_index, halves, johngrib_set  # noqa: E402
from benchmarks.common import DATA, ROOT, summary, write_result  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))
VAULTS = Path(os.environ.get("AUTORESEARCH_VAULTS", "/work/vaults"))
# the memory the "after other work" protocol writes and reads before each timed question: 4x a core's L2 here (2 MiB;
# the L3 is 300 MiB, shared by the host). 1 MiB already moved bm25s-char's p50 0.20 -> 0.40 ms on the demo, 8 to
# 0.58, 64 to 0.63 (ours 0.60, 0.65, 0.69): what is timed is the cold start of a question's lists, not the size
OTHER_WORK_BYTES = 8 << 20
DEMO_PARTS = {"tune": ("demo-tune", "demo-gate-tune", "demo-probes"),
              "holdout": ("demo-holdout", "demo-gate-holdout", "demo-gate-holdout2")}


def _gold(path: Path):
    from tuner.data.gold import load_gold
    return load_gold(path).questions


def demo_set() -> BenchSet:
    qs, parts = [], []
    for part, names in DEMO_PARTS.items():
        for name in names:
            got = _gold(ROOT / "experiments" / "gold" / f"{name}.yaml")
            qs += got
            parts += [part] * len(got)
    return BenchSet("demo", ROOT / "experiments" / "demo-vault", tuple(qs), parts=tuple(parts))


def autorag_set() -> BenchSet:
    qs = tuple(_gold(DATA / "autorag-ko" / "beir"))
    return BenchSet("autorag-ko", DATA / "autorag-ko" / "beir", qs, parts=halves(len(qs)))


def johngrib_with_probes(cache: Path) -> BenchSet:
    """bench_peers' subset vault, every question of the spent sets (probes too): tune, and the rest held out."""
    bs = johngrib_set(cache, 100)
    qs, parts = [], []
    for name in JOHNGRIB_SETS:
        got = _gold(ROOT / "benchmarks" / "sets" / f"johngrib-{name}.yaml")
        qs += got
        parts += ["tune" if name == "tune" else "holdout"] * len(got)
    return BenchSet("johngrib", bs.vault, tuple(qs), bs.note, tuple(parts))


def baekjungho_set() -> BenchSet:
    qs = _gold(ROOT / "benchmarks" / "sets" / "baekjungho-tune.yaml")
    return BenchSet("baekjungho-wiki", VAULTS / "baekjungho-wiki" / "_wiki", tuple(qs), parts=("tune",) * len(qs))


def _rank_metrics(ranked, gold) -> tuple[float, float]:
    from tuner.evaluation.metrics import hit_at_k, reciprocal_rank
    return hit_at_k(ranked, gold, 5), reciprocal_rank(ranked, gold, 10)


def _quality(rows, key) -> dict:
    if not rows:
        return {"n": 0}
    m = [_rank_metrics(r[key], r["gold"]) for r in rows]
    return {"n": len(rows), "hit@5": round(sum(h for h, _ in m) / len(m), 4),
            "mrr@10": round(sum(x for _, x in m) / len(m), 4)}


def run_set(s, bs: BenchSet, margin: float) -> list[dict]:
    from search_core.config import SearchConfig
    off = SearchConfig(embedder=s.embedder_name)
    on = off.replace(fast_path_margin=margin)
    from search_core.search import channels as ch
    s.warm_up()
    ch.ngram_sparse(s.conn, s.view, "warm-up", off.depth)     # the n-gram lists load once per view, untimed
    rows = []
    for q, part in zip(bs.questions, bs.parts):
        row = {"part": part, "gold": tuple(q.gold), "level": q.level}
        for name, cfg in (("off", off), ("on", on)):
            s.query_cache.clear()
            t0 = time.perf_counter()
            res = s.search(q.query, cfg)
            row[f"ms_{name}"] = (time.perf_counter() - t0) * 1000
            row[name] = list(res.ranked)
            row[f"inject_{name}"] = res.gate.inject
            if name == "on":
                row["fast"] = res.retrieval.fast
                row["ms_check"] = res.timings_ms.get("fast_check")
        t0 = time.perf_counter()
        ch.ngram_sparse(s.conn, s.view, q.query, off.depth)
        row["ms_ngram"] = (time.perf_counter() - t0) * 1000
        rows.append(row)
    return rows


def report(rows: list[dict], bm25: dict) -> dict:
    out = {}
    for part in dict.fromkeys(r["part"] for r in rows):
        idx = [i for i, r in enumerate(rows) if r["part"] == part]
        ans = [rows[i] for i in idx if rows[i]["gold"]]
        probes = [rows[i] for i in idx if not rows[i]["gold"]]
        fast = [r for r in ans if r["fast"]]
        fast_i = [i for i in idx if rows[i]["fast"]]
        bm = [bm25["_ms"][i] for i in fast_i]
        out[part] = {
            "answerable": len(ans), "fast": len(fast), "share": round(len(fast) / len(ans), 3) if ans else None,
            "fast_path_answers": _quality(fast, "on"), "full_path_same_questions": _quality(fast, "off"),
            "full_path_rest": _quality([r for r in ans if not r["fast"]], "off"),
            "all_on": _quality(ans, "on"), "all_off": _quality(ans, "off"),
            "probes": len(probes), "probes_fast": sum(r["fast"] for r in probes),
            "probes_injected_off": sum(r["inject_off"] for r in probes),
            "probes_injected_on": sum(r["inject_on"] for r in probes),
            "ms_fast_on": summary([rows[i]["ms_on"] for i in fast_i]) if fast_i else None,
            "ms_fast_check": summary([rows[i]["ms_check"] for i in fast_i]) if fast_i else None,
            "ms_ngram_same": summary([rows[i]["ms_ngram"] for i in fast_i]) if fast_i else None,
            "ms_bm25s_same": summary(bm) if bm else None,
            "ms_all_on": summary([rows[i]["ms_on"] for i in idx]),
            "ms_all_off": summary([rows[i]["ms_off"] for i in idx]),
        }
    return out


# the sets this script and its companions (fastpath_steps.py, fastpath_answers.py) read, by key: the index name
# under --cache (bench_peers' layout)
SET_DBS = {"demo": "demo", "autorag": "autorag-ko", "johngrib": "johngrib", "baekjungho": "baekjungho-wiki"}


def open_set(key: str, cache: Path):
    """(the BenchSet, a Searcher on its index under `cache`, built there first when missing)."""
    from search_core.search.pipeline import Searcher
    makers = {"demo": demo_set, "autorag": autorag_set, "johngrib": lambda: johngrib_with_probes(cache),
              "baekjungho": baekjungho_set}
    if key not in makers:
        raise SystemExit(f"unknown set {key!r}; sets: {', '.join(makers)}")
    bs = makers[key]()
    db = cache / f"{SET_DBS[key]}.sqlite"
    if not db.exists():
        build_index(BenchSet(SET_DBS[key], bs.vault, ()), cache)
    return bs, Searcher(db)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="demo,autorag,johngrib,baekjungho")
    ap.add_argument("--margin", type=float, default=0.2)
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/fastpath"))
    ap.add_argument("--out", default="fastpath")
    ap.add_argument("--reps", type=int, default=7, help="rounds of the paired timing pass (0: none)")
    args = ap.parse_args()
    results = {}
    for key in args.sets.split(","):
        bs, s = open_set(key, args.cache)
        rows = run_set(s, bs, args.margin)
        bm = {"_ms": _bm25s_times(s, bs.questions)}
        paired = paired_times(s, bs, rows, args.margin, args.reps) if args.reps else {}
        ngram = s.view.ngram_index()
        memory = {"terms_held": ngram.terms_held, "mb": round(ngram.nbytes / 2**20, 1)}   # the lists the set read
        s.close()
        results[bs.name] = {"questions": len(bs.questions), "margin": args.margin, "note": bs.note,
                            "ngram_in_memory": memory, "parts": report(rows, bm), "paired": paired}
        for part, r in results[bs.name]["parts"].items():
            print(f"{bs.name} {part}: {r}", flush=True)
    out = write_result(args.out, results)
    print("\n" + table(results) + "\n\n" + paired_table(results) + "\nwritten", out)


def paired_table(results: dict) -> str:
    lines = ["| set, part | fast-path questions | " + " | ".join(
        f"{proto}: ours / bm25s-char p50 (CPU ms), ratio" for proto in PROTOCOLS) + " |",
        "|---|---|" + "---|" * len(PROTOCOLS)]
    for name, r in results.items():
        for part, p in r.get("paired", {}).items():
            cells = [f"{p[k]['ours_p50_ms']:.3f} / {p[k]['bm25s_p50_ms']:.3f}, {p[k]['ratio']:.2f}x"
                     for k in PROTOCOLS if k in p]
            lines.append(f"| {name} {part} | {p['questions']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _bm25s_answer(s):
    """The bm25s-char peer as one call per question: bench_peers.run_bm25s's documents, tokens and model."""
    import bm25s
    from benchmarks.bench_peers import char_tokens, note_documents
    ids, docs = note_documents(s.conn)
    model = bm25s.BM25()
    model.index([char_tokens(d) for d in docs], show_progress=False)
    vocab = model.vocab_dict

    def answer(query: str) -> None:
        toks = [t for t in char_tokens(query) if t in vocab]
        if toks:
            model.retrieve([toks], k=min(10, len(ids)), show_progress=False, n_threads=1)
    return answer


def _bm25s_times(s, qs) -> list[float]:
    """Per-question warm latency of the bm25s-char peer, each question once (its summary keeps no per-question
    times)."""
    answer = _bm25s_answer(s)
    ms = []
    for q in qs:
        t0 = time.perf_counter()
        answer(q.query)
        ms.append((time.perf_counter() - t0) * 1000)
    return ms


PROTOCOLS = ("in turn", "apart", "after other work")


class OtherWork:
    """Memory a process touches between two questions: `nbytes` written and read, so the caches hold it and not
    the last question's lists."""

    def __init__(self, nbytes: int):
        import numpy as np
        self._np, self._buf = np, np.zeros(nbytes // 8)

    def __call__(self) -> float:
        self._np.add(self._buf, 1.0, out=self._buf)
        return float(self._buf[::512].sum())


def paired_times(s, bs: BenchSet, rows: list[dict], margin: float, reps: int) -> dict:
    """Per part, over the questions the fast path answered: the p50 of each question's median CPU ms over
    `reps` rounds, ours (the whole `search`, fast path on) and bm25s-char's, asked in turn in each round (the
    process's CPU time: a preemption on a busy machine does not count against either)."""
    import statistics
    from search_core.config import SearchConfig
    on = SearchConfig(embedder=s.embedder_name, fast_path_margin=margin)
    bm25 = _bm25s_answer(s)
    fast = [(r["part"], q.query) for q, r in zip(bs.questions, rows) if r["fast"]]
    systems = {"ours": lambda q: s.search(q, on), "bm25s": bm25}

    other_work = OtherWork(OTHER_WORK_BYTES)

    def timed(fn, q, into):
        t0 = time.process_time()
        fn(q)
        into.setdefault(q, []).append((time.process_time() - t0) * 1000)

    # three protocols, all warm (models and lists loaded): in turn (each question asked of one, then the other:
    # each finds the CPU's caches as the other left them), apart (each system's own loop over the questions,
    # caches its own) and after other work (in turn, the caches filled with something else before each question)
    times = {(proto, name): {} for proto in PROTOCOLS for name in systems}
    for _ in range(reps):
        for _, q in fast:
            for name, fn in systems.items():
                timed(fn, q, times[("in turn", name)])
    for name, fn in systems.items():
        for _ in range(reps):
            for _, q in fast:
                timed(fn, q, times[("apart", name)])
    for _ in range(reps):
        for _, q in fast:
            for name, fn in systems.items():
                other_work()
                timed(fn, q, times[("after other work", name)])
    out = {}
    for part in dict.fromkeys(p for p, _ in fast):
        qs = [q for p, q in fast if p == part]
        out[part] = {"questions": len(qs), "reps": reps, "other_work_bytes": OTHER_WORK_BYTES}
        for proto in PROTOCOLS:
            a, b = (statistics.median(statistics.median(times[(proto, n)][q]) for q in qs) for n in systems)
            out[part][proto] = {"ours_p50_ms": round(a, 3), "bm25s_p50_ms": round(b, 3), "ratio": round(a / b, 2)}
    return out


def table(results: dict) -> str:
    lines = ["| set, part | fast / answerable | fast-path answers | full path, same q | whole set on / off | "
             "probes fast (gate off-path injects) | p50 search / check / n-gram list / bm25s, fast q (ms) | "
             "p95 on / off (ms) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        for part, p in r["parts"].items():
            f, g = p["fast_path_answers"], p["full_path_same_questions"]
            q = lambda d: f"{d['hit@5']:.3f} / {d['mrr@10']:.3f}" if d.get("n") else "-"   # noqa: E731
            p50 = (f"{p['ms_fast_on']['p50']:.1f} / {p['ms_fast_check']['p50']:.1f} / {p['ms_ngram_same']['p50']:.2f} / "
                   f"{p['ms_bm25s_same']['p50']:.2f}" if p["ms_fast_on"] else "-")
            lines.append(f"| {name} {part} | {p['fast']}/{p['answerable']} | {q(f)} | {q(g)} | "
                         f"{q(p['all_on'])} ; {q(p['all_off'])} | {p['probes_fast']}/{p['probes']} "
                         f"({p['probes_injected_off']} -> {p['probes_injected_on']}) | {p50} | "
                         f"{p['ms_all_on']['p95']:.0f} / {p['ms_all_off']['p95']:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
