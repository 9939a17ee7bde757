"""The gate on vaults it never saw: leave one vault out, over every labelled vault, and each vault's own scale.

Vaults (labelled sets; every question searched once through `Searcher.search`, the call `search --json` makes,
and scored from its gate features; `--check` runs `search --json` itself on a sample and compares):
  demo        the six demo sets (experiments/gold)
  autorag     AutoRAG-ko's 114 questions, a fifth of its PDFs held out of every channel list (seeds 0-2) as probes
  johngrib    the six spent johngrib sets, over the whole wiki (until 2026-12-04 a 536-note subset that held all
              their gold notes and 100 others: no full e5-small index was on this machine then)
  the wikis of benchmarks.common.VAULT_SETS (baekjungho, hoonti06, voyager003, aegis1920, crackyachae, syshin0116,
              ...), each with its spent sets; a set kept unread (UNREAD_SETS) is read only with --final, once, last

Per left-out vault, from the others only:
  shipped     search_core/gate/gate_default.json at its own threshold (flagged in-sample where it was fitted)
  recipe      the shipped recipe (the one chosen below) fitted on all the other vaults, at its own cut
  nested      a recipe (features, C, how vaults weigh) chosen by the mean balanced accuracy over the other
              labelled vaults, each left out in turn (nested: the left-out vault takes no part in the choice),
              then fitted on all the others, at its own out-of-fold cut
  cosine      top cosine >= 0.82 (the cosine gate's default for e5-small); its AUROC is the top cosine's
The shipped default's recipe is chosen by the mean over left-out vaults (RECIPES, declared before any number)
among the recipes better than the current one on the mean beyond noise (the 95 % interval of the mean's
difference, each vault's questions drawn again within it, above 0) and worse on no left-out vault beyond noise.

Each vault's own scale, without labels (RULES, declared before any number): the vault's own evidence is
questions `gold make` cuts from it (anchor sentences with the linking note held out, headings, aliases;
AutoRAG-ko, which has no links or headings: its sentences and titles), a fifth of their gold notes held out
of every channel list (their questions become probes, as `probes make` does on one index), and generic
off-topic questions (OFF_TOPIC). A rule places the threshold of the shipped recipe's gate fitted on the other
vaults (the gate a vault nobody fitted gets) from those rows:
  self cut          the best balanced-accuracy cut on the vault's own rows
  self cut shifted  that cut moved (logit scale) by how far the fit's cut sits from the fit vaults' self cuts
  answerable shift  the fit's cut moved by how far the vault's own answerable rows' median logit sits from
                    the fit vaults'
  probe shift       the same with the vault's own probes (held-out notes' questions and OFF_TOPIC)
Kept only if better on the mean over left-out vaults and worse on none by more than noise: a paired bootstrap
(tuner.evaluation.stats.bootstrap_ci, 95 %) over questions of each question's share of balanced accuracy.

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD nice -n 5 python benchmarks/bench_gate_lovo.py [--check]
        [--write-default] [--vaults a,b,...] [--sets DIR]
    ... bench_gate_lovo.py --final [--decided RECIPE]      # once, last, after a run decided
Indexes are read from --cache (default /work/cache/gate/lovo: VAULT.sqlite for each vault above; the wikis'
indexes built by `autoresearch index` from ../vaults/NAME/...: benchmarks/sets/README.md); per-question rows
are cached there too (rows-VAULT.pkl; a vault whose sets changed is searched again), never in the repository.
Results: runs/bench/gate-lovo.json (--out).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import pickle
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, ROOT, UNREAD_SETS, VAULT_SETS, write_result  # noqa: E402
from bench_gate_transfer import _rank, autorag_heldout, self_queries  # noqa: E402

from search_core.config import SearchConfig  # noqa: E402
from search_core.gate.features import (HEADING_WORD_FEATURES, NGRAM_FEATURES, NOTE_WORD_FEATURES, WORD_FEATURES,
                                       feature_set)  # noqa: E402
from search_core.gate.model import DEFAULT_GATE_FILE, GateFitError, best_balanced_threshold, load_gate  # noqa: E402
from tuner.gate.fit import fit_gate  # noqa: E402
from search_core.search.pipeline import Searcher  # noqa: E402
from tuner.data.gold import load_gold  # noqa: E402
from tuner.data.vault_questions import make_vault_questions, vault_of  # noqa: E402
from tuner.evaluation.stats import bootstrap_ci, paired_randomization  # noqa: E402
from tuner.gate.calibrate import probabilities  # noqa: E402
from tuner.gate.metrics import auroc, balanced_accuracy  # noqa: E402

GOLD = ROOT / "experiments" / "gold"
SETS = ROOT / "benchmarks" / "sets"
COS = 0.82
DEMO_SETS = ("demo-tune", "demo-holdout", "demo-probes", "demo-gate-tune", "demo-gate-holdout", "demo-gate-holdout2")
JOHNGRIB_SETS = ("johngrib-tune", "johngrib-holdout", "johngrib-blind", "johngrib-week", "johngrib-final",
                 "johngrib-last")
# the wikis beside the repository, each with its spent sets (benchmarks.common.VAULT_SETS: one table for every
# benchmark); a set kept unread (UNREAD_SETS) is read only by --final, once, last: never in any fit or choice
SETS_OF = {"demo": DEMO_SETS, "johngrib": JOHNGRIB_SETS, **{v: sets for v, (_, sets) in VAULT_SETS.items()}}
# every vault is left out in turn
LABELLED = ("demo", "autorag", "johngrib", *VAULT_SETS)
# the recipes the final set scores (beside the one --decided names), fitted without its vault: the shipped one and
# the one the rule chose on the seven vaults' rows of 2026-12-04 19:35 UTC, named before the eighth vault's first row
FINAL_RECIPES = ("35+hit_cos+ngram, C=0.1, pooled", "35+ngram, C=0.1, pooled")
AUTORAG_SEEDS = (0, 1, 2)
AUTORAG_FIT_SEED = 0         # a fit reads AutoRAG-ko's seed-0 rows only (the other seeds repeat its questions)
MADE_N = 120                 # questions `gold make` cuts per vault for its own rows
MADE_HELD = 0.2              # share of their gold notes held out: their questions are the vault's own probes
# Generic off-topic questions, fixed before any measurement: what an agent's user asks that no note of a
# developer's wiki answers (everyday life, trivia, small talk with a question in it), Korean and English.
OFF_TOPIC = (
    "오늘 저녁 메뉴 뭐가 좋을까", "김치찌개 맛있게 끓이는 법", "내일 서울 날씨 어때", "주말에 가볼 만한 제주도 여행지",
    "강아지 산책은 하루에 몇 번 해야 하나요", "아이폰 배터리 교체 비용", "올해 추석 연휴는 며칠인가요", "감기 빨리 낫는 방법",
    "결혼식 축의금 얼마가 적당한가", "전세 계약할 때 확인할 것", "손흥민 이번 시즌 골 수", "고양이가 토하는 이유",
    "다이어트 식단 추천해줘", "운전면허 갱신 방법", "비행기 수하물 무게 제한", "연말정산 환급 언제 들어와요",
    "부모님 생신 선물 추천", "아침에 일찍 일어나는 법", "된장찌개에 들어가는 재료", "헬스장 처음 가면 뭐부터 해야 해",
    "How do I cook a soft boiled egg", "What is the capital of Australia", "best hiking trails near Seoul",
    "how many calories in a banana", "when is the next full moon", "how to remove a red wine stain",
    "recommend a good mystery novel", "what time does the post office close on Saturday",
    "how to train a puppy to sit", "who won the world cup in 2018",
)
# Recipes for the gate a vault nobody fitted gets, declared before any number: (features, C, vaults equal).
# "27, C=0.1, pooled" is the recipe of the default shipped before the word and n-gram features; the "+" recipes
# add what the gate reads about the query's content words (WORD_FEATURES) and the n-gram BM25 list
# (NGRAM_FEATURES), both computed by search_core.gate.features.
BASE = feature_set("cross-script-27")       # the 27 the default read before them
# Declared with six vaults, before their first run: the overlaps computed on every search and in no set
# (OVERLAPS), and the content words against the first result's title, aliases and heading path
# (HEADING_WORD_FEATURES: a near-topic probe's rare word sits in the text of a note about something else)
OVERLAPS = ("heading_overlap", "dense_idf_overlap", "bm25_wig")
RECIPES = {
    "27, C=0.3, pooled": (BASE, 0.3, False),
    "27, C=0.3, vaults equal": (BASE, 0.3, True),
    "27, C=0.1, pooled": (BASE, 0.1, False),
    "27, C=0.1, vaults equal": (BASE, 0.1, True),
    "27, C=1, pooled": (BASE, 1.0, False),
    "27+words, C=0.1, pooled": (BASE + WORD_FEATURES, 0.1, False),
    "27+ngram, C=0.1, pooled": (BASE + NGRAM_FEATURES, 0.1, False),
    "27+words+ngram, C=0.1, pooled": (BASE + WORD_FEATURES + NGRAM_FEATURES, 0.1, False),
    "27+words+ngram, C=0.03, pooled": (BASE + WORD_FEATURES + NGRAM_FEATURES, 0.03, False),
    "27+words+ngram, C=0.3, pooled": (BASE + WORD_FEATURES + NGRAM_FEATURES, 0.3, False),
    "27+words, C=0.03, pooled": (BASE + WORD_FEATURES, 0.03, False),
    "27+words, C=0.3, pooled": (BASE + WORD_FEATURES, 0.3, False),
    "27+words, C=0.1, vaults equal": (BASE + WORD_FEATURES, 0.1, True),
    "27+words+overlaps, C=0.1, pooled": (BASE + WORD_FEATURES + OVERLAPS, 0.1, False),
    "27+words+heading words, C=0.1, pooled": (BASE + WORD_FEATURES + HEADING_WORD_FEATURES, 0.1, False),
}
# Declared with seven vaults, before their first run, from demo's and AutoRAG-ko's passing probes read one by
# one (lab notes): among the rows the left-out gate injects, the first result's own cosine (hit_cos, computed on
# every search, in no set: AUROC 0.76 on demo, the best there) and the n-gram list's features (ngram_margin_ratio
# 0.84 on AutoRAG-ko; the list now leads the default fusion) separate answerable from probe
OVERLAPS_35 = BASE + WORD_FEATURES + OVERLAPS
RECIPES.update({
    "35+hit_cos, C=0.1, pooled": (OVERLAPS_35 + ("hit_cos",), 0.1, False),
    "35+ngram, C=0.1, pooled": (OVERLAPS_35 + NGRAM_FEATURES, 0.1, False),
    "35+hit_cos+ngram, C=0.1, pooled": (OVERLAPS_35 + ("hit_cos",) + NGRAM_FEATURES, 0.1, False),
})
# Declared with seven vaults on today's fusion, before their run, from the demo's passing probes and skipped
# answerable questions read one by one (lab notes): the first result's whole note against the query's content
# words (NOTE_WORD_FEATURES: how much of their IDF the note holds anywhere, and how often, saturated as BM25
# does: a near-topic note names the probe's rare word once in passing) and the content words whose stem no note
# holds (an unseen name, where an unseen inflected word of an answerable question keeps its stem)
NGRAM_40 = OVERLAPS_35 + ("hit_cos",) + NGRAM_FEATURES
RECIPES.update({
    "40+note words, C=0.1, pooled": (NGRAM_40 + ("note_word_coverage_idf", "note_word_tf_idf"), 0.1, False),
    "40+unseen stems, C=0.1, pooled": (NGRAM_40 + ("unseen_stems",), 0.1, False),
    "40+note words+unseen stems, C=0.1, pooled": (NGRAM_40 + NOTE_WORD_FEATURES, 0.1, False),
})
CURRENT_RECIPE = "35+hit_cos+ngram, C=0.1, pooled"     # the shipped default's recipe (ngram-40), chosen by the rule
RULES = ("fit cut", "self cut", "self cut shifted", "answerable shift", "probe shift")


# ---- rows -----------------------------------------------------------------------------------------------

def _row(res, y, **kw) -> dict:
    g = res.gate
    return {"f": dict(g.features), "y": int(y), "cos": float(g.top_score),
            "p_default": g.probability if g.probability is not None else float("nan"),
            "inject_default": bool(g.inject), "kind": g.kind, "source": g.source, **kw}


def vault_paths(cache: Path, data: Path) -> dict:
    """Each vault's (index, folder): the wikis' indexes under the cache, built from the folder they record
    (folder None: read from the index)."""
    return {"demo": (cache / "demo.sqlite", ROOT / "experiments" / "demo-vault"),
            "autorag": (cache / "autorag.sqlite", data / "autorag-ko" / "beir"),
            "johngrib": (cache / "johngrib.sqlite", None),          # the index's own vault (the whole wiki)
            **{v: (cache / f"{v}.sqlite", None) for v in VAULT_SETS}}


def labelled_rows(vault: str, s: Searcher, cfg: SearchConfig, data: Path, sets: Path) -> list[dict]:
    rows = []
    if vault == "autorag":
        gold = load_gold(data / "autorag-ko" / "beir")
        doc_of = {nid: (n["title"] or nid) for nid, n in s.view.notes.items()}
        for seed, q, res, gdocs, answerable in autorag_heldout(s, cfg, gold, doc_of, AUTORAG_SEEDS):
            rows.append(_row(res, answerable, set=f"autorag-s{seed}", id=q.id, level=q.level))
        return rows
    for name in SETS_OF[vault]:
        gold = load_gold((GOLD if vault == "demo" else sets) / f"{name}.yaml")
        for q in gold.questions:
            res = s.search(q.query, cfg, exclude=frozenset(q.exclude))
            rows.append(_row(res, not q.is_probe, set=name, id=q.id, level=q.level, query=q.query))
    return rows


def own_rows(vault: str, s: Searcher, cfg: SearchConfig, folder: Path | None) -> list[dict]:
    """The vault's own evidence, no label from anyone: made questions (answerable), the same with their gold
    note held out of every channel list (probes), and OFF_TOPIC (probes)."""
    rows = []
    if vault == "autorag":      # a BEIR corpus: no links, headings or aliases; its sentences and titles
        doc_of = {nid: (n["title"] or nid) for nid, n in s.view.notes.items()}
        qs = self_queries(s, n_notes=MADE_N // 2)
        docs = sorted({doc_of.get(n, n) for n, _ in qs})
        held = set(random.Random(1).sample(docs, round(MADE_HELD * len(docs))))
        for nid, q in qs:
            r = s.retrieve(q, cfg.depth)
            d = doc_of.get(nid, nid)
            rows.append(_row(_rank(s, cfg, r, held, doc_of), d not in held, kind_of="sentence", query=q))
    else:
        vq = make_vault_questions(folder, n=MADE_N, seed=0)
        golds = sorted({q.gold[0] for q in vq.questions})
        held = set(random.Random(1).sample(golds, round(MADE_HELD * len(golds))))
        for q in vq.questions:
            res = s.search(q.query, cfg, exclude=frozenset(q.exclude) | held)
            rows.append(_row(res, q.gold[0] not in held, kind_of=q.kind, query=q.query))
    for q in OFF_TOPIC:
        rows.append(_row(s.search(q, cfg), 0, kind_of="off-topic", query=q))
    return rows


def collect(vault: str, a) -> dict:
    cache = a.cache / f"rows-{vault}.pkl"
    if cache.exists() and not a.recollect:
        saved = pickle.loads(cache.read_bytes())
        # a vault once kept for a final read has own rows only; a vault whose sets changed is searched again
        if saved.get("labelled") and (vault not in SETS_OF
                                      or {r["set"] for r in saved["labelled"]} == set(SETS_OF[vault])):
            return saved
    db, folder = vault_paths(a.cache, a.data)[vault]
    if folder is None:
        folder = vault_of(db)            # the folder the index was built from
    s = Searcher(db, all_gate_features=True)       # the candidate features too, for the recipes that read them
    assert s.gate_choice.source.endswith("gate_default.json"), s.gate_choice.reason
    s.warm_up()
    cfg = SearchConfig(embedder=s.embedder_name)
    t0 = time.perf_counter()
    out = {"vault": vault, "notes": len(s.view.notes)}
    out["own"] = own_rows(vault, s, cfg, folder)
    out["own_seconds"] = round(time.perf_counter() - t0, 1)
    print(f"{vault}: {len(out['own'])} own rows in {out['own_seconds']} s", file=sys.stderr, flush=True)
    t1 = time.perf_counter()
    out["labelled"] = labelled_rows(vault, s, cfg, a.data, a.sets)
    print(f"{vault}: {len(out['labelled'])} labelled rows in {time.perf_counter() - t1:.0f} s", file=sys.stderr,
          flush=True)
    s.close()
    cache.write_bytes(pickle.dumps(out))
    return out


# ---- fitting and scoring ---------------------------------------------------------------------------------

def fit_rows(data: dict, vaults) -> list[dict]:
    return [r for v in vaults for r in data[v]["labelled"]
            if v != "autorag" or r["set"] == f"autorag-s{AUTORAG_FIT_SEED}"]


def balance(rows, seed=0):
    by = {}
    for r in rows:
        by.setdefault(r["vault"], []).append(r)
    n = min(len(v) for v in by.values())
    rng = random.Random(seed)
    return [r for v in by.values() for r in (rng.sample(v, n) if len(v) > n else v)]


_FITS: dict = {}      # (vaults, recipe) -> model: the outer, paired and nested loops fit the same pools again


def fit_recipe(data, vaults, recipe, fp=None):
    if fp is None:
        key = (frozenset(vaults), recipe)
        if key not in _FITS:
            _FITS[key] = fit_recipe(data, vaults, recipe, fp={})
        return _FITS[key]
    feats, C, equal = RECIPES[recipe]
    rows = [{**r, "vault": v} for v in vaults for r in fit_rows(data, [v])]
    if equal:
        rows = balance(rows)
    return fit_gate([r["f"] for r in rows], [r["y"] for r in rows], fingerprint=fp, features=list(feats), C=C,
                    fitted_on={"vaults": list(vaults), "recipe": recipe, "rows": len(rows)})


def shares(inject, y) -> np.ndarray:
    """Each question's share of balanced accuracy: correct / (2 * its class's size), times n, so the mean is
    the balanced accuracy and two gates' shares pair up question by question."""
    y = np.asarray(y, dtype=bool)
    inj = np.asarray(inject, dtype=bool)
    correct = (inj == y).astype(float)
    w = np.where(y, 1.0 / (2 * y.sum()), 1.0 / (2 * (~y).sum()))
    return correct * w * len(y)


