"""Do questions the vault supplies (`autoresearch gold make`) order configs as hand-written questions do?

Scores ~8 configs (vector only, keyword only, keyword weight 0.1/0.3/0.6 beside dense, the shipped
default, entity on/off) on `gold make` questions and on hand-written ones, and reports per vault the
Spearman and Kendall rank correlation of MRR and hit@5 across the configs, per origin of the made
questions too (anchor text, title, alias, heading, summary).

Vaults: the demo (experiments/demo-vault; demo-tune + demo-holdout) and the johngrib wiki, indexed on a
subset (the gold notes of the spent hand-written sets plus 300 random notes; johngrib-next is never read),
built once and cached under --cache (outside the repository).

    python benchmarks/bench_gold_make.py [--cache /work/cache/goldmake] [--build-only]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import os  # noqa: E402

from benchmarks.common import DATA as _DATA, write_result  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", _DATA))

# the spent hand-written sets only: johngrib-next is kept unread (benchmarks/sets/README.md)
JOHNGRIB_SETS = ("johngrib-tune", "johngrib-holdout", "johngrib-blind", "johngrib-week", "johngrib-final",
                 "johngrib-last")
JOHNGRIB_SAMPLE = 300
WIKI = DATA / "johngrib-wiki" / "_wiki"


def johngrib_subset(cache: Path) -> tuple[Path, Path]:
    """(vault, index) of the johngrib subset: the spent sets' gold notes plus JOHNGRIB_SAMPLE random notes
    (seed 0), copied under cache and indexed with e5-small once."""
    from search_core.index.indexer import index_vault
    from search_core.ingest.vault import list_vault
    from tuner.data.gold import load_gold
    vault, db = cache / "johngrib-subset" / "vault", cache / "johngrib-subset" / "index.sqlite"
    done = cache / "johngrib-subset" / "built"
    if done.exists():
        return vault, db
    files = {f.note_id: f for f in list_vault(WIKI)}
    gold = set().union(*(load_gold(ROOT / "benchmarks" / "sets" / f"{s}.yaml").gold_ids() for s in JOHNGRIB_SETS))
    keep = gold | set(random.Random(0).sample(sorted(files), JOHNGRIB_SAMPLE))
    if vault.exists():
        shutil.rmtree(vault)
    for nid in sorted(keep & set(files)):
        dst = vault / f"{nid}.md"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(files[nid].path, dst)
    t0 = time.perf_counter()
    index_vault(vault, db, cache=cache / "embed-cache.sqlite")
    print(f"indexed {len(keep & set(files))} johngrib notes in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    done.write_text("")
    return vault, db


def demo_index(cache: Path) -> tuple[Path, Path]:
    from search_core.index.indexer import index_vault
    vault, db = ROOT / "experiments" / "demo-vault", cache / "demo" / "index.sqlite"
    if not (cache / "demo" / "built").exists():
        index_vault(vault, db, cache=cache / "embed-cache.sqlite", full=True)
        (cache / "demo" / "built").write_text("")
    return vault, db


def configs() -> dict:
    """The configs whose order is compared: each channel alone, keyword beside dense at three weights, the
    shipped default and the default with the entity channel off, and a config that leans on entities."""
    from search_core.config import SearchConfig
    off = dict(w_dense=0.0, w_sparse=0.0, w_decomposed=0.0, w_entity=0.0)
    base = SearchConfig()
    return {
        "vector only": base.replace(**{**off, "w_dense": 1.0}),
        "keyword only": base.replace(**{**off, "w_sparse": 1.0}),
        "dense + keyword 0.1": base.replace(**{**off, "w_dense": 0.9, "w_sparse": 0.1}),
        "dense + keyword 0.3": base.replace(**{**off, "w_dense": 0.7, "w_sparse": 0.3}),
        "dense + keyword 0.6": base.replace(**{**off, "w_dense": 0.4, "w_sparse": 0.6}),
        "shipped default": base,
        "default, entity off": base.replace(w_entity=0.0),
        "dense + keyword + entity 0.4": base.replace(**{**off, "w_dense": 0.3, "w_sparse": 0.3, "w_entity": 0.4}),
    }


def answerable(gold):
    from tuner.data.gold import GoldSet
    return GoldSet(gold.name, gold.source, tuple(q for q in gold.questions if not q.is_probe), gold.vault)


def made_sets(vault: Path, n: int, seed: int) -> dict:
    """Made questions per kind (n each), anchors also without their exclusions (the naive version), and the
    default mix, as GoldSets."""
    from tuner.data.gold import GoldSet, Question
    from tuner.data.vault_questions import DEFAULT_KINDS, KINDS, make_vault_questions

    def as_gold(name, made, keep_exclude=True):
        return GoldSet(name, name, tuple(Question(q.id, q.level, q.query, q.gold, q.why,
                                                  exclude=q.exclude if keep_exclude else ()) for q in made))
    out = {}
    for kind in KINDS:
        try:
            made = make_vault_questions(vault, n=n, seed=seed, kinds=(kind,)).questions
        except Exception as e:        # a vault without aliases, say
            print(f"{vault.name}: no {kind} questions ({e})", file=sys.stderr)
            continue
        out[kind] = as_gold(kind, made)
        if kind == "anchor":
            out["anchor, linking note not held out"] = as_gold("anchor-naive", made, keep_exclude=False)
    out["default mix (" + ",".join(DEFAULT_KINDS) + ")"] = as_gold(
        "default", make_vault_questions(vault, n=n, seed=seed, kinds=DEFAULT_KINDS).questions)
    return out


def score(db: Path, sets: dict, cfgs: dict) -> dict:
    """set name -> config name -> {mrr, hit@5, n}."""
    from search_core.search.pipeline import Searcher
    from tuner.evaluation.evaluate import RetrievalCache, evaluate
    s = Searcher(db)
    cache = RetrievalCache()
    out = {}
    for name, gold in sets.items():
        out[name] = {}
        for cname, cfg in cfgs.items():
            res = evaluate(s, gold, cfg.replace(embedder=s.embedder_name), cache=cache, audit=False,
                           allow_missing=True)
            out[name][cname] = {"mrr": res.overall["mrr"], "hit@5": res.overall["hit@5"], "n": res.overall["n"]}
        print(f"  {name}: n={next(iter(out[name].values()))['n']} " +
              " ".join(f"{v['mrr']:.3f}" for v in out[name].values()), file=sys.stderr, flush=True)
    s.close()
    return out


def agreement(made: dict, hand: dict, metric: str) -> dict:
    from scipy.stats import kendalltau, spearmanr
    names = list(hand)
    a, b = [made[c][metric] for c in names], [hand[c][metric] for c in names]
    rho, tau = spearmanr(a, b).statistic, kendalltau(a, b).statistic
    return {"spearman": None if rho != rho else round(float(rho), 3), "kendall": None if tau != tau else round(float(tau), 3)}


def run_vault(label: str, vault: Path, db: Path, hand_paths: list[Path], n: int, seed: int) -> dict:
    from tuner.data.gold import GoldSet, load_gold
    hand_sets = [answerable(load_gold(p)) for p in hand_paths]
    hand = GoldSet("hand-written", "+".join(g.name for g in hand_sets),
                   tuple(q for g in hand_sets for q in g.questions))
    cfgs = configs()
    print(f"{label}: scoring {len(cfgs)} configs", file=sys.stderr)
    scores = score(db, {"hand-written": hand, **made_sets(vault, n, seed)}, cfgs)
    hand_scores = scores.pop("hand-written")
    rows = {}
    for name, s in scores.items():
        rows[name] = {"n": next(iter(s.values()))["n"], "by_config": s,
                      **{m: agreement(s, hand_scores, m) for m in ("mrr", "hit@5")},
                      "without keyword only": {m: agreement({c: v for c, v in s.items() if c != "keyword only"},
                                                            {c: v for c, v in hand_scores.items() if c != "keyword only"}, m)
                                               for m in ("mrr", "hit@5")}}
    return {"vault": label, "hand_written": {"sets": [g.name for g in hand_sets], "n": len(hand.questions),
                                             "by_config": hand_scores}, "made": rows}


def table(result: dict) -> str:
    lines = [f"### {result['vault']}: hand-written {', '.join(result['hand_written']['sets'])} "
             f"({result['hand_written']['n']} answerable)", "",
             "| made questions | n | MRR Spearman | MRR Kendall | hit@5 Spearman | hit@5 Kendall | MRR Spearman w/o keyword-only |",
             "|---|---|---|---|---|---|---|"]
    for name, r in result["made"].items():
        lines.append(f"| {name} | {r['n']} | {r['mrr']['spearman']} | {r['mrr']['kendall']} | {r['hit@5']['spearman']} | "
                     f"{r['hit@5']['kendall']} | {r['without keyword only']['mrr']['spearman']} |")
    cfg_names = list(result["hand_written"]["by_config"])
    lines += ["", "| MRR by config | hand-written | " + " | ".join(result["made"]) + " |",
              "|---|---|" + "---|" * len(result["made"])]
    for c in cfg_names:
        lines.append(f"| {c} | {result['hand_written']['by_config'][c]['mrr']:.3f} | " +
                     " | ".join(f"{r['by_config'][c]['mrr']:.3f}" for r in result["made"].values()) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/goldmake"))
    ap.add_argument("-n", type=int, default=300, help="made questions per kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--only", choices=("demo", "johngrib"), default=None)
    a = ap.parse_args()
    a.cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results = []
    if a.only in (None, "demo"):
        vault, db = demo_index(a.cache)
        if not a.build_only:
            gold = ROOT / "experiments" / "gold"
            results.append(run_vault("demo", vault, db, [gold / "demo-tune.yaml", gold / "demo-holdout.yaml"],
                                     a.n, a.seed))
    if a.only in (None, "johngrib"):
        vault, db = johngrib_subset(a.cache)
        if not a.build_only:
            sets = [ROOT / "benchmarks" / "sets" / f"{s}.yaml" for s in JOHNGRIB_SETS]
            results.append(run_vault("johngrib (subset)", vault, db, sets, a.n, a.seed))
    if a.build_only:
        return
    for r in results:
        print(table(r) + "\n")
    path = write_result("gold_make", {"results": results, "seconds": round(time.perf_counter() - t0, 1)})
    print(f"written to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
