"""Does a night on questions the vault supplies recover the gap between the hand-set start and the shipped default?

Per vault and seed: `gold make` (tuner.data.vault_questions, its defaults, --seed S) writes the tuning set;
the real sweep (tuner.sweep.loop.Sweep: the packaged default space, the default keep rule, 119 rounds) runs
on it from the demo's hand-set start (experiments/demo-start.toml) and, separately, from the shipped
default; then the start, the night's final config and the shipped default are scored on hand-written
questions the night never saw. Reported: held-out hit@5 and MRR of each, the share of the start -> default
gap the night recovered, whether hit@5 ever fell below the start, and, across the configs the sweep
evaluated, the rank correlation (Spearman) of their MRR on the made questions and on the hand-written ones.

Vaults and hand-written questions:
  demo        experiments/demo-vault (138 notes); --judge tune: demo-tune, holdout: demo-holdout
  johngrib    the 604-note subset of bench_gold_make.py (gold notes of the six spent sets + 300 random,
              seed 0); tune: johngrib-tune + johngrib-week + johngrib-last, holdout: johngrib-holdout +
              johngrib-final + johngrib-blind (johngrib-next is never read)
  baekjungho  /work/vaults/baekjungho-wiki/_wiki (753 notes); tune: baekjungho-tune, holdout:
              baekjungho-holdout (searched once, as the final measurement)
  voyager003  /work/vaults/voyager003-wiki/_wiki (210 notes); tune: voyager003-tune, holdout:
              voyager003-holdout (searched once, as the final measurement of the recipe's nights); its index
              is built under --cache on first use
  syshin0116  /work/vaults/syshin0116-syshin0116.github.io/content (274 notes, links inside sentences); tune:
              syshin0116-tune, holdout: syshin0116-final (read once, after every choice: --rejudge)
  crackyachae /work/vaults/crackyachae-crackyachae.github.io/_study (278 notes); tune: crackyachae-tune (written
              after the holdout was spent, from other notes), holdout: crackyachae-holdout (spent)
Design choices are made with --judge tune on demo and johngrib only.

Indexes, made sets and ledgers are cached under --cache (outside the repository); the e5-small base
indexes are copied from the caches bench_gold_make.py and the vault-set checks built.

    python benchmarks/bench_recovery.py --prepare --vaults demo          # base index copies (+ minilm-l6)
    python benchmarks/bench_recovery.py --vaults demo --judge tune,holdout --rounds 60 [--starts default] [--mask-link]
    python benchmarks/bench_recovery.py --vaults johngrib --judge tune,holdout --rounds 60 --space NO_EMBEDDER.toml
    python benchmarks/bench_recovery.py --vaults baekjungho --judge holdout --rounds 60 --space NO_EMBEDDER.toml
    python benchmarks/bench_recovery.py --report runs/bench/recovery-*.json --judge holdout   # the BENCHMARKS table
    python benchmarks/bench_recovery.py --vault-json READY.json --vaults SHORT --judge tune ...   # a vault made elsewhere
    python benchmarks/bench_recovery.py --vault-json READY.json --judge holdout --rejudge <cache>/SHORT/*-partial.json
                                                      # its final set, read once, after every choice is made
(NO_EMBEDDER.toml: the packaged default space less [embedder], whose one loadable alternative takes 30+ min
to index a wiki on a loaded machine.) Results: runs/bench/recovery-<variant>-<starts>-<judges>-<vaults>.json,
and <cache>/<vault>/<variant>-<starts>-partial.json after each night.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # spinning OpenMP threads on a loaded machine

from benchmarks.common import write_result  # noqa: E402

SETS = ROOT / "benchmarks" / "sets"
GOLD = ROOT / "experiments" / "gold"
START = ROOT / "experiments" / "demo-start.toml"


@dataclass(frozen=True)
class VaultCase:
    name: str
    vault: Path
    base_db: Path | None            # an e5-small index of the vault, copied under the cache (None: built there)
    judge: dict                     # "tune" | "holdout" -> hand-written set files
    whole: Path | None = None       # the whole vault the indexed one was cut from (--anchors-from-whole)


VAULTS = {
    "demo": VaultCase("demo", ROOT / "experiments" / "demo-vault", Path("/work/cache/goldmake/demo/index.sqlite"),
                      {"tune": (GOLD / "demo-tune.yaml",), "holdout": (GOLD / "demo-holdout.yaml",)}),
    "johngrib": VaultCase("johngrib", Path("/work/cache/goldmake/johngrib-subset/vault"),
                          Path("/work/cache/goldmake/johngrib-subset/index.sqlite"),
                          {"tune": tuple(SETS / f"johngrib-{s}.yaml" for s in ("tune", "week", "last")),
                           "holdout": tuple(SETS / f"johngrib-{s}.yaml" for s in ("holdout", "final", "blind"))},
                          Path("/work/shared/data/johngrib-wiki/_wiki")),
    "baekjungho": VaultCase("baekjungho", Path("/work/vaults/baekjungho-wiki/_wiki"),
                            Path("/work/cache/baekjungho-wiki.sqlite"),
                            {"tune": (SETS / "baekjungho-tune.yaml",), "holdout": (SETS / "baekjungho-holdout.yaml",)}),
    "voyager003": VaultCase("voyager003", Path("/work/vaults/voyager003-wiki/_wiki"), None,
                            {"tune": (SETS / "voyager003-tune.yaml",), "holdout": (SETS / "voyager003-holdout.yaml",)}),
    "syshin0116": VaultCase("syshin0116", Path("/work/vaults/syshin0116-syshin0116.github.io/content"),
                            Path("/work/cache/idx/syshin0116.sqlite"),
                            {"tune": (SETS / "syshin0116-tune.yaml",), "holdout": (SETS / "syshin0116-final.yaml",)}),
    "crackyachae": VaultCase("crackyachae", Path("/work/vaults/crackyachae-crackyachae.github.io/_study"),
                             Path("/work/cache/idx/crackyachae.sqlite"),
                             {"tune": (SETS / "crackyachae-tune.yaml",), "holdout": (SETS / "crackyachae-holdout.yaml",)}),
}


def case_from_json(path: Path) -> VaultCase:
    """A vault prepared outside this script, described by a JSON file {"short", "vault_dir", "db", "tune", "final"}
    (the hand-written tune set and the unread final set, each a gold file): judged on "tune", and on "holdout" (its
    final set) once every choice is made."""
    d = json.loads(Path(path).read_text())
    missing = [k for k in ("short", "vault_dir", "db", "tune") if not d.get(k)]
    if missing:
        raise SystemExit(f"{path}: no {', '.join(missing)}; it needs short, vault_dir, db, tune (and final)")
    judge = {"tune": (Path(d["tune"]),), **({"holdout": (Path(d["final"]),)} if d.get("final") else {})}
    return VaultCase(d["short"], Path(d["vault_dir"]), Path(d["db"]), judge)


def base_index(case: VaultCase, cache: Path) -> Path:
    """The vault's e5-small index, copied once under cache (a sweep writes beside its index), or built there
    when the case names none."""
    db = cache / case.name / "index.sqlite"
    if not db.exists() and case.base_db is None:
        from search_core.index.indexer import index_vault
        db.parent.mkdir(parents=True, exist_ok=True)
        index_vault(case.vault, db, cache=db.parent / "embed-cache.sqlite")
    elif not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        tmp = db.with_suffix(".tmp")
        from search_core.index.store import connect
        src = connect(case.base_db)
        try:           # a WAL index copied whole, in one consistent read
            if tmp.exists():
                tmp.unlink()
            src.execute("VACUUM INTO ?", (str(tmp),))
        finally:
            src.close()
        tmp.rename(db)
    return db


def hand_set(case: VaultCase, judge: str):
    """The hand-written questions, answerable ones only (hit@5 and MRR are over those), as one GoldSet."""
    from tuner.data.gold import GoldSet, load_gold
    sets = [load_gold(p) for p in case.judge[judge]]
    return GoldSet(f"{case.name}-{judge}", "+".join(g.name for g in sets),
                   tuple(q for g in sets for q in g.questions if not q.is_probe))


def made_set(case: VaultCase, cache: Path, seed: int, n: int, variant: str, anchor_share: float | None = None,
             mask_link: bool = False, whole: bool = False, heading_title: bool = True,
             kinds: tuple[str, ...] | None = None, findable_in: Path | None = None, findable_within: int = 10) -> Path:
    """`gold make` (seed, n, anchor_share, mask_link) written under cache: the night's tuning set. whole: read
    the whole vault the indexed one was cut from (its other notes give anchors too), questions about the
    indexed notes only."""
    from search_core.ingest.vault import list_vault
    from tuner.data.vault_questions import DEFAULT_KINDS, write_vault_questions
    out = cache / case.name / "made" / f"{variant}-n{n}-seed{seed}.yaml"
    if whole and case.whole is None:
        raise SystemExit(f"{case.name} has no whole vault to draw anchors from")
    if not out.exists():
        source = case.whole if whole else case.vault
        write_vault_questions(source, out, n=n, seed=seed, anchor_share=anchor_share, mask_link=mask_link,
                              heading_title=heading_title, kinds=kinds or DEFAULT_KINDS, only_notes={f.note_id for f in list_vault(case.vault)} if whole else None,
                              findable_in=findable_in, findable_within=findable_within,
                              command=f"gold make {source} -n {n} --seed {seed}"
                                      + (f" --anchor-share {anchor_share}" if anchor_share is not None else "")
                                      + (" --mask-link" if mask_link else "")
                                      + ("" if heading_title else " --heading-alone")
                                      + (f" --kinds {','.join(kinds)}" if kinds else "")
                                      + (f" --findable-in {findable_in} --findable-within {findable_within}"
                                         if findable_in else "")
                                      + (f" (questions about the notes of {case.vault} only)" if whole else ""))
    return out


def night(case: VaultCase, db: Path, gold: Path, start, seed: int, cache: Path, tag: str, rounds: int,
          space: Path | None = None, budget: float | None = None, whole: bool = False, pairs: bool | None = None,
          default_round: bool | None = None):
    """The real sweep (default keep rule; the packaged default space unless `space`) on `gold` from `start`:
    (Sweep, summary). budget: its time budget, which it first spends on more questions from the vault when
    the set cannot detect its gains (tuner/sweep/evidence_budget.py; whole: from the whole vault). pairs: whether a
    stalled cycle is followed by pair rounds, default_round: whether round 1 tries the shipped default (None: the
    sweep's default)."""
    from tuner.data.bundled import default_space
    from tuner.ledger.ledger import Ledger
    from tuner.sweep.loop import Sweep, SweepParams
    ledger_path = cache / case.name / "ledgers" / f"{tag}.sqlite"
    ledger_path.parent.mkdir(parents=True, exist_ok=True)
    if ledger_path.exists():
        ledger_path.unlink()
    params = SweepParams(db=str(db), gold=str(gold), space=str(space or default_space()), rounds=rounds, seed=seed,
                         vault=str(case.whole if whole else case.vault), index_dir=str(cache / case.name / "indexes"),
                         cost_store=str(cache / "cost-model"), time_budget_s=budget,
                         **{k: v for k, v in (("pairs", pairs), ("default_round", default_round)) if v is not None})
    ledger = Ledger(ledger_path)
    try:
        sw = Sweep(params, ledger, start=start)
        summary = sw.run()
    finally:
        ledger.close()
    return sw, summary


def rejudge(res: dict, case: VaultCase, cache: Path, judge: str, progress=print) -> dict:
    """Saved nights (a result or partial file's runs) judged on one more hand-written set: the start, each
    night's final config and the shipped default scored on `judge`'s set, as run_case judges them. For a set read
    last, once every choice is made (a vault's final set)."""
    from search_core.config import SearchConfig, load_config
    from tuner.sweep.workbench import Workbench
    db = base_index(case, cache)
    bench = Workbench(db, vault=str(case.vault), index_dir=str(cache / case.name / "indexes"))
    hand = hand_set(case, judge)
    emb = bench.base_embedder
    default = scores(bench.evaluate(SearchConfig().replace(embedder=emb), hand))
    res = {**res, "judges": {**res["judges"], judge: {"sets": [p.stem for p in case.judge[judge]],
                                                       "n": len(hand.questions)}}}
    runs = []
    for row in res["runs"]:
        start = (load_config(START) if row["start_from"] == "hand-set" else SearchConfig()).replace(embedder=emb)
        s0 = scores(bench.evaluate(start, hand))
        s1 = scores(bench.evaluate(start.replace(**row["final_config"]), hand))
        runs.append({**row, "by_judge": {**row["by_judge"], judge: {
            "start": s0, "night": s1, "default": default,
            "recovered": {m: gap_share(s0[m], s1[m], default[m]) for m in ("hit@5", "mrr")},
            "hit5_below_start": s1["hit@5"] < s0["hit@5"] - 1e-9,
            "agreement": {"configs": 0, "mrr_spearman": None, "hit5_spearman": None, "pairs": []}}}})
        progress(f"{case.name} seed {row['seed']} from {row['start_from']} [{judge}]: hit@5 {s0['hit@5']:.3f} -> "
                 f"{s1['hit@5']:.3f} (default {default['hit@5']:.3f}), MRR {s0['mrr']:.3f} -> {s1['mrr']:.3f} "
                 f"(default {default['mrr']:.3f})")
    for s in bench.searchers.values():
        s.close()
    return {**res, "runs": runs}


def scores(res) -> dict:
    return {"hit@5": round(res.overall["hit@5"], 4), "mrr": round(res.overall["mrr"], 4)}


def visited_agreement(sw, hand) -> dict:
    """Across the distinct configs the sweep evaluated: their MRR (and hit@5) on the made questions (from
    the ledger) against the same configs on the hand-written ones; Spearman rank correlation."""
    from scipy.stats import spearmanr
    from search_core.config import SearchConfig
    seen = {}
    for r in sw.rows:
        if r.result is None or not r.result.per_query or r.config_hash in seen:
            continue
        seen[r.config_hash] = (r.search_config, r.result.overall)
    pairs = []
    for cfg, made in seen.values():
        h = sw.bench.evaluate(cfg, hand).overall
        pairs.append({"made_mrr": made["mrr"], "hand_mrr": h["mrr"], "made_hit5": made["hit@5"],
                      "hand_hit5": h["hit@5"], "config": {k: v for k, v in cfg.as_dict().items()
                                                          if v != getattr(SearchConfig(), k)}})

    def rho(a, b):
        if len(pairs) < 3:
            return None
        r = spearmanr([p[a] for p in pairs], [p[b] for p in pairs]).statistic
        return None if r != r else round(float(r), 3)
    return {"configs": len(pairs), "mrr_spearman": rho("made_mrr", "hand_mrr"),
            "hit5_spearman": rho("made_hit5", "hand_hit5"), "pairs": pairs}


def gap_share(start: float, final: float, default: float) -> float | None:
    """The share of the start -> default gain the night recovered; None ("no gap") when the default does not
    beat the start: a ratio of two losses would read as a recovery (voyager003's MRR, start 0.908 above the
    default's 0.889, a night at 0.836: 3.8)."""
    return None if default - start < 1e-9 else round((final - start) / (default - start), 3)


def run_case(case: VaultCase, cache: Path, seeds, judges, n: int, rounds: int, variant: str,
             starts=("hand-set", "default"), progress=print, space: Path | None = None,
             anchor_share: float | None = None, mask_link: bool = False, whole: bool = False,
             budget: float | None = None, heading_title: bool = True, tuning: str = "made",
             agreement: bool = True, findable: int | None = None, pairs: bool | None = None,
             cloze_words: int | None = None, default_round: bool | None = None) -> dict:
    """Each night runs once and is judged on every set in `judges` ("tune", "holdout"): the night never sees
    them, so the same night serves the design iterations (tune) and the reported figures (holdout).
    tuning: what the night tunes on: "made" (the made set alone), "hand+made" (the vault's hand-written tune
    set, probes too, beside the made set, combined as the daemon combines them: tuner.data.night_gold),
    "hand" (the hand-written tune set alone); with a hand-written part it cannot be judged on "tune".
    findable: gold make's findable_in (the base index) within this rank: only questions some fusion list alone
    finds in its top `findable` (None: every question). pairs: pair rounds after a stalled cycle (None: the
    sweep's default). cloze_words: the cloze questions' length in words (None: gold cloze's default, 0: whole
    lines)."""
    from search_core.config import SearchConfig, load_config
    from tuner.data.cloze import CLOZE_WORDS
    from tuner.sweep.params import SweepParams
    db = base_index(case, cache)
    if tuning in ("hand+made", "hand") and "tune" in judges:
        raise SystemExit(f"--tuning {tuning} tunes on the tune set: judge on holdout only")
    hands = {j: hand_set(case, j) for j in judges}
    out = {"vault": case.name, "judges": {j: {"sets": [p.stem for p in case.judge[j]], "n": len(h.questions)}
                                          for j, h in hands.items()},
           "n": n, "rounds": rounds, "variant": variant,
           "space": str(space) if space else "default",
           "anchor_share": anchor_share, "mask_link": mask_link, "anchors_from_whole": whole,
           "heading_title": heading_title,
           "time_budget_s": budget, "tuning": tuning, "findable": findable,
           "pairs": SweepParams.pairs if pairs is None else pairs,
           "default_round": SweepParams.default_round if default_round is None else default_round,
           **({"cloze_words": CLOZE_WORDS if cloze_words is None else cloze_words or None}
              if tuning.startswith("cloze") else {}), "runs": []}
    judge_bench = None
    for seed in seeds:
        night_db, night_case = db, case
        if tuning.startswith("cloze"):
            # the night runs on the copy without the cloze lines (tuner.data.cloze); it is judged on the vault's own
            # index, which the hand-written questions were written for
            from tuner.data.cloze import refresh_cloze
            from tuner.sweep.workbench import Workbench
            words = CLOZE_WORDS if cloze_words is None else cloze_words or None
            cl, _ = refresh_cloze(case.vault, cache / case.name / "cloze" / f"seed{seed}{f'-w{words}' if words else ''}",
                                  n=n, seed=seed, words=words, like=db)
            night_db, night_case = cl.db, dataclasses.replace(case, vault=cl.vault, whole=None)
            gold = cl.gold
            if tuning == "cloze+made":
                from tuner.data.night_gold import write_night_gold
                made = made_set(case, cache, seed, n, variant, anchor_share, mask_link, whole, heading_title)
                gold = write_night_gold([cl.gold, made], cache / case.name / "made",
                                        name=f"{variant}-{tuning}-seed{seed}").path
            if judge_bench is None:
                judge_bench = Workbench(db, vault=str(case.vault), index_dir=str(cache / case.name / "indexes"))
        else:
            gold = made_set(case, cache, seed, n, variant, anchor_share, mask_link, whole, heading_title,
                            findable_in=db if findable else None, findable_within=findable or 10)
        if tuning in ("hand+made", "hand"):
            from tuner.data.night_gold import write_night_gold
            from tuner.daemon.evidence import index_note_ids
            parts = [*case.judge["tune"], *([gold] if tuning == "hand+made" else [])]
            gold = write_night_gold(parts, cache / case.name / "made", name=f"{variant}-{tuning}-seed{seed}",
                                    known_ids=index_note_ids(db)).path
        for start_name in starts:
            start = load_config(START) if start_name == "hand-set" else SearchConfig()
            t0 = time.perf_counter()
            tag = f"{variant}{'' if tuning == 'made' else '-' + tuning}-{start_name}-seed{seed}"
            sw, summary = night(night_case, night_db, gold, start, seed, cache, tag, rounds,
                               space, budget, whole and night_case is case, pairs, default_round)
            summary = summary.to_json()
            base_emb = sw.bench.base_embedder
            final_cfg = SearchConfig().replace(**summary["final_config"])
            row = {"seed": seed, "start_from": start_name, "made_n": len(sw.gold.questions),
                   "made": {"start": summary["start"], "final": summary["final"]},
                   "final_config": {k: v for k, v in summary["final_config"].items()
                                    if v != summary["start_config"].get(k)},
                   "kept": [f"{p['variable']} {p['old']} -> {p['new']}" for p in summary["path"]],
                   "decisions": summary["decisions"], "status": summary.get("status"), "by_judge": {},
                   "evidence_step": sw.evidence_step.to_json() if sw.evidence_step else None}
            bench = judge_bench or sw.bench
            for j, hand in hands.items():
                s0 = scores(bench.evaluate(sw.start, hand))
                s1 = scores(bench.evaluate(final_cfg, hand))
                sd = scores(bench.evaluate(SearchConfig().replace(embedder=base_emb), hand))
                row["by_judge"][j] = {"start": s0, "night": s1, "default": sd,
                                      "recovered": {m: gap_share(s0[m], s1[m], sd[m]) for m in ("hit@5", "mrr")},
                                      "hit5_below_start": s1["hit@5"] < s0["hit@5"] - 1e-9,
                                      "agreement": visited_agreement(sw, hand) if agreement and bench is sw.bench else
                                      {"configs": 0, "mrr_spearman": None, "hit5_spearman": None, "pairs": []}}
            row["seconds"] = round(time.perf_counter() - t0, 1)
            out["runs"].append(row)
            (cache / case.name / f"{variant}{'' if tuning == 'made' else '-' + tuning}-{'+'.join(starts)}-partial.json").write_text(json.dumps(out, ensure_ascii=False, indent=1))
            j0 = judges[0]
            b = row["by_judge"][j0]
            progress(f"{case.name} seed {seed} from {start_name} [{j0}]: hit@5 {b['start']['hit@5']:.3f} -> "
                     f"{b['night']['hit@5']:.3f} (default {b['default']['hit@5']:.3f}), MRR {b['start']['mrr']:.3f} -> "
                     f"{b['night']['mrr']:.3f} (default {b['default']['mrr']:.3f}); kept {row['kept']}; agreement MRR "
                     f"{b['agreement']['mrr_spearman']} over {b['agreement']['configs']} configs; {row['seconds']:.0f} s")
            for s in sw.bench.searchers.values():
                s.close()
    return out


CHECK_CONFIGS = {      # moves off the hand-set start that nights on made sets kept or should keep
    "start": {}, "w_entity 0.2": {"w_entity": 0.2}, "w_entity 0.35": {"w_entity": 0.35},
    "w_sparse 0.5": {"w_sparse": 0.5}, "w_sparse 0.5, w_entity 0.35": {"w_sparse": 0.5, "w_entity": 0.35},
    "rrf_k 12": {"rrf_k": 12}, "w_sparse 0.5, rrf_k 12": {"w_sparse": 0.5, "rrf_k": 12},
    "default": None, "default, w_entity 0": {"w_entity": 0.0},
}


def config_check(case: VaultCase, cache: Path, seed: int, n: int, judge: str, made_kinds, progress=print,
                 whole: bool = False) -> dict:
    """Which of CHECK_CONFIGS a made set rewards, against the hand-written questions: per made set (the recipe
    with the title in its heading questions and without, and headings alone both ways), each config's MRR and
    hit@5 on it and on the hand-written set. A made set that rewards w_entity where the hand-written one does
    not is what sent voyager003's nights below the start."""
    from search_core.config import SearchConfig, load_config
    from tuner.data.gold import load_gold
    from tuner.sweep.workbench import Workbench
    db = base_index(case, cache)
    bench = Workbench(db, vault=str(case.vault), index_dir=str(cache / case.name / "indexes"))
    start = load_config(START)
    cfgs = {name: (SearchConfig() if moves is None else
                   (SearchConfig() if name.startswith("default") else start).replace(**moves))
            for name, moves in CHECK_CONFIGS.items()}
    sets = {"hand": hand_set(case, judge)}
    for label, kinds in made_kinds.items():
        for title in (True, False):
            path = made_set(case, cache, seed, n, f"check-{label}-{'title' if title else 'alone'}", 1.0, True,
                            whole, title, kinds)
            g = load_gold(path)
            if any(g.questions == other.questions for other in sets.values()):
                continue              # a vault with no anchor: its recipe set is its headings set
            sets[f"{label}, {'title' if title else 'no title'}"] = g
    out = {"vault": case.name, "seed": seed, "n": n, "judge": judge,
           "sizes": {k: len(g.questions) for k, g in sets.items()}, "scores": {}}
    for set_name, g in sets.items():
        out["scores"][set_name] = {c: scores(bench.evaluate(cfg, g)) for c, cfg in cfgs.items()}
        progress(f"{case.name} {set_name} ({len(g.questions)}): " + ", ".join(
            f"{c} {v['mrr']:.3f}/{v['hit@5']:.3f}" for c, v in out["scores"][set_name].items()))
    for s in bench.searchers.values():
        s.close()
    return out


RRF_KS = (1, 2, 5, 12, 30, 60, 120)
RRF_BASES = {        # fusions rrf_k can act on (the start fuses one list, which no k reorders), off the start
    "w_sparse 0.5": {"w_sparse": 0.5}, "w_dense 0.5, w_sparse 0.5": {"w_dense": 0.5, "w_sparse": 0.5}, "default": None,
}
SINGLE_LISTS = {"dense": {}, "keyword": {"w_dense": 0.0, "w_sparse": 1.0}, "ngram": {"w_dense": 0.0, "w_ngram": 1.0}}


def rrf_grid(case: VaultCase, cache: Path, seed: int, n: int, judge: str, whole: bool = False,
             progress=print) -> dict:
    """Which questions see rrf_k: the hand-written --judge set and the recipe's made set, each question's first
    rank under every RRF_BASES config at every RRF_KS and under each fusion list alone (SINGLE_LISTS, from the
    start), so a made subset (the questions some list alone finds in its top 10, or none) can be scored after."""
    from search_core.config import SearchConfig, load_config
    from tuner.data.gold import load_gold
    from tuner.sweep.workbench import Workbench
    db = base_index(case, cache)
    bench = Workbench(db, vault=str(case.vault), index_dir=str(cache / case.name / "indexes"))
    start = load_config(START)
    cfgs = {f"list {name}": start.replace(**moves) for name, moves in SINGLE_LISTS.items()}
    for base, moves in RRF_BASES.items():
        for k in RRF_KS:
            cfgs[f"{base} | k {k}"] = (SearchConfig() if moves is None else start.replace(**moves)).replace(rrf_k=k)
    sets = {"hand": hand_set(case, judge),
            "made": load_gold(made_set(case, cache, seed, n, "recipe", 1.0, True, whole))}
    out = {"vault": case.name, "seed": seed, "n": n, "judge": judge, "ranks": {}}
    for set_name, g in sets.items():
        ranks: dict = {q.id: {} for q in g.questions if not q.is_probe}
        for c, cfg in cfgs.items():
            for r in bench.evaluate(cfg, g).per_query:
                if r.id in ranks:
                    ranks[r.id][c] = r.first_rank
        out["ranks"][set_name] = ranks
        progress(f"{case.name} {set_name}: {len(ranks)} questions")
    for s in bench.searchers.values():
        s.close()
    return out


def rrf_grid_table(res: dict, within: int = 10) -> str:
    """MRR at each k per base, for the hand-written set, the made set, the made questions some list alone finds in
    its top `within` and those no list finds, and the questions some list alone puts first against the made ones
    the best list puts at 2-`within`."""
    def mrr(qs, c):
        return sum(1.0 / q[c] for q in qs if q.get(c)) / max(1, len(qs))

    def best(q):         # the best rank any fusion list alone gives the gold note (None: none finds it)
        return min((q[f"list {name}"] for name in SINGLE_LISTS if q.get(f"list {name}")), default=None)
    hand, made = (list(res["ranks"][k].values()) for k in ("hand", "made"))
    rows = {"hand-written": hand, "made (the recipe)": made,
            f"made, some list finds it in its top {within}": [q for q in made if best(q) and best(q) <= within],
            f"made, no list finds it in its top {within}": [q for q in made if not (best(q) and best(q) <= within)],
            "hand-written, some list puts it first": [q for q in hand if best(q) == 1],
            "made, some list puts it first": [q for q in made if best(q) == 1],
            f"made, the best list puts it at 2-{within}": [q for q in made if best(q) and 1 < best(q) <= within]}
    lines = [f"| {res['vault']}: set (questions) | fusion | " + " | ".join(f"k {k}" for k in RRF_KS) + " | best k |",
             "|---" * (len(RRF_KS) + 3) + "|"]
    for label, qs in rows.items():
        for base in RRF_BASES:
            vals = [mrr(qs, f"{base} | k {k}") for k in RRF_KS]
            best = RRF_KS[max(range(len(vals)), key=vals.__getitem__)]
            lines.append(f"| {label} ({len(qs)}) | {base} | " + " | ".join(f"{v:.3f}" for v in vals) + f" | {best} |")
    return "\n".join(lines)


def check_table(res: dict) -> str:
    """MRR (hit@5) of each config, per set; the config columns as CHECK_CONFIGS orders them."""
    names = list(CHECK_CONFIGS)
    lines = [f"| {res['vault']}: set (questions) | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for set_name, row in res["scores"].items():
        lines.append(f"| {set_name} ({res['sizes'][set_name]}) | " + " | ".join(
            f"{row[c]['mrr']:.3f} ({row[c]['hit@5']:.3f})" for c in names) + " |")
    return "\n".join(lines)


def table(result: dict, judge: str) -> str:
    jd = result["judges"][judge]
    lines = [f"### {result['vault']}: judged on {', '.join(jd['sets'])} ({jd['n']} answerable)",
             "", "| start | seed | hit@5 start | night | default | MRR start | night | default | gap recovered hit@5 | MRR "
             "| kept | agreement (MRR rho, configs) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["runs"]:
        r = {**row, **row["by_judge"][judge]}
        lines.append(f"| {r['start_from']} | {r['seed']} | {r['start']['hit@5']:.3f} | {r['night']['hit@5']:.3f} | "
                     f"{r['default']['hit@5']:.3f} | {r['start']['mrr']:.3f} | {r['night']['mrr']:.3f} | "
                     f"{r['default']['mrr']:.3f} | {r['recovered']['hit@5']} | {r['recovered']['mrr']} | "
                     f"{'; '.join(r['kept']) or '-'} | {r['agreement']['mrr_spearman']} ({r['agreement']['configs']}) |")
    return "\n".join(lines)


# how a result's tuning set reads in the report table, beside its variant label
TUNING_WORDS = {"made": "", "hand+made": " beside hand-written tune (hand+made)", "hand": " (hand-written tune alone)",
                "cloze": " (cloze questions alone)", "cloze+made": " (cloze questions and the made set)"}


def summary_rows(results: list[dict], judge: str) -> list[dict]:
    """One row per (vault, variant, start): the seeds' mean scores, the gap recovered, the seeds whose hit@5
    fell below the start, and the agreement's median and range."""
    import statistics
    rows = []
    for res in results:
        by_start: dict = {}
        for r in res["runs"]:
            if judge in r["by_judge"]:
                by_start.setdefault(r["start_from"], []).append(r)
        for start, runs in by_start.items():
            js = [r["by_judge"][judge] for r in runs]
            mean = lambda key, m: round(statistics.mean(j[key][m] for j in js), 3)      # noqa: E731
            rec = {m: [x for x in (gap_share(j["start"][m], j["night"][m], j["default"][m]) for j in js) if x is not None]
                   for m in ("hit@5", "mrr")}          # recomputed: result files written before gap_share's fix
            rho = sorted(j["agreement"]["mrr_spearman"] for j in js if j["agreement"]["mrr_spearman"] is not None)
            tuning = res.get("tuning", "made")
            rows.append({"vault": res["vault"], "n": res["n"], "start_from": start,
                         "variant": res["variant"] + TUNING_WORDS.get(tuning, f" ({tuning})"),
                         "seeds": [r["seed"] for r in runs], "judged_on": res["judges"][judge],
                         **{f"{k} {m}": mean(k, m) for k in ("start", "night", "default") for m in ("hit@5", "mrr")},
                         "recovered hit@5": rec["hit@5"], "recovered mrr": rec["mrr"],
                         "hit5 below start": sum(j["hit5_below_start"] for j in js),
                         "agreement": {"median": round(statistics.median(rho), 3) if rho else None,
                                       "min": rho[0] if rho else None, "max": rho[-1] if rho else None},
                         "kept": [r["kept"] for r in runs]})
    return rows


FUSION = ("w_dense", "w_sparse", "w_decomposed", "w_entity", "rrf_k", "embedder")


def markdown(rows: list[dict]) -> str:
    """The summary rows as the BENCHMARKS.md table."""
    def share(xs):
        return " / ".join("-" if x is None else f"{x:.2f}" for x in xs) if xs else "no gap"
    out = ["| vault (judged on, answerable) | made set | from | seeds | hit@5 start / night / default | "
           "MRR start / night / default | gap recovered, hit@5 (per seed) | MRR (per seed) | hit@5 below start | "
           "agreement, MRR rho: median (min, max) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ag = r["agreement"]
        out.append(f"| {r['vault']} ({', '.join(r['judged_on']['sets'])}, {r['judged_on']['n']}) | {r['variant']}, "
                   f"n {r['n']} | {r['start_from']} | {len(r['seeds'])} | {r['start hit@5']:.3f} / "
                   f"{r['night hit@5']:.3f} / {r['default hit@5']:.3f} | {r['start mrr']:.3f} / {r['night mrr']:.3f} / "
                   f"{r['default mrr']:.3f} | {share(r['recovered hit@5'])} | {share(r['recovered mrr'])} | "
                   f"{r['hit5 below start']}/{len(r['seeds'])} | {ag['median']} ({ag['min']}, {ag['max']}) |")
    return "\n".join(out)


def disagreements(results: list[dict], judge: str, top: int = 3) -> list[str]:
    """Where the made questions and the hand-written ones part: per run, the configs the made set ranks
    best by MRR, with their rank on the hand-written set (1 = best of the visited configs)."""
    lines = []
    for res in results:
        for r in res["runs"]:
            pairs = r["by_judge"].get(judge, {}).get("agreement", {}).get("pairs", [])
            if len(pairs) < 3:
                continue
            hand_rank = {id(p): i + 1 for i, p in enumerate(sorted(pairs, key=lambda p: -p["hand_mrr"]))}
            best = sorted(pairs, key=lambda p: -p["made_mrr"])[:top]
            lines.append(f"{res['vault']} {res['variant']} seed {r['seed']} from {r['start_from']}: " + "; ".join(
                f"{ {k: v for k, v in p['config'].items() if k in FUSION} } made {p['made_mrr']:.3f} hand {p['hand_mrr']:.3f} (hand rank {hand_rank[id(p)]}"
                f"/{len(pairs)})" for p in best))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/recovery"))
    ap.add_argument("--vaults", default="demo,johngrib")
    ap.add_argument("--judge", default="tune", help="tune, holdout or tune,holdout: the hand-written sets each "
                    "night is judged on (the first is printed)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--starts", default="hand-set,default")
    ap.add_argument("-n", type=int, default=200, help="made questions (gold make's default)")
    ap.add_argument("--rounds", type=int, default=119)
    ap.add_argument("--variant", default="base", help="a label for the made sets and ledgers under --cache")
    ap.add_argument("--anchor-share", type=float, default=None, help="gold make's anchor_share")
    ap.add_argument("--mask-link", action="store_true", help="gold make's mask_link")
    ap.add_argument("--heading-alone", action="store_true",
                    help="gold make's heading_title=False: a heading question without its note's title")
    ap.add_argument("--anchors-from-whole", action="store_true",
                    help="read the whole vault the indexed one was cut from (johngrib: the whole wiki) for questions "
                         "about the indexed notes")
    ap.add_argument("--time-budget", type=float, default=None,
                    help="each night's time budget in seconds: the sweep first spends it on more questions from the "
                         "vault when its set cannot detect its gains")
    ap.add_argument("--space", type=Path, default=None, help="the sweep space (default: the packaged one)")
    ap.add_argument("--report", nargs="*", type=Path, default=None,
                    help="summarise these result files (partial or whole) for --judge and stop")
    ap.add_argument("--config-check", action="store_true",
                    help="score CHECK_CONFIGS on made sets with and without titles in heading questions and on the "
                         "hand-written --judge set, and stop")
    ap.add_argument("--check-sets", default="recipe,headings",
                    help="--config-check's made sets: recipe (gold make's), headings (heading questions alone)")
    ap.add_argument("--tuning", default="made", choices=("made", "hand+made", "hand", "cloze", "cloze+made"),
                    help="the night's tuning set: the made set alone, the hand-written tune set beside it (as the "
                         "daemon combines them), or the hand-written tune set alone")
    ap.add_argument("--pairs", action=argparse.BooleanOptionalAction, default=None,
                    help="pair rounds after a full cycle of single-variable rounds kept nothing (default: the sweep's)")
    ap.add_argument("--default-round", action=argparse.BooleanOptionalAction, default=None,
                    help="round 1 tries the shipped default, every search variable moved at once (default: the "
                         "sweep's)")
    ap.add_argument("--cloze-words", type=int, default=None, metavar="W",
                    help="with --tuning cloze: each cloze question's first W words (0: the whole line; default: "
                         "gold cloze's)")
    ap.add_argument("--no-agreement", action="store_true",
                    help="skip the agreement (every visited config scored on the hand-written sets: most of a "
                         "night's time on a loaded machine)")
    ap.add_argument("--rrf-grid", action="store_true",
                    help="score the hand-written --judge set and the recipe's made set at every RRF_KS over RRF_BASES "
                         "and under each fusion list alone, print MRR per k, and stop")
    ap.add_argument("--findable", type=int, nargs="?", const=10, default=None, metavar="RANK",
                    help="gold make's findable_in (the vault's base index): keep only made questions some fusion list "
                         "alone finds in its top RANK (10 when no RANK is given)")
    ap.add_argument("--vault-json", type=Path, default=None, metavar="FILE",
                    help="one more vault, described by a JSON file {short, vault_dir, db, tune, final}; name it in "
                         "--vaults by its short name")
    ap.add_argument("--rejudge", nargs="*", type=Path, default=None, metavar="RESULT",
                    help="judge the nights of these result files (partial or whole) on --judge's set (a set read "
                         "last, once every choice is made), write them with that judge added, and stop")
    ap.add_argument("--prepare", action="store_true", help="copy the base indexes and build the minilm-l6 ones")
    a = ap.parse_args()
    a.cache.mkdir(parents=True, exist_ok=True)
    names = a.vaults.split(",")
    if a.vault_json is not None:
        extra = case_from_json(a.vault_json)
        VAULTS[extra.name] = extra
    if a.rejudge is not None:
        judge = a.judge.split(",")[0]
        for f in a.rejudge:
            d = json.loads(f.read_text())
            results = [rejudge(res, VAULTS[res["vault"]], a.cache, judge,
                               progress=lambda l: print(l, file=sys.stderr, flush=True))
                       for res in (d["results"] if "results" in d else [d])]
            for res in results:
                print(table(res, judge) + "\n", flush=True)
            path = write_result(f"{f.stem.removesuffix('-partial')}-rejudged-{judge}", {"results": results})
            print(f"written to {path}", file=sys.stderr)
        return
    if a.report is not None:
        merged: dict = {}         # one result per (vault, variant, n): runs of several invocations together
        for f in a.report:
            d = json.loads(f.read_text())
            for res in d["results"] if "results" in d else [d]:
                # seeds run apart, under the variant's name and -sN (so their result files do not overwrite), join it
                res["variant"] = re.sub(r"-s\d+$", "", res["variant"])
                key = (res["vault"], res["variant"], res["n"], res.get("tuning", "made"))
                if key in merged:
                    merged[key]["runs"] += res["runs"]
                else:
                    merged[key] = {**res, "runs": list(res["runs"])}
        results = list(merged.values())
        judge = a.judge.split(",")[0]
        rows = summary_rows(results, judge)
        for row in rows:
            print(json.dumps(row, ensure_ascii=False), file=sys.stderr)
        print("\n".join(disagreements(results, judge)), file=sys.stderr)
        print(markdown(rows))
        return
    if a.config_check:
        checks = []
        for name in names:
            made_kinds = {k: v for k, v in {"recipe": None, "headings": ("heading",)}.items()
                          if k in a.check_sets.split(",")}
            checks.append(config_check(VAULTS[name], a.cache, int(a.seeds.split(",")[0]), a.n, a.judge.split(",")[0],
                                       made_kinds, progress=lambda l: print(l, file=sys.stderr, flush=True),
                                       whole=a.anchors_from_whole))
            print(check_table(checks[-1]) + "\n", flush=True)
        path = write_result(f"recovery-check-{a.judge.split(',')[0]}-{'-'.join(names)}", {"checks": checks})
        print(f"written to {path}", file=sys.stderr)
        return
    if a.rrf_grid:
        grids = []
        for name in names:
            grids.append(rrf_grid(VAULTS[name], a.cache, int(a.seeds.split(",")[0]), a.n, a.judge.split(",")[0],
                                  whole=a.anchors_from_whole, progress=lambda l: print(l, file=sys.stderr, flush=True)))
            print(rrf_grid_table(grids[-1]) + "\n", flush=True)
        path = write_result(f"recovery-rrfk-{a.judge.split(',')[0]}-{'-'.join(names)}", {"grids": grids})
        print(f"written to {path}", file=sys.stderr)
        return
    if a.prepare:
        from search_core.index.indexer import index_vault
        from search_core.search.pipeline import Searcher
        from search_core.config import ChunkConfig
        from tuner.sweep.workbench import index_path
        for name in names:
            case = VAULTS[name]
            db = base_index(case, a.cache)
            s = Searcher(db)
            chunk = ChunkConfig(**s.fingerprint["chunking"])
            s.close()
            t0 = time.perf_counter()
            target = index_path(a.cache / name / "indexes", "minilm-l6", chunk)
            index_vault(case.vault, target, embedder="minilm-l6", chunk_cfg=chunk,
                        cache=db.parent / "embed-cache.sqlite")
            print(f"{name}: minilm-l6 index {target} in {time.perf_counter() - t0:.0f} s", flush=True)
        return
    t0 = time.perf_counter()
    results = []
    for name in names:
        results.append(run_case(VAULTS[name], a.cache, [int(s) for s in a.seeds.split(",")], a.judge.split(","), a.n,
                                a.rounds, a.variant, tuple(a.starts.split(",")),
                                progress=lambda l: print(l, file=sys.stderr, flush=True), space=a.space,
                                anchor_share=a.anchor_share, mask_link=a.mask_link, whole=a.anchors_from_whole,
                                budget=a.time_budget, heading_title=not a.heading_alone, tuning=a.tuning,
                                agreement=not a.no_agreement, findable=a.findable, pairs=a.pairs,
                                default_round=a.default_round, cloze_words=a.cloze_words))
        print(table(results[-1], a.judge.split(",")[0]) + "\n", flush=True)
    path = write_result(f"recovery-{a.variant}-{a.starts.replace(',', '+')}-{a.judge.replace(',', '+')}-{'-'.join(names)}",
                        {"results": results, "seconds": round(time.perf_counter() - t0, 1)})
    print(f"written to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