def score(p, y, t) -> dict:
    y = np.asarray(y)
    inj = np.asarray(p) >= t
    return {"bacc": round(balanced_accuracy(inj, y), 4), "auroc": round(auroc(p, y), 4), "threshold": round(float(t), 4),
            "answerable_injected": round(float(inj[y == 1].mean()), 3), "probes_injected": round(float(inj[y == 0].mean()), 3)}


def _logit(p):
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _sig(z):
    return float(1 / (1 + math.exp(-z)))


def own_stats(m, rows) -> dict:
    p = probabilities(m, [r["f"] for r in rows])
    y = np.array([r["y"] for r in rows])
    return {"cut": best_balanced_threshold(p, y)[0], "ans": float(np.median(_logit(p[y == 1]))),
            "probe": float(np.median(_logit(p[y == 0])))}


def thresholds(m, data, vault, fit_vaults) -> dict:
    """RULES: where each puts the threshold of `m` on `vault`, from its own rows and the fit vaults' own rows."""
    mine = own_stats(m, data[vault]["own"])
    ref = [own_stats(m, data[v]["own"]) for v in fit_vaults]
    base = float(_logit(m.threshold))
    return {"fit cut": m.threshold, "self cut": mine["cut"],
            "self cut shifted": _sig(float(_logit(mine["cut"])) + base - float(np.mean([float(_logit(r["cut"])) for r in ref]))),
            "answerable shift": _sig(base + mine["ans"] - float(np.mean([r["ans"] for r in ref]))),
            "probe shift": _sig(base + mine["probe"] - float(np.mean([r["probe"] for r in ref])))}


