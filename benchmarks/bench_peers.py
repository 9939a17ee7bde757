"""Our search side by side with peer retrievers on the same questions and the same e5-small vectors.

    python benchmarks/bench_peers.py [--sets demo,autorag,korquad,johngrib] [--cache /work/cache/keyword]
        [--korquad-questions 300] [--johngrib-sample 100] [--configs default,ngram]

Systems, each scored on note-level hit@5 and MRR@10 (tuner.evaluation.metrics) with warm per-query latency
(p50/p95, ms; every query's vector embedded anew, the query cache emptied before each search):
- ours: the shipped default SearchConfig through Searcher.search, the final order exactly as `search` returns;
  `--configs` adds variants by name (CONFIGS below), e.g. the keyword index that is not the default;
- dense: our dense channel alone (the query embedded, then search_core.search.channels.dense);
- ngram-alone, fts5-alone: our sparse channel alone over each keyword index (SearchConfig.keyword_index);
- bm25s-char: BM25 (bm25s, Lucene idf, k1 1.5, b 0.75) over one document per note (title + every chunk),
  tokens = character 2- and 3-grams inside each word with Hangul, other words whole and lower-cased.
  Needs `pip install bm25s` (skipped with a message without it).
LlamaIndex and txtai are not run here: this venv does not carry them (skipped with a message).

Sets: the demo (demo-tune + demo-holdout on experiments/demo-vault), AutoRAG-ko (BEIR, 114 questions),
a seeded KorQuAD dev sample (its first articles, questions sampled; KorQuAD is CC BY-ND, so only aggregates
are written), and the johngrib wiki's spent sets (tune, holdout, blind, week, final, last) over a subset
vault: every gold note of those sets (436) plus a seeded sample of --johngrib-sample others
(a full index takes ~13 minutes of both cores). Indexes, the subset vault and the KorQuAD sample live under
--cache, outside the repository, and are reused. Results: runs/bench/peers.json, and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, summary, write_result  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))     # a worktree's ROOT.parent is not the data's
JOHNGRIB_SETS = ("tune", "holdout", "blind", "week", "final", "last")   # spent sets only
HANGUL = re.compile(r"[\uac00-\ud7a3]")
WORD = re.compile(r"\w+", re.UNICODE)
# config variants by name: SearchConfig changes on top of the shipped default
# ("fts5": the default without the n-gram list beside FTS5's, the default before w_ngram)
CONFIGS = {"default": {}, "ngram": {"keyword_index": "ngram", "w_ngram": 0.0}, "fts5": {"w_ngram": 0.0},
           "both": {"keyword_index": "both", "w_ngram": 0.0}, "fast": {"fast_path_margin": 0.2}}


@dataclass(frozen=True)
class BenchSet:
    name: str
    vault: Path
    questions: tuple        # tuner.data.gold.Question, answerable only
    note: str = ""
    parts: tuple = ()       # per question, the part it belongs to: "tune" or "holdout" (or a johngrib set name)


def halves(n: int, seed: int = 0) -> tuple:
    """A seeded tune/holdout split of n questions, for sets that ship none."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    tune = set(order[:n // 2])
    return tuple("tune" if i in tune else "holdout" for i in range(n))


def char_tokens(text: str) -> list[str]:
    """The bm25s peer's tokens: 2- and 3-grams inside a word with Hangul, other words whole, lower-cased."""
    out = []
    for w in WORD.findall(text.lower()):
        if HANGUL.search(w) and len(w) > 2:
            out += [w[i:i + 2] for i in range(len(w) - 1)] + [w[i:i + 3] for i in range(len(w) - 2)]
        else:
            out.append(w)
    return out


# -- sets ------------------------------------------------------------------------------------------------

def demo_set() -> BenchSet:
    from tuner.data.gold import load_gold
    qs, parts = [], []
    for name in ("tune", "holdout"):
        got = load_gold(ROOT / "experiments" / "gold" / f"demo-{name}.yaml").answerable()
        qs += got
        parts += [name] * len(got)
    return BenchSet("demo", ROOT / "experiments" / "demo-vault", tuple(qs), parts=tuple(parts))


def autorag_set() -> BenchSet:
    from tuner.data.gold import load_gold
    beir = DATA / "autorag-ko" / "beir"
    qs = tuple(load_gold(beir).answerable())
    return BenchSet("autorag-ko", beir, qs, parts=halves(len(qs)))


