"""Do cloze questions rank configs as a vault's hand-written questions do, and at what question length?

    python benchmarks/bench_cloze_agreement.py [--vaults johngrib,sysmae,syshin0116,voyager003,demo]
        [--seeds 0,1] [--words 0,12,8,6] [-n 600] [--cache /work/cache/cloze-agreement]

Per vault and seed: `gold cloze` (tuner.data.cloze.refresh_cloze, its defaults, --seed S, built like the vault's
own index) makes the cloze set and the copy without its lines. Each config of CONFIGS (the hand-set start, the
shipped default and single and joint moves off each, the moves the nights keep or should keep) is scored on the
cloze questions (asked of the copy's index), each cut to its first W words (0: the whole line; the copy blanks
the whole line either way), and on the vault's hand-written answerable questions (asked of the vault's own
index). Reported per vault, seed and W: the Spearman rank correlation over the configs of MRR@10 (and hit@5),
cloze against hand-written, and the configs where the two disagree most. The hand-written sets read are the
vault's spent ones (benchmarks.common.VAULT_SETS; the demo's tune and holdout sets; johngrib's six spent sets
over the 604-note subset of bench_gold_make.py); an unread set (UNREAD_SETS) is never read here.

Base indexes come from the caches bench_recovery.py reads (built under --cache when missing). Results:
runs/bench/cloze-agreement.json and a Markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from benchmarks.bench_recovery import START, VAULTS, VaultCase, base_index  # noqa: E402
from benchmarks.common import VAULT_SETS, write_result  # noqa: E402

SETS = ROOT / "benchmarks" / "sets"
VAULT_ROOT = Path(os.environ.get("AUTORESEARCH_VAULTS", "/work/vaults"))

# Moves off the hand-set start (S) and off the shipped default (D): the keyword and n-gram lists the cloze nights
# over-kept, the entity channel made questions reward, the joint dense/rrf_k move the default's gain needs.
CONFIGS = {
    "S": {}, "S w_sparse 0.3": {"w_sparse": 0.3}, "S w_sparse 0.6": {"w_sparse": 0.6},
    "S w_sparse 0.6 ngram": {"w_sparse": 0.6, "keyword_index": "ngram"},
    "S w_sparse 0.6 both": {"w_sparse": 0.6, "keyword_index": "both"},
    "S w_ngram 0.3": {"w_ngram": 0.3}, "S w_entity 0.3": {"w_entity": 0.3}, "S w_decomposed 0.3": {"w_decomposed": 0.3},
    "S w_sparse 0.5 rrf_k 12": {"w_sparse": 0.5, "rrf_k": 12},
    "S w_dense 0.3 w_sparse 0.4 rrf_k 2": {"w_dense": 0.3, "w_sparse": 0.4, "rrf_k": 2},
    "D": None, "D w_entity 0": {"w_entity": 0.0}, "D w_sparse 0": {"w_sparse": 0.0},
    "D w_sparse 0.8": {"w_sparse": 0.8}, "D w_ngram 0": {"w_ngram": 0.0}, "D ngram": {"keyword_index": "ngram"},
    "D both": {"keyword_index": "both"}, "D rrf_k 20": {"rrf_k": 20}, "D rrf_k 60": {"rrf_k": 60},
    "D w_dense 0.6": {"w_dense": 0.6}, "D w_decomposed 0": {"w_decomposed": 0.0},
}


def vault_case(name: str) -> VaultCase:
    """bench_recovery's case when it has one; else a wiki of VAULT_SETS judged on its spent sets (index built under
    the cache)."""
    if name in VAULTS:               # every set it judges on (johngrib: the six spent sets it splits tune / holdout)
        case = VAULTS[name]
        return dataclasses.replace(case, judge={"all": tuple(p for ps in case.judge.values() for p in ps)})
    if name not in VAULT_SETS:
        raise SystemExit(f"no vault {name!r}: one of {', '.join(sorted({*VAULTS, *VAULT_SETS}))}")
    folder, sets = VAULT_SETS[name]
    idx = Path("/work/cache/idx") / f"{name}.sqlite"
    return VaultCase(name, VAULT_ROOT / folder, idx if idx.exists() else None,
                     {"all": tuple(SETS / f"{s}.yaml" for s in sets)})


def cut_words(gold, words: int):
    """The cloze set with each question cut to its first `words` words (0: as made)."""
    if not words:
        return gold
    return dataclasses.replace(gold, questions=tuple(
        dataclasses.replace(q, query=" ".join(q.query.split()[:words])) for q in gold.questions))


def spearman(a: list[float], b: list[float]) -> float | None:
    from scipy.stats import spearmanr
    r = spearmanr(a, b).statistic
    return None if r != r else round(float(r), 3)


def run_vault(name: str, seed: int, words: list[int], n: int, cache: Path, progress=print) -> dict:
    from search_core.config import SearchConfig, load_config
    from tuner.data.cloze import refresh_cloze
    from tuner.data.gold import GoldSet, load_gold
    from tuner.sweep.workbench import Workbench
    case = vault_case(name)
    db = base_index(case, cache)
    t0 = time.perf_counter()
    # the embedding cache the base index was built with, so the copy embeds only the chunks its blanks changed
    # (bench_gold_make's for the demo and johngrib, the per-user one `autoresearch index` uses for the rest)
    embed_cache = case.base_db.parent.parent / "embed-cache.sqlite" if case.base_db and "goldmake" in str(
        case.base_db) else None
    cl, _ = refresh_cloze(case.vault, cache / name / "cloze" / f"seed{seed}", n=n, seed=seed, like=db,
                          words=None, cache=embed_cache)
    made_s = time.perf_counter() - t0
    hand_sets = [load_gold(p) for p in case.judge["all"]]
    hand = GoldSet(f"{name}-hand", "+".join(g.name for g in hand_sets),
                   tuple(q for g in hand_sets for q in g.questions if not q.is_probe))
    cloze = load_gold(cl.gold)
    start, default = load_config(START), SearchConfig()
    vault_bench = Workbench(db, vault=str(case.vault), index_dir=str(cache / name / "indexes"))
    copy_bench = Workbench(cl.db, vault=str(cl.vault), index_dir=str(cache / name / "cloze-indexes"))
    emb = vault_bench.base_embedder
    cfgs = {c: (default if m is None else (default if c.startswith("D") else start).replace(**m)).replace(embedder=emb)
            for c, m in CONFIGS.items()}
    rows = {}
    for c, cfg in cfgs.items():
        h = vault_bench.evaluate(cfg, hand).overall
        rows[c] = {"hand": {"mrr": round(h["mrr"], 4), "hit@5": round(h["hit@5"], 4)}}
        for w in words:
            r = copy_bench.evaluate(cfg, cut_words(cloze, w)).overall
            rows[c][f"cloze{w}"] = {"mrr": round(r["mrr"], 4), "hit@5": round(r["hit@5"], 4)}
    agreement = {}
    for w in words:
        key = f"cloze{w}"
        agreement[key] = {m: spearman([rows[c][key][m] for c in cfgs], [rows[c]["hand"][m] for c in cfgs])
                          for m in ("mrr", "hit@5")}
        progress(f"{name} seed {seed} words {w or 'all'}: Spearman MRR {agreement[key]['mrr']}, "
                 f"hit@5 {agreement[key]['hit@5']} over {len(cfgs)} configs")
    for b in (vault_bench, copy_bench):
        for s in b.searchers.values():
            s.close()
    return {"vault": name, "seed": seed, "cloze_n": len(cloze.questions), "hand_n": len(hand.questions),
            "hand_sets": [g.name for g in hand_sets], "cloze_made_s": round(made_s, 1),
            "seconds": round(time.perf_counter() - t0, 1), "agreement": agreement, "scores": rows}


def markdown(results: list[dict], words: list[int]) -> str:
    head = "| vault | seed | cloze q | hand q | " + " | ".join(f"{w or 'all'} words" for w in words) + " |"
    lines = [head, "|" + "---|" * (4 + len(words))]
    for r in results:
        cells = [f"{r['agreement'][f'cloze{w}']['mrr']} / {r['agreement'][f'cloze{w}']['hit@5']}" for w in words]
        lines.append(f"| {r['vault']} | {r['seed']} | {r['cloze_n']} | {r['hand_n']} | " + " | ".join(cells) + " |")
    lines.append("\nCells: Spearman of MRR@10 / of hit@5 over the configs, cloze questions cut to W words against "
                 "the hand-written questions.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vaults", default="johngrib,sysmae,syshin0116,voyager003,demo")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--words", default="0,12,8,6", help="question lengths in words (0: the whole line)")
    ap.add_argument("-n", type=int, default=600, help="cloze questions (gold cloze's default)")
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/cloze-agreement"))
    ap.add_argument("--out", default="cloze-agreement")
    args = ap.parse_args()
    words = [int(w) for w in args.words.split(",")]
    results = []
    for name in args.vaults.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            results.append(run_vault(name, seed, words, args.n, args.cache))
            write_result(args.out, {"words": words, "configs": list(CONFIGS), "results": results})
    print(markdown(results, words))


if __name__ == "__main__":
    main()