def shippable_recipes(outer: dict, current: str) -> list[str]:
    """The recipes the shipped default may move to: the current one, and each better on the mean over left-out
    vaults beyond noise (the 95 % interval of the mean's difference above 0) and worse on no left-out vault
    beyond noise. "Better on the mean" alone let the pick flip three times in one day between recipes 0.005
    apart (the rows of 19:35, of f627ede, of the eighth vault), each within its interval."""
    return [k for k, r in outer.items() if k == current or
            (r["mean_diff_ci95"][0] > 0 and not r["worse_beyond_noise"])]


def choose_recipe(data, others) -> tuple[str, dict]:
    """The recipe with the best mean balanced accuracy over `others`, each left out of a fit on the rest."""
    means = {}
    for name in RECIPES:
        b = []
        for w in others:
            rest = [v for v in others if v != w]
            m = fit_recipe(data, rest, name)
            rows = data[w]["labelled"]
            b.append(score(probabilities(m, [r["f"] for r in rows]), [r["y"] for r in rows], m.threshold)["bacc"])
        means[name] = round(float(np.mean(b)), 4)
    return max(means, key=lambda k: (means[k], k == CURRENT_RECIPE)), means


def stratified_bootstrap_ci(diffs, n_resamples=4000, seed=0, level=0.95) -> tuple[float, float]:
    """Percentile interval of the mean over vaults of each vault's mean paired difference (one array per vault),
    each vault's questions drawn again within it: the noise of the rule's "better on the mean"."""
    rng = np.random.default_rng(seed)
    means = np.zeros(n_resamples)
    for d in diffs:
        d = np.asarray(d, float)
        means += d[rng.integers(0, d.size, size=(n_resamples, d.size))].mean(axis=1) / len(diffs)
    lo, hi = np.percentile(means, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def paired(a_inj, b_inj, y) -> dict:
    a, b = shares(a_inj, y), shares(b_inj, y)
    lo, hi = bootstrap_ci(a, b)
    return {"diff": round(float(b.mean() - a.mean()), 4), "ci95": [round(lo, 4), round(hi, 4)],
            "p": round(paired_randomization(a, b), 4), "worse_beyond_noise": bool(hi < 0)}


def left_out(data, vault, fit_pool, shipped, also: dict, chosen: str, nested_choice: bool = True) -> dict:
    """Every figure for `vault` left out: the `chosen` recipe fitted on `fit_pool` (the gate a vault nobody
    fitted gets) with each own-scale rule, the nested choice, the shipped file, the cosine gate."""
    rows = data[vault]["labelled"]
    y = np.array([r["y"] for r in rows])
    recipe, inner = (choose_recipe(data, fit_pool) if nested_choice and len(fit_pool) >= 2
                     else (CURRENT_RECIPE, {}))
    nested = fit_recipe(data, fit_pool, recipe)
    m = fit_recipe(data, fit_pool, chosen)
    feats = [r["f"] for r in rows]
    p = probabilities(m, feats)
    pn = probabilities(nested, feats)
    cos = np.array([r["cos"] for r in rows])
    pd = probabilities(shipped, feats)          # the default shipped now (the rows may predate it)
    in_fit = vault in shipped_fit_vaults(shipped)
    out = {"rows": len(rows), "answerable": int(y.sum()), "probes": int((1 - y).sum()), "fit_vaults": list(fit_pool),
           "recipe": chosen, "nested_recipe": recipe, "recipe_means": inner,
           "nested": score(pn, y, nested.threshold),
           "shipped": {**score(pd, y, shipped.threshold), "in_sample": in_fit},
           "cosine": score(cos, y, COS)}
    for name, g in also.items():               # other gate files (the default before this one), at their own cut
        out.setdefault("also", {})[name] = {**score(probabilities(g, feats), y, g.threshold),
                                            "in_sample": vault in shipped_fit_vaults(g)}
    ts = thresholds(m, data, vault, fit_pool)
    out["lovo"] = {rule: score(p, y, t) for rule, t in ts.items()}
    out["by_recipe"] = {}           # the shipped recipe and the final set's, each at its own left-out cut
    for name in dict.fromkeys((CURRENT_RECIPE, *FINAL_RECIPES, chosen)):
        g = fit_recipe(data, fit_pool, name)
        pg = probabilities(g, feats)
        out["by_recipe"][name] = {**score(pg, y, g.threshold),
                                  "best_cut": score(pg, y, best_balanced_threshold(pg, y)[0])}
    out["ceiling"] = score(p, y, best_balanced_threshold(p, y)[0])
    out["paired_vs_fit_cut"] = {rule: paired(p >= m.threshold, p >= t, y) for rule, t in ts.items() if rule != "fit cut"}
    out["lovo_vs_shipped"] = paired(pd >= shipped.threshold, p >= m.threshold, y)
    # the shipped default with the same rules (its fit vaults' own rows as the reference)
    ref = [v for v in shipped_fit_vaults(shipped) if v in data]
    ts_s = thresholds(shipped, data, vault, ref)
    out["shipped_rules"] = {rule: score(pd, y, t) for rule, t in ts_s.items()}
    out["shipped_paired"] = {rule: paired(pd >= shipped.threshold, pd >= t, y) for rule, t in ts_s.items() if rule != "fit cut"}
    # per set
    out["by_set"] = {}
    for name in sorted({r["set"] for r in rows}):
        idx = np.array([r["set"] == name for r in rows])
        out["by_set"][name] = {"shipped": score(pd[idx], y[idx], shipped.threshold)["bacc"],
                               "lovo": score(p[idx], y[idx], m.threshold)["bacc"], "cosine": score(cos[idx], y[idx], COS)["bacc"]}
    return out


def shipped_fit_vaults(shipped) -> list[str]:
    sets = shipped.fitted_on.get("gold_sets", []) or []
    v = []
    if any(s.startswith("demo") for s in sets):
        v.append("demo")
    if any("beir" in s or "autorag" in s for s in sets):
        v.append("autorag")
    if any(s.startswith("johngrib") for s in sets):
        v.append("johngrib")
    for name in VAULT_SETS:
        if any(s.startswith(name) for s in sets):
            v.append(name)
    return v


def final_read(a) -> dict:
    """The set kept unread (UNREAD_SETS), searched once (its rows cached: a second --final scores the same searches), scored with each of
    FINAL_RECIPES fitted on every labelled vault but its own (the gate a vault nobody fitted gets; nothing is fitted
    on it or chosen by it), the shipped default file and the cosine gate; the other recipe paired against the one
    `--decided` names, and what each injects per level."""
    if not UNREAD_SETS:
        raise SystemExit("no set is kept unread (benchmarks.common.UNREAD_SETS is empty): every set has been read, so "
                         "a final measurement needs a new vault with a set nobody read (benchmarks/sets/README.md)")
    vault, name = next(iter(UNREAD_SETS.items()))
    cache = a.cache / f"rows-{name}.pkl"
    if cache.exists():
        rows = pickle.loads(cache.read_bytes())
    else:
        s = Searcher(vault_paths(a.cache, a.data)[vault][0], all_gate_features=True)
        s.warm_up()
        cfg = SearchConfig(embedder=s.embedder_name)
        rows = [_row(s.search(q.query, cfg, exclude=frozenset(q.exclude)), not q.is_probe, set=name, id=q.id,
                     level=q.level, query=q.query) for q in load_gold(a.sets / f"{name}.yaml").questions]
        s.close()
        cache.write_bytes(pickle.dumps(rows))
    feats, y = [r["f"] for r in rows], np.array([r["y"] for r in rows])
    data = {v: collect(v, a) for v in LABELLED if v != vault}
    gates = {"shipped": load_gate(DEFAULT_GATE_FILE)}
    for recipe in dict.fromkeys((*FINAL_RECIPES, a.decided)):
        gates[recipe] = fit_recipe(data, list(data), recipe)
    p = {g: probabilities(m, feats) for g, m in gates.items()}
    cos = np.array([r["cos"] for r in rows])
    levels = sorted({r["level"] for r in rows})
    out = {"set": name, "answerable": int(y.sum()), "probes": int((1 - y).sum()), "fit_vaults": list(data),
           "decided": a.decided,
           "gates": {g: {**score(p[g], y, m.threshold), "best_cut": score(p[g], y, best_balanced_threshold(p[g], y)[0])}
                     for g, m in gates.items()},
           "cosine": score(cos, y, COS),
           "injected_by_level": {lv: {g: round(float(np.mean([i for i, r in zip(p[g] >= m.threshold, rows)
                                                               if r["level"] == lv])), 3) for g, m in gates.items()}
                                 for lv in levels},
           "search_decided_as_shipped": int(sum(bool(r["inject_default"]) == bool(q >= gates["shipped"].threshold)
                                                for r, q in zip(rows, p["shipped"]))),
           "misses": {g: [{"query": r.get("query", r["id"]), "level": r["level"], "y": r["y"], "p": round(float(q), 3)}
                          for r, q in zip(rows, p[g]) if bool(q >= m.threshold) != bool(r["y"])]
                      for g, m in gates.items()}}
    other = [g for g in dict.fromkeys(FINAL_RECIPES) if g != a.decided]
    out["vs_decided"] = {g: paired(p[a.decided] >= gates[a.decided].threshold, p[g] >= gates[g].threshold, y)
                         for g in [*other, "shipped"]}
    return out


def embedder_fingerprint(a) -> dict:
    s = Searcher(vault_paths(a.cache, a.data)["demo"][0])
    fp = s.fingerprint["embedder"]
    s.close()
    return fp


# ---- `search --json` itself ------------------------------------------------------------------------------

def check_cli(data, a, gates: dict, n=8) -> dict:
    """Run `autoresearch search --json` (the CLI function, in this process) on the first `n` hand-written
    questions of each vault's labelled rows (those without a held-out note), with the shipped default and with
    each gate file in `gates` (vault -> file); compare the probability and decision with the rows'."""
    from click.testing import CliRunner
    from search_core.gate.model import load_gate as lg
    from tuner.cli import main as cli
    run = CliRunner()
    shipped = load_gate(DEFAULT_GATE_FILE)
    out = {}
    for v, gate_file in gates.items():
        db = vault_paths(a.cache, a.data)[v][0]
        rows = [r for r in data[v]["labelled"] if "query" in r][:n]     # AutoRAG-ko's probes need dropped PDFs
        if not rows:
            continue
        m = lg(gate_file)
        worst, differ = 0.0, 0
        for r in rows:
            for gf, model in ((None, None), (gate_file, m)):
                args = ["search", r["query"], "--db", str(db), "--json"] + (["--gate", str(gf)] if gf else [])
                res = run.invoke(cli, args)
                if res.exit_code != 0:
                    raise SystemExit(f"search --json failed: {res.output[-1000:]}")
                g = json.loads(res.stdout)["gate"]
                d = g.get("decided_by", g)
                g_used = shipped if model is None else model
                mine, t = g_used.probability(r["f"]), g_used.threshold
                worst = max(worst, abs(d["probability"] - mine))
                differ += bool(d["inject"]) != bool(mine >= t)
        out[v] = {"questions": len(rows), "largest_p_difference": round(worst, 5), "decisions_differ": differ}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/gate/lovo"))
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("AUTORESEARCH_DATA", DATA)))
    ap.add_argument("--recollect", action="store_true")
    ap.add_argument("--check", action="store_true", help="compare with `search --json` on a sample per vault")
    ap.add_argument("--write-default", action="store_true",
                    help="fit the chosen recipe on every labelled vault and write search_core/gate/gate_default.json")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=FILE",
                    help="another gate file scored beside the shipped default (e.g. the default before it)")
    ap.add_argument("--no-nested", action="store_true",
                    help="skip the nested choice (the recipe chosen without the left-out vault too): it fits every "
                    "recipe on every inner pool, most of the run's time")
    ap.add_argument("--final", action="store_true",
                    help="only the set kept unread (benchmarks.common.UNREAD_SETS): search it once, after a run on the labelled vaults decided, and score "
                    "FINAL_RECIPES fitted without its vault, the shipped default and the cosine gate on it (nothing is "
                    "chosen by it)")
    ap.add_argument("--decided", default=CURRENT_RECIPE, choices=list(RECIPES), metavar="RECIPE",
                    help="with --final: the recipe the run on the labelled vaults decided (the others are paired "
                    "against it)")
    ap.add_argument("--sets", type=Path, default=SETS,
                    help="the folder of the question sets (default benchmarks/sets)")
    ap.add_argument("--vaults", default=",".join(LABELLED),
                    help="the labelled vaults, comma-separated (default: all of them): each is left out in turn")
    ap.add_argument("--out", default="gate-lovo")
    a = ap.parse_args()
    vaults = tuple(a.vaults.split(","))
    if unknown := [v for v in vaults if v not in LABELLED]:
        ap.error(f"unknown vault(s) {', '.join(unknown)}; known: {', '.join(LABELLED)}")
    also = {}
    for spec in a.also:
        name, _, path = spec.partition("=")
        also[name] = load_gate(path)
    t0 = time.perf_counter()
    if a.final:
        results = {"final": final_read(a), "seconds": round(time.perf_counter() - t0, 1)}
        write_result(a.out, results)
        print_final(results["final"])
        return
    data = {v: collect(v, a) for v in vaults}
    shipped = load_gate(DEFAULT_GATE_FILE)
    results = {"shipped": {"threshold": shipped.threshold, "fit_vaults": shipped_fit_vaults(shipped),
                           "note": shipped.fitted_on.get("note", "")},
               "own_rows": {v: {"rows": len(d["own"]), "probes": sum(1 - r["y"] for r in d["own"]),
                                "seconds": d.get("own_seconds")} for v, d in data.items()},
               "left_out": {}}
    outer = {}
    for name in RECIPES:                      # the shipped default's recipe: mean over left-out vaults
        b = []
        for v in vaults:
            m = fit_recipe(data, [w for w in vaults if w != v], name)
            rows = data[v]["labelled"]
            b.append(score(probabilities(m, [r["f"] for r in rows]), [r["y"] for r in rows], m.threshold)["bacc"])
        outer[name] = {"per_vault": dict(zip(vaults, b)), "mean": round(float(np.mean(b)), 4), "min": min(b)}
    results["recipes"] = outer
    # each recipe against the one shipped before, per left-out vault, paired over its questions; the shipped
    # recipe is the best mean among those better on the mean and worse on no left-out vault, each beyond noise
    # (the current one if none is: shippable_recipes)
    for name in RECIPES:
        outer[name]["vs_current"] = {}
        diffs = []
        for v in vaults:
            rows = data[v]["labelled"]
            pool = [w for w in vaults if w != v]
            mc, mn = fit_recipe(data, pool, CURRENT_RECIPE), fit_recipe(data, pool, name)
            feats, y = [r["f"] for r in rows], np.array([r["y"] for r in rows])
            inj_c, inj_n = probabilities(mc, feats) >= mc.threshold, probabilities(mn, feats) >= mn.threshold
            outer[name]["vs_current"][v] = paired(inj_c, inj_n, y)
            diffs.append(shares(inj_n, y) - shares(inj_c, y))
        outer[name]["worse_beyond_noise"] = [v for v, pr in outer[name]["vs_current"].items() if pr["worse_beyond_noise"]]
        # how far the mean's difference could move by the questions drawn: the rule's "better on the mean"
        outer[name]["mean_diff_ci95"] = [round(x, 4) for x in stratified_bootstrap_ci(diffs)]
    shippable = shippable_recipes(outer, CURRENT_RECIPE)
    chosen = max(shippable, key=lambda k: (outer[k]["mean"], k == CURRENT_RECIPE))
    results["best_mean_recipe"] = max(outer, key=lambda k: (outer[k]["mean"], k == CURRENT_RECIPE))
    results["chosen_recipe"] = chosen
    results["chosen_vs_current"] = outer[chosen]["vs_current"]
    gates = {}
    gdir = a.cache / "gates"
    gdir.mkdir(parents=True, exist_ok=True)
    for v in vaults:
        pool = [w for w in vaults if w != v]
        results["left_out"][v] = left_out(data, v, pool, shipped, also, chosen, nested_choice=not a.no_nested)
        gates[v] = fit_recipe(data, pool, chosen, fp=embedder_fingerprint(a)).save(gdir / f"lovo-{v}.json")
    results["nested"] = ({v: results["left_out"][v]["nested"]["bacc"] for v in vaults} if not a.no_nested
                         else {})
    results["nested_mean"] = round(float(np.mean(list(results["nested"].values()))), 4) if results["nested"] else None
    # each rule of the vault's own scale over the left-out vaults, on the chosen recipe's left-out gates: kept only if better on the mean
    # than the fit's cut and worse on none beyond noise (the paired bootstrap's 95 % interval below zero)
    results["rules"] = {}
    for rule in RULES:
        per = {v: results["left_out"][v]["lovo"][rule]["bacc"] for v in vaults}
        worse = [v for v in vaults if rule != "fit cut"
                 and results["left_out"][v]["paired_vs_fit_cut"][rule]["worse_beyond_noise"]]
        results["rules"][rule] = {"per_vault": per, "mean": round(float(np.mean(list(per.values()))), 4),
                                  "worse_beyond_noise": worse}
    base = results["rules"]["fit cut"]["mean"]
    for rule, r in results["rules"].items():
        r["kept"] = rule != "fit cut" and r["mean"] > base and not r["worse_beyond_noise"]
    if a.check:
        results["search_json_check"] = check_cli(data, a, gates)
    if a.write_default:
        cfg = SearchConfig(embedder="e5-small")
        m = fit_recipe(data, vaults, chosen, fp=embedder_fingerprint(a))
        sets = [*(DEMO_SETS if "demo" in vaults else ()), *(("beir-qrels_test",) if "autorag" in vaults else ()),
                *(n for v, names in SETS_OF.items() if v != "demo" and v in vaults for n in names)]
        m = dataclasses.replace(m, **{"fitted_on": {**m.fitted_on, "gold_sets": sets, "config_hash": cfg.config_hash(),
                                                     "note": f"shipped default: {chosen}; recipe chosen by the mean "
                                                     f"balanced accuracy over left-out vaults ({', '.join(vaults)}) "
                                                     "among those worse on none beyond noise, fitted on all of them. "
                                                     "Re-fit: benchmarks/bench_gate_lovo.py --write-default"}})
        m.save(DEFAULT_GATE_FILE)
        print(f"wrote {DEFAULT_GATE_FILE}: {chosen}, threshold {m.threshold:.4f}")
    results["seconds"] = round(time.perf_counter() - t0, 1)
    write_result(a.out, results)
    print_tables(results)


