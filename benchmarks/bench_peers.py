"""Our search side by side with peer retrievers on the same questions and the same e5-small vectors.

    python benchmarks/bench_peers.py [--sets demo,autorag,korquad,johngrib,baekjungho,...]
        [--cache /work/cache/peers]
        [--korquad-questions 300] [--johngrib-sample 100] [--configs default,ngram] [--peers llamaindex,txtai]

Systems, each scored on note-level hit@5 and MRR@10 (tuner.evaluation.metrics) with warm per-query latency
(p50/p95, ms; every query's vector embedded anew, the query cache emptied before each search):
- ours: the shipped default SearchConfig through Searcher.search, the final order exactly as `search` returns;
  `--configs` adds variants by name (CONFIGS below), e.g. the keyword index that is not the default;
- dense: our dense channel alone (the query embedded, then search_core.search.channels.dense);
- ngram-alone, fts5-alone: our sparse channel alone over each keyword index (SearchConfig.keyword_index);
- bm25s-char: BM25 (bm25s, Lucene idf, k1 1.5, b 0.75) over one document per note (title + every chunk),
  tokens = character 2- and 3-grams inside each word with Hangul, other words whole and lower-cased.
  Needs `pip install -e '.[bench]'` (bm25s; skipped with a message without it).
- llamaindex: LlamaIndex's BM25Retriever (its defaults) beside a VectorStoreIndex, fused by QueryFusionRetriever
  (reciprocal_rerank, one query); txtai: txtai's Embeddings(hybrid=True), its BM25 beside an exact dense index.
  Each runs in a venv of its own that this script makes under --cache (venv-llamaindex, venv-txtai; the
  versions pinned in PEERS below, torch for CPU first where it is pulled in), never imported into ours: the
  script writes our chunks, their vectors and the query vectors to a folder, the peer's python
  (benchmarks/peers/*_run.py) writes back its rankings and the vectors its index holds, checked here at cosine
  1.0000 with ours. Their latency is the retrieval alone (the query vector handed in), ours includes embedding
  the query. `--peers none` leaves them out.

Sets: the demo (demo-tune + demo-holdout on experiments/demo-vault), AutoRAG-ko (BEIR, 114 questions),
a seeded KorQuAD dev sample (its first articles, questions sampled; KorQuAD is CC BY-ND, so only aggregates
are written), and the johngrib wiki's spent sets (tune, holdout, blind, week, final, last) over a subset
vault: every gold note of those sets (436) plus a seeded sample of --johngrib-sample others
(a full index takes ~13 minutes of both cores), and the further real vaults beside the repository (--vaults;
VAULT_SETS: baekjungho, hoonti06, voyager003, aegis1920, crackyachae, syshin0116, sysmae, likejazz, each with its spent sets).
Indexes, the subset vault and the KorQuAD sample live under --cache, outside the repository, and are reused; the
indexes embed through the shared embedding cache. Results:
runs/bench/peers.json, and two Markdown tables: every system on every set, and ours against the best peer on
each set and metric with a 95 % paired bootstrap interval (whether the set can tell the two apart).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, VAULT_SETS, summary, write_result  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))     # a worktree's ROOT.parent is not the data's
JOHNGRIB_SETS = ("tune", "holdout", "blind", "week", "final", "last")   # spent sets only
HANGUL = re.compile(r"[\uac00-\ud7a3]")
WORD = re.compile(r"\w+", re.UNICODE)
# config variants by name: SearchConfig changes on top of the shipped default
# ("fts5": the default without the n-gram list beside FTS5's, the default before w_ngram)
CONFIGS = {"default": {}, "ngram": {"keyword_index": "ngram", "w_ngram": 0.0}, "fts5": {"w_ngram": 0.0},
           "both": {"keyword_index": "both", "w_ngram": 0.0}, "fast": {"fast_path_margin": 0.2},
           "no-dense-lead": {"dense_lead_cos": None}}


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


def vault_set(name: str, vaults: Path) -> BenchSet:
    """A real vault beside the repository (VAULT_SETS) and its sets, each set a part."""
    from tuner.data.gold import load_gold
    folder, set_names = VAULT_SETS[name]
    vault = vaults / folder
    if not vault.is_dir():
        raise SystemExit(f"{name}: no vault at {vault}; lay it out as benchmarks/sets/README.md says, "
                         f"or pass --vaults (the folder holding {folder.split('/')[0]}/)")
    qs, parts = [], []
    for set_name in set_names:
        got = load_gold(ROOT / "benchmarks" / "sets" / f"{set_name}.yaml").answerable()
        qs += got
        parts += [set_name.split("-", 1)[1]] * len(got)
    return BenchSet(name, vault, tuple(qs), parts=tuple(parts))


# -- systems ---------------------------------------------------------------------------------------------

def _score(rankings: list[list[str]], qs) -> dict:
    from tuner.evaluation.metrics import hit_at_k, mean, reciprocal_rank
    return {"hit@5": round(mean([hit_at_k(r, q.gold, 5) for r, q in zip(rankings, qs)]), 4),
            "mrr@10": round(mean([reciprocal_rank(r, q.gold, 10) for r, q in zip(rankings, qs)]), 4)}


def is_peer(system: str) -> bool:
    """Another system, not ours: our variants ("ours-*") and our own lists alone ("*-alone") are not peers."""
    return not system.startswith("ours") and not system.endswith("-alone")


def versus_best_peer(systems: dict, qs, *, n_resamples: int = 10_000) -> dict:
    """Ours against the best peer on each metric (by its mean; the first listed on a tie): ours - peer over the
    same questions, with a 95 % paired bootstrap interval (tuner.evaluation.stats.bootstrap_ci). An interval
    that holds 0 says the set is too small to tell the two apart."""
    from tuner.evaluation.metrics import hit_at_k, reciprocal_rank
    from tuner.evaluation.stats import bootstrap_ci
    per_question = {"hit@5": lambda r, q: hit_at_k(r, q.gold, 5), "mrr@10": lambda r, q: reciprocal_rank(r, q.gold, 10)}
    ours = systems["ours"]["_ranked"]
    peers = {n: m for n, m in systems.items() if is_peer(n) and "_ranked" in m}
    out = {}
    for metric, value in per_question.items():
        if not peers:
            break
        best = max(peers, key=lambda n: peers[n][metric])          # max keeps the first of equals
        a = [value(r, q) for r, q in zip(peers[best]["_ranked"], qs)]
        b = [value(r, q) for r, q in zip(ours, qs)]
        lo, hi = bootstrap_ci(a, b, n_resamples=n_resamples)
        out[metric] = {"peer": best, "diff": round(float(np.mean(b) - np.mean(a)), 4),
                       "ci": [round(lo, 4), round(hi, 4)]}
    return out


def versus_table(results: dict) -> str:
    """Per set, ours against the best peer on each metric, and whether the set can tell them apart."""
    def cell(v: dict) -> str:
        lo, hi = v["ci"]
        verdict = "equal" if v["diff"] == 0 and lo == hi == 0 else \
            "within noise" if lo <= 0 <= hi else "ahead" if lo > 0 else "behind"
        return f"{v['peer']} | {v['diff']:+.4f} ({lo:+.3f}..{hi:+.3f}), {verdict}"
    lines = ["| set | hit@5: best peer | ours - it (95 % CI) | MRR@10: best peer | ours - it (95 % CI) |",
             "|---|---|---|---|---|"]
    for set_name, r in results.items():
        vs = r["systems"].get("ours", {}).get("vs_best_peer")
        if vs:
            lines.append(f"| {set_name} | {cell(vs['hit@5'])} | {cell(vs['mrr@10'])} |")
    return "\n".join(lines)


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
        return {"skipped": "bm25s is not installed: pip install -e '.[bench]'"}
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


@dataclass(frozen=True)
class PeerVenv:
    """A peer system run from a venv of its own: what to pip install there, in order (each a pinned
    requirement list), and the script its python runs."""
    name: str
    installs: tuple          # tuple of tuples: one pip install per entry
    script: str


PEERS = {
    "llamaindex": PeerVenv("llamaindex", (("llama-index-core==0.14.25", "llama-index-retrievers-bm25==0.8.0"),),
                           "llamaindex_run.py"),
    # txtai pulls torch: the CPU build first, so pip never reaches for a multi-GB CUDA one
    "txtai": PeerVenv("txtai", (("torch==2.13.0",), ("txtai==9.14.0",)), "txtai_run.py"),
}
PEER_DEPTH = 50              # chunks each peer retriever returns; note ids are read off in order from them
COSINE_FLOOR = 0.99995       # the vectors a peer's index holds against ours: printed as 1.0000 at four places


def peer_python(peer: PeerVenv, cache: Path) -> Path:
    """The python of the peer's venv under `cache`, made and filled on first use. A marker holding the install
    steps says the venv is complete; a venv without it (an install that stopped) is made again."""
    venv = cache / f"venv-{peer.name}"
    marker = venv / "pinned.txt"
    want = "\n".join(" ".join(step) for step in peer.installs)
    if marker.exists() and marker.read_text() == want:
        return venv / "bin" / "python"
    shutil.rmtree(venv, ignore_errors=True)
    print(f"  making {venv} ({want.replace(chr(10), '; ')})", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    for step in peer.installs:
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *step], check=True)
    marker.write_text(want)
    return venv / "bin" / "python"


def chunk_table(s) -> tuple[list[list], np.ndarray]:
    """([note id, text, 1 if the chunk has a vector else 0] for every chunk, in vault order; the vectors, a
    row per chunk, zeros where it has none). An index keeps dense_per_note vectors a note (ChunkConfig), every
    chunk in its keyword indexes: a peer gets the same, every chunk for its BM25, our vectors for its dense side."""
    rows, order = [], []
    for cid, nid, text in s.conn.execute("SELECT id, note_id, text FROM chunks ORDER BY note_id, ord"):
        row = int(s.view.row_of_chunk[cid]) if cid < len(s.view.row_of_chunk) else -1
        rows.append([nid, text, int(row >= 0)])
        order.append(row)
    order = np.array(order, np.int64)
    vectors = np.zeros((len(rows), s.view.matrix.shape[1]), np.float32)
    vectors[order >= 0] = s.view.matrix[order[order >= 0]]
    return rows, vectors


def held_cosine(name: str, held: np.ndarray, ours: np.ndarray, has: np.ndarray) -> tuple[float, int]:
    """(the lowest cosine between the vector a peer's index holds for a chunk and ours for it, the chunks
    with a vector the peer did not keep: NaN rows of `held`). A peer that holds another count of rows, or
    any other vector, is an error (its figures would not be on our vectors)."""
    if held.shape != ours.shape:
        raise SystemExit(f"{name} holds {held.shape[0]} vectors of {held.shape[1:]} where we handed it "
                         f"{ours.shape[0]} of {ours.shape[1:]}: its index is not over our chunks")
    kept = has & ~np.isnan(held).any(axis=1)
    if not kept.any():
        raise SystemExit(f"{name} kept none of the {int(has.sum())} vectors we handed it")
    a, b = held[kept], ours[kept]
    cosine = float((np.sum(a * b, axis=1) /
                    np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)).min())
    if cosine < COSINE_FLOOR:
        raise SystemExit(f"{name} holds other vectors than ours: lowest cosine {cosine:.6f} (< {COSINE_FLOOR})")
    return cosine, int(has.sum() - kept.sum())


def run_peer(peer: PeerVenv, s, qs, cache: Path) -> dict:
    """One peer over our chunks and vectors: the folder it reads and writes is removed after (it holds the
    set's text, and KorQuAD's may not be kept)."""
    python = peer_python(peer, cache)
    chunks, vectors = chunk_table(s)
    queries = [q.query for q in qs]
    qvectors = np.asarray(s.embedder.embed(queries, is_query=True), dtype=np.float32)
    folder = Path(tempfile.mkdtemp(prefix=f"{peer.name}-", dir=cache))
    try:
        (folder / "chunks.json").write_text(json.dumps(chunks, ensure_ascii=False), encoding="utf-8")
        (folder / "queries.json").write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
        (folder / "params.json").write_text(json.dumps({"depth": PEER_DEPTH}))
        np.save(folder / "vectors.npy", vectors)
        np.save(folder / "qvectors.npy", qvectors)
        # the peer's venv alone: our PYTHONPATH would put this repository on its path
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        p = subprocess.run([str(python), str(Path(__file__).parent / "peers" / peer.script), str(folder)],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise SystemExit(f"{peer.name} failed:\n{p.stderr[-3000:]}")
        out = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        held = np.load(folder / "held.npy")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    has = np.array([c[2] for c in chunks], bool)
    cosine, dropped = held_cosine(peer.name, held, vectors, has)
    return {**_score(out["ranked"], qs), "ms": summary(out["ms"]), "_ranked": out["ranked"],
            "build_s": round(out["build_s"], 2), "cosine_min": round(cosine, 6), "chunks": len(chunks),
            "vectors": int(has.sum()), "vectors_not_kept": dropped}


# -- main ------------------------------------------------------------------------------------------------

def build_index(bs: BenchSet, cache: Path) -> tuple[Path, dict]:
    from search_core.index.indexer import index_vault
    db = cache / f"{bs.name}.sqlite"
    t0 = time.perf_counter()
    rep = index_vault(bs.vault, db)      # the shared embedding cache: a vault another run embedded costs seconds
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
    cells = []
    for name in systems:       # each set weighs one, whatever its number of questions
        got = [r["systems"][name] for r in results.values() if "hit@5" in r["systems"].get(name, {})]
        cells.append(f"{np.mean([m['hit@5'] for m in got]):.3f} / {np.mean([m['mrr@10'] for m in got]):.3f}"
                     if len(got) == len(results) else "-")
    lines.append(f"| mean of the {len(results)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(("demo", "autorag", "korquad", "johngrib", *VAULT_SETS)))
    ap.add_argument("--vaults", type=Path, default=DATA.parent.parent / "vaults",
                    help="the folder holding the real vaults of VAULT_SETS (benchmarks/sets/README.md)")
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/peers"))
    ap.add_argument("--korquad-questions", type=int, default=300)
    ap.add_argument("--johngrib-sample", type=int, default=100, help="notes beside the gold ones")
    ap.add_argument("--configs", default="default", help=f"ours under these configs: {', '.join(CONFIGS)}")
    ap.add_argument("--peers", default="llamaindex,txtai", help=f"of {', '.join(PEERS)}, or none")
    ap.add_argument("--out", default="peers")
    args = ap.parse_args()
    peers = [] if args.peers == "none" else args.peers.split(",")
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peer {unknown}: choose from {', '.join(PEERS)} or none")
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    args.cache.mkdir(parents=True, exist_ok=True)
    makers = {"demo": demo_set, "autorag": autorag_set,
              "korquad": lambda: korquad_set(args.cache, args.korquad_questions),
              "johngrib": lambda: johngrib_set(args.cache, args.johngrib_sample),
              **{name: (lambda name=name: vault_set(name, args.vaults)) for name in VAULT_SETS}}
    unknown = [k for k in args.sets.split(",") if k not in makers]
    if unknown:
        raise SystemExit(f"unknown set {unknown}: choose from {', '.join(makers)}")
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
        for peer in peers:
            systems[peer] = run_peer(PEERS[peer], s, bs.questions, args.cache)
        s.close()
        if "_ranked" in systems.get("ours", {}):
            systems["ours"]["vs_best_peer"] = versus_best_peer(systems, bs.questions)
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
    print("\n" + table(results) + "\n\ncells: hit@5 / MRR@10 (latency p50/p95)\n\n" + versus_table(results)
          + "\nwritten", out)


if __name__ == "__main__":
    main()