def korquad_set(cache: Path, n_questions: int, n_articles: int = 40, seed: int = 7) -> BenchSet:
    """The first `n_articles` articles of KorQuAD dev (written once to the cache), `n_questions` of their
    questions sampled with `seed`."""
    from tuner.data.gold import load_gold
    sample = cache / f"korquad-dev-{n_articles}.json"
    if not sample.exists():
        doc = json.loads((DATA / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json").read_text(encoding="utf-8"))
        doc["data"] = doc["data"][:n_articles]
        sample.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    qs = list(load_gold(sample).answerable())
    random.Random(seed).shuffle(qs)
    qs, total = qs[:n_questions], len(qs)
    return BenchSet("korquad-dev", sample, tuple(qs), parts=halves(len(qs)),
                    note=f"{n_articles} articles, {len(qs)} of their {total} questions (seed {seed})")


def johngrib_set(cache: Path, n_sample: int, seed: int = 7) -> BenchSet:
    from tuner.data.gold import load_gold
    wiki = DATA / "johngrib-wiki" / "_wiki"
    qs, parts = [], []
    for name in JOHNGRIB_SETS:
        got = load_gold(ROOT / "benchmarks" / "sets" / f"johngrib-{name}.yaml").answerable()
        qs += got
        parts += [name] * len(got)
    gold = sorted({g for q in qs for g in q.gold})
    every = sorted(str(p.relative_to(wiki))[:-3] for p in wiki.rglob("*.md"))
    rest = [n for n in every if n not in set(gold)]
    random.Random(seed).shuffle(rest)
    chosen = sorted(set(gold) | set(rest[:n_sample]))
    vault = cache / f"johngrib-subset-{n_sample}" / "_wiki"
    if not vault.exists():
        tmp = vault.parent / "_wiki.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        for nid in chosen:
            dst = tmp / f"{nid}.md"
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(wiki / f"{nid}.md", dst)
        tmp.rename(vault)
    return BenchSet("johngrib", vault, tuple(qs), parts=tuple(parts),
                    note=f"subset vault: {len(chosen)} of {len(every)} notes ({len(gold)} gold + a seeded sample of {n_sample}, "
                         f"seed {seed}), questions of the spent sets {', '.join(JOHNGRIB_SETS)}")


# -- systems ---------------------------------------------------------------------------------------------

def _score(rankings: list[list[str]], qs) -> dict:
    from tuner.evaluation.metrics import hit_at_k, mean, reciprocal_rank
    return {"hit@5": round(mean([hit_at_k(r, q.gold, 5) for r, q in zip(rankings, qs)]), 4),
            "mrr@10": round(mean([reciprocal_rank(r, q.gold, 10) for r, q in zip(rankings, qs)]), 4)}


def run_ours(s, qs, cfg) -> dict:
    s.warm_up()
    ranked, ms = [], []
    for q in qs:
        s.query_cache.clear()                        # a new question: its vector is not cached
        t0 = time.perf_counter()
        res = s.search(q.query, cfg)
        ms.append((time.perf_counter() - t0) * 1000)
        ranked.append(list(res.ranked))
    return {**_score(ranked, qs), "ms": summary(ms), "_ranked": ranked}


def run_dense(s, qs) -> dict:
    from search_core.search import channels as ch
    ranked, ms = [], []
    for q in qs:
        t0 = time.perf_counter()
        vec = s.embedder.embed([q.query], is_query=True)[0]
        hits = ch.dense(s.view, vec, 50)
        ms.append((time.perf_counter() - t0) * 1000)
        ranked.append([h.note_id for h in hits])
    return {**_score(ranked, qs), "ms": summary(ms), "_ranked": ranked}


def run_keyword_alone(s, qs, index: str) -> dict:
    """Our sparse channel alone over one keyword index (no embedding): the n-gram BM25 or FTS5 trigrams."""
    from search_core.search import channels as ch
    ranked, ms = [], []
    for q in qs:
        t0 = time.perf_counter()
        hits = ch.keyword(s.conn, s.view, q.query, 50, index)
        ms.append((time.perf_counter() - t0) * 1000)
        ranked.append([h.note_id for h in hits])
    return {**_score(ranked, qs), "ms": summary(ms), "_ranked": ranked}


def note_documents(conn) -> tuple[list[str], list[str]]:
    """(note ids, one text per note: title, aliases, tags, summary, then its chunks in order)."""
    ids, docs = [], []
    parts: dict[str, list[str]] = {}
    for nid, title, aliases, tags, summ in conn.execute(
            "SELECT id, title, aliases, tags, summary FROM notes ORDER BY id"):
        ids.append(nid)
        parts[nid] = [title, " ".join(json.loads(aliases)), " ".join(json.loads(tags)), summ]
    for nid, text in conn.execute("SELECT note_id, text FROM chunks ORDER BY note_id, ord"):
        parts[nid].append(text)
    return ids, ["\n".join(parts[n]) for n in ids]


def run_bm25s(s, qs) -> dict:
    try:
        import bm25s
    except ImportError:
        return {"skipped": "bm25s is not installed: pip install bm25s"}
    ids, docs = note_documents(s.conn)
    t0 = time.perf_counter()
    model = bm25s.BM25()
    model.index([char_tokens(d) for d in docs], show_progress=False)
    build = time.perf_counter() - t0
    vocab = model.vocab_dict
    ranked, ms = [], []
    for q in qs:
        t0 = time.perf_counter()
        toks = [t for t in char_tokens(q.query) if t in vocab]
        if toks:
            k = min(10, len(ids))
            docs_idx, _ = model.retrieve([toks], k=k, show_progress=False, n_threads=1)
            order = [ids[i] for i in docs_idx[0]]
        else:
            order = []
        ms.append((time.perf_counter() - t0) * 1000)
        ranked.append(order)
    return {**_score(ranked, qs), "ms": summary(ms), "_ranked": ranked, "build_s": round(build, 2)}


# -- main ------------------------------------------------------------------------------------------------

def build_index(bs: BenchSet, cache: Path) -> tuple[Path, dict]:
    from search_core.index.indexer import index_vault
    db = cache / f"{bs.name}.sqlite"
    t0 = time.perf_counter()
    rep = index_vault(bs.vault, db, cache=cache / "embed-cache.sqlite")
    return db, {"notes": rep.notes, "chunks": rep.chunks, "index_s": round(time.perf_counter() - t0, 1),
                "size_mb": round(db.stat().st_size / 2**20, 2)}


def table(results: dict) -> str:
    systems = []
    for r in results.values():
        for name in r["systems"]:
            if name not in systems:
                systems.append(name)
    lines = ["| set | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for set_name, r in results.items():
        cells = []
        for name in systems:
            m = r["systems"].get(name)
            if m is None or "skipped" in m:
                cells.append("-")
            else:
                cells.append(f"{m['hit@5']:.3f} / {m['mrr@10']:.3f} ({m['ms']['p50']:.0f}/{m['ms']['p95']:.0f} ms)")
        lines.append(f"| {set_name} ({r['questions']} q) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="demo,autorag,korquad,johngrib")
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/keyword"))
    ap.add_argument("--korquad-questions", type=int, default=300)
    ap.add_argument("--johngrib-sample", type=int, default=100, help="notes beside the gold ones")
    ap.add_argument("--configs", default="default", help=f"ours under these configs: {', '.join(CONFIGS)}")
    ap.add_argument("--out", default="peers")
    args = ap.parse_args()
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    args.cache.mkdir(parents=True, exist_ok=True)
    makers = {"demo": demo_set, "autorag": autorag_set,
              "korquad": lambda: korquad_set(args.cache, args.korquad_questions),
              "johngrib": lambda: johngrib_set(args.cache, args.johngrib_sample)}
    results = {}
    for key in args.sets.split(","):
        bs = makers[key]()
        db, info = build_index(bs, args.cache)
        print(f"{bs.name}: {len(bs.questions)} questions, index {info}{'; ' + bs.note if bs.note else ''}",
              flush=True)
        s = Searcher(db)
        systems = {}
        fields = {f for f in SearchConfig.__dataclass_fields__}
        for cname in args.configs.split(","):
            changes = CONFIGS[cname]
            if not set(changes) <= fields:
                systems[f"ours-{cname}"] = {"skipped": f"this SearchConfig has no {sorted(set(changes) - fields)}"}
                continue
            cfg = SearchConfig(embedder=s.embedder_name).replace(**changes)
            systems["ours" if cname == "default" else f"ours-{cname}"] = run_ours(s, bs.questions, cfg)
        systems["dense"] = run_dense(s, bs.questions)
        for index in ("ngram", "fts5"):
            systems[f"{index}-alone"] = run_keyword_alone(s, bs.questions, index)
        systems["bm25s-char"] = run_bm25s(s, bs.questions)
        for peer in ("llamaindex", "txtai"):
            systems[peer] = {"skipped": f"{peer} is not installed in this venv (see the module docstring)"}
        s.close()
        for m in systems.values():       # per part, then the rankings go (KorQuAD: aggregates only)
            ranked = m.pop("_ranked", None)
            if ranked is not None and bs.parts:
                m["parts"] = {p: {**_score([r for r, x in zip(ranked, bs.parts) if x == p],
                                           [q for q, x in zip(bs.questions, bs.parts) if x == p]),
                                  "n": bs.parts.count(p)} for p in dict.fromkeys(bs.parts)}
        results[bs.name] = {"questions": len(bs.questions), "index": info, "note": bs.note, "systems": systems}
        for name, m in systems.items():
            print(f"  {name:<14} " + (m["skipped"] if "skipped" in m else
                  f"hit@5 {m['hit@5']:.3f}  MRR@10 {m['mrr@10']:.3f}  p50 {m['ms']['p50']:.1f} ms  "
                  f"p95 {m['ms']['p95']:.1f} ms"), flush=True)
    out = write_result(args.out, results)
    print("\n" + table(results) + "\n\ncells: hit@5 / MRR@10 (latency p50/p95)\nwritten", out)


if __name__ == "__main__":
    main()