def print_tables(results):
    print("recipes, balanced accuracy per left-out vault (fitted on the others):")
    for name, r in results["recipes"].items():
        print(f"  {name:<31} " + " ".join(f"{v} {b:.3f}" for v, b in r["per_vault"].items()) + f"  mean {r['mean']:.3f}"
              + (f"  worse beyond noise on {', '.join(r['worse_beyond_noise'])}" if r["worse_beyond_noise"] else ""))
    print(f"best mean: {results['best_mean_recipe']}")
    print("mean over left-out vaults against the current recipe, 95 % (questions drawn again within each vault):")
    for name, r in results["recipes"].items():
        lo, hi = r["mean_diff_ci95"]
        print(f"  {name:<41} {r['mean'] - results['recipes'][CURRENT_RECIPE]['mean']:+.4f} ({lo:+.4f}..{hi:+.4f})")
    print(f"chosen: {results['chosen_recipe']}; against {CURRENT_RECIPE}, per left-out vault:")
    for v, pr in results["chosen_vs_current"].items():
        print(f"  {v:<11} {pr['diff']:+.3f} (95 % {pr['ci95'][0]:+.3f}..{pr['ci95'][1]:+.3f}, p {pr['p']:.3f})")
    if results["nested"]:
        print("nested (recipe chosen without the vault too): "
              + " ".join(f"{v} {b:.3f}" for v, b in results["nested"].items()) + f"  mean {results['nested_mean']:.3f}")
    print("each vault's own scale (the chosen recipe's left-out gate; balanced accuracy per left-out vault):")
    for rule, r in results["rules"].items():
        print(f"  {rule:<18} " + " ".join(f"{v} {b:.3f}" for v, b in r["per_vault"].items()) + f"  mean {r['mean']:.3f}"
              + (f"  worse beyond noise on {', '.join(r['worse_beyond_noise'])}" if r["worse_beyond_noise"] else "")
              + ("  KEPT" if r["kept"] else ""))
    for v, r in results["left_out"].items():
        print(f"\n{v} left out ({r['answerable']} answerable, {r['probes']} probes; fit on {', '.join(r['fit_vaults'])}; "
              f"recipe {r['recipe']}; nested {r['nested_recipe']})")
        print(f"  {'gate':<36} {'bacc':>6} {'AUROC':>6} {'thr':>6} {'ans inj':>8} {'probe inj':>9}")
        def line(name, s):
            print(f"  {name:<36} {s['bacc']:>6.3f} {s['auroc']:>6.3f} {s['threshold']:>6.3f} "
                  f"{s['answerable_injected']:>8.3f} {s['probes_injected']:>9.3f}")
        line("shipped default" + (" (in sample)" if r["shipped"]["in_sample"] else ""), r["shipped"])
        for rule, s in r["lovo"].items():
            line(f"lovo, {rule}", s)
        for name, sc in r.get("also", {}).items():
            line(name + (" (in sample)" if sc["in_sample"] else ""), sc)
        line("nested", r["nested"])
        line("cosine 0.82", r["cosine"])
        line("lovo, best cut on these labels", r["ceiling"])
        for name, sc in r.get("by_recipe", {}).items():
            line(f"{name[:25]} (best cut {sc['best_cut']['bacc']:.3f})", sc)
        for rule, s in r["shipped_rules"].items():
            if rule != "fit cut":
                line(f"shipped, {rule}", s)
        for rule, pr in r["paired_vs_fit_cut"].items():
            print(f"    {rule} vs fit cut: {pr['diff']:+.3f} (95 % {pr['ci95'][0]:+.3f}..{pr['ci95'][1]:+.3f}, p {pr['p']:.3f})")



def print_final(f):
    print(f"final, {f['set']} ({f['answerable']} answerable, {f['probes']} probes), read once; the recipes fitted on "
          f"{', '.join(f['fit_vaults'])}; decided: {f['decided']}")
    def line(name, s):
        print(f"  {name:<36} bacc {s['bacc']:.3f} AUROC {s['auroc']:.3f} thr {s['threshold']:.3f} "
              f"answerable injected {s['answerable_injected']:.3f} probes injected {s['probes_injected']:.3f}"
              + (f"  best cut {s['best_cut']['bacc']:.3f}" if "best_cut" in s else ""))
    for g, s in f["gates"].items():
        line(g, s)
    line("cosine 0.82", f["cosine"])
    for g, pr in f["vs_decided"].items():
        print(f"  {g} vs decided: {pr['diff']:+.3f} (95 % {pr['ci95'][0]:+.3f}..{pr['ci95'][1]:+.3f}, p {pr['p']:.3f})")
    print(f"  injected by level: {f['injected_by_level']}; search decided as the shipped file on "
          f"{f['search_decided_as_shipped']} of {f['answerable'] + f['probes']}")
    for g, ms in f["misses"].items():
        print(f"  {g} misses: " + "; ".join(
            f"{'skipped' if m['y'] else 'injected'} {m['level']} {m['query']!r} {m['p']}" for m in ms))


if __name__ == "__main__":
    main()
