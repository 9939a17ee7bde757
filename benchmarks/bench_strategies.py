"""The sweep's one-variable-at-a-time rounds against the search strategies a user would pick instead,
on the same budget, the same splits, the same evaluation, with the holdout as judge.

Strategies (each gets the start evaluation plus BUDGET = 119 evaluations, from the shipped config):
  ovat            the real Sweep as the daemon runs it: one variable per round, optuna per variable, the
                  keep rule's defaults (the noninferior hit@5 guard; a gain that moves the ranking must pass
                  the paired test, p < 0.05). The results under benchmarks/results/ ran under the default
                  before it, the per-question veto (no tuning question leaves the top 5: --question-guard)
  ovat-count      the same Sweep with the keep rule before those two checks: the hit@5 guard counts
                  questions, any gain in score100 is kept
  tpe             optuna's TPE sampler over the whole space at once; final = the best tuning score100
  random          uniform draws on the space's grid; final = the best tuning score100
  autorag-greedy  AutoRAG's node-by-node greedy grid: every combination inside a node (embedder, then
                  depth, then weights x RRF k, then the gate threshold), the node's best passed on
  tpe+guard, random+guard   the same trials as tpe / random, the final config chosen with the sweep's
                  hit@5 guard (the best score100 among trials that lose no tuning hit@5 question)

Every strategy scores a config with the Workbench the sweep uses (what `search` returns, latency from the
cost model, the gate fitted on the tuning set), over one shared channel-list cache, so differences are the
strategy's. Each final config, and the incumbent at 10, 30 and 60 evaluations, is scored on the holdout
against the start config with the tuner's paired tests (tuner/evaluation/compare.py).

    python benchmarks/bench_strategies.py --sets demo,autorag-ko --seeds 0,1,2,3,4     # runs, appends
    python benchmarks/bench_strategies.py --report     # table, plot, benchmarks/results/strategies.json

Sets: demo (demo-tune / demo-holdout, the embedder in the space), autorag-ko (a 50/50 split per seed),
korquad-sample (40 seeded KorQuAD dev articles indexed as their own corpus, 300 seeded questions, 50/50
split per seed; the sample lives under runs/ only: KorQuAD is CC BY-ND), johngrib (benchmarks/sets/
johngrib-tune.yaml, 50/50 split per seed). A set's seed also seeds its split, and all strategies of
one seed share the split. Runs land in runs/strategies/runs-SET.jsonl (a rerun skips what is there);
--report writes aggregates only (no question text, no per-question rows).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT  # noqa: E402
DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))   # a git worktree sits one level deeper than ../shared

OUT = ROOT / "runs" / "strategies"
EXP = ROOT / "experiments"
SPACES = ROOT / "benchmarks" / "spaces"
RESULTS = ROOT / "benchmarks" / "results"
BUDGET = 119
CHECKPOINTS = (10, 30, 60, BUDGET)
RUN_STRATEGIES = ("ovat", "ovat-count", "tpe", "random", "autorag-greedy")
OVAT_RULES = {"ovat": {}, "ovat-count": {"hit5_guard": "count", "noise_alpha": None}}   # SweepParams changes
GUARDED = {"tpe+guard": "tpe", "random+guard": "random"}    # selections over another strategy's trials
OBJECTIVE = "score100"
KORQUAD_ARTICLES = 40      # of 140: ~275 paragraphs, indexed in minutes instead of the full dev set's hour
KORQUAD_QUESTIONS = 300


# -- the sets -------------------------------------------------------------------------------------------------

def korquad_sample(seed: int = 0) -> tuple[Path, Path]:
    """A seeded sample of KorQuAD dev articles as their own KorQuAD file, and a seeded sample of its
    questions as a gold YAML, both under runs/ (never committed: CC BY-ND). Returns (corpus, gold)."""
    import yaml

    from tuner.data.gold import load_gold
    corpus = OUT / "korquad-sample.json"
    gold = OUT / "korquad-sample-gold.yaml"
    if not corpus.exists():
        src = DATA / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json"
        doc = json.loads(src.read_text(encoding="utf-8"))
        pick = sorted(random.Random(seed).sample(range(len(doc["data"])), KORQUAD_ARTICLES))
        OUT.mkdir(parents=True, exist_ok=True)
        corpus.write_text(json.dumps({"version": doc.get("version"), "data": [doc["data"][i] for i in pick]},
                                     ensure_ascii=False), encoding="utf-8")
    if not gold.exists():
        qs = list(load_gold(corpus).questions)
        pick = sorted(random.Random(seed).sample(range(len(qs)), min(KORQUAD_QUESTIONS, len(qs))))
        doc = {"name": "korquad-sample", "questions": [{"id": qs[i].id, "level": qs[i].level, "query": qs[i].query,
                                                        "gold": list(qs[i].gold)} for i in pick]}
        gold.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return corpus, gold


def set_spec(name: str, args) -> dict:
    return {**_set_spec(name, args), "index_dir": OUT / f"indexes-{name}"}   # one folder per set: same file names


def _set_spec(name: str, args) -> dict:
    embedder_space = SPACES / "strategies-embedder.toml"
    plain_space = SPACES / "strategies.toml"
    with_emb = name in args.embedder_sets
    if name == "demo":
        return {"db": args.demo_db, "gold": EXP / "gold/demo-tune.yaml", "holdout": EXP / "gold/demo-holdout.yaml",
                "split": None, "vault": EXP / "demo-vault", "space": embedder_space if with_emb else plain_space}
    if name == "autorag-ko":
        beir = DATA / "autorag-ko" / "beir"
        return {"db": args.autorag_db, "gold": beir, "holdout": None, "split": 0.5, "vault": beir,
                "space": embedder_space if with_emb else plain_space}
    if name == "korquad-sample":
        corpus, gold = korquad_sample()
        db = OUT / "korquad-sample.sqlite"
        if not db.exists():
            from search_core.index.indexer import index_vault
            print(f"indexing {corpus.name} into {db} ...", flush=True)
            index_vault(corpus, db)
        return {"db": db, "gold": gold, "holdout": None, "split": 0.5, "vault": corpus,
                "space": embedder_space if with_emb else plain_space}
    if name == "johngrib":
        return {"db": args.johngrib_db, "gold": ROOT / "benchmarks/sets/johngrib-tune.yaml", "holdout": None,
                "split": 0.5, "vault": DATA / "johngrib-wiki" / "_wiki",
                "space": embedder_space if with_emb else plain_space}
    raise SystemExit(f"unknown set {name!r}: demo, autorag-ko, korquad-sample, johngrib")


# -- one Workbench per index, shared by every run on it --------------------------------------------------------

_BENCHES: dict = {}


def _shared_workbench(base_db, **kw):
    """The sweep's Workbench, one per index for the whole benchmark: the channel lists each (query, depth)
    needs are fetched once and every strategy re-fuses them in memory. The gate models are the one
    per-run state (fitted on each run's tuning set), so they are cleared for every new run."""
    from tuner.sweep.workbench import Workbench
    key = str(base_db)
    wb = _BENCHES.get(key)
    if wb is None:
        wb = _BENCHES[key] = Workbench(base_db, **kw)
    wb.gate_models.clear()
    wb.progress = kw.get("progress") or (lambda line: None)
    return wb


def make_sweep(spec: dict, seed: int, ledger, *, stop_flag=None, rule: dict | None = None):
    import tuner.sweep.loop as loop
    from tuner.sweep.loop import Sweep, SweepParams
    loop.Workbench = _shared_workbench
    p = SweepParams(db=str(spec["db"]), gold=str(spec["gold"]), space=str(spec["space"]),
                    holdout=str(spec["holdout"]) if spec["holdout"] else None, split=spec["split"],
                    rounds=BUDGET * 10, seed=seed, objective=OBJECTIVE,
                    vault=str(spec["vault"]) if spec["vault"] else None,
                    index_dir=str(spec["index_dir"]), cost_store=str(OUT / "cost-model"), **(rule or {}))
    return Sweep(p, ledger, stop_flag=stop_flag)


def prewarm(sw) -> dict:
    """Fetch every (question, depth) channel list once, for each embedder in the space, before any
    strategy is timed: the strategies' wall times then compare what they do, not who came first."""
    t0 = time.perf_counter()
    depths = grid(sw.space.get("depth")) if "depth" in sw.space.names() else [sw.start.depth]
    embedders = list(sw.space.get("embedder").choices) if "embedder" in sw.space.names() else [sw.start.embedder]
    questions = list(sw.gold.questions) + list(sw.hold_gold.questions)
    build_s = {}
    for emb in embedders:
        s, seconds = sw.bench.searcher_for(emb)
        build_s[emb] = round(seconds, 1)
        for d in depths:
            for q in questions:
                sw.bench.retrievals.get(s, q.query, d)
    return {"seconds": round(time.perf_counter() - t0, 1), "index_build_s": build_s, "depths": depths,
            "embedders": embedders, "questions": len(questions)}


# -- the space as the whole-space strategies see it -------------------------------------------------------------

def grid(v) -> list:
    from tuner.sweep.propose import _norm
    if v.kind == "categorical":
        return list(v.choices)
    step = v.step or 1
    n = int(round((v.high - v.low) / step))
    return [_norm(v, v.low + i * step) for i in range(n + 1)]


def whole_space(sw) -> list:
    """The variables a whole-space strategy turns: the space's, less a gate threshold that decides
    nothing on this set (no probes, or the other gate decides) -- the variables the sweep also skips."""
    return [sw.space.get(n) for n in sw.space.names() if sw._why_unavailable(n, sw.start) is None]


def distribution(v):
    import optuna
    if v.kind == "categorical":
        return optuna.distributions.CategoricalDistribution(list(v.choices))
    from tuner.sweep.propose import _distribution
    return _distribution(v)


# -- the evaluation every strategy uses -------------------------------------------------------------------------

class Evaluator:
    """The sweep's evaluation of a config on the tuning set (the gate fitted on the tuning set for the
    config's embedder, as the sweep's model rounds do), counted and timed."""

    def __init__(self, sw):
        self.sw = sw
        self.n = 0
        self.other_embedder = 0
        self.switches = 0
        self.last_embedder = sw.start.embedder
        self.reindex_s = 0.0

    def __call__(self, cfg) -> dict:
        _, built = self.sw.bench.searcher_for(cfg.embedder)
        self.reindex_s += built
        self.sw._ensure_gate(cfg)
        res = self.sw.bench.evaluate(cfg, self.sw.gold)
        self.n += 1
        self.other_embedder += cfg.embedder != self.sw.start.embedder
        self.switches += cfg.embedder != self.last_embedder
        self.last_embedder = cfg.embedder
        return res


def brief(res) -> dict:
    """What a run keeps of an evaluation (an EvalResult): aggregates only."""
    from tuner.sweep.keep_rule import objective_value, questions_hit
    hit, n = questions_hit(res)
    return {"score100": objective_value(res, "score100"), "hit@5": res.overall["hit@5"],
            "mrr": res.overall["mrr"], "hits": hit, "n": n, "gate_accuracy": res.gate.gate_accuracy}


# -- the strategies ---------------------------------------------------------------------------------------------
# Each returns trials: [(config, brief)] in evaluation order, and incumbents: the config it would return
# after each evaluation (index-aligned with trials).

def run_ovat(spec: dict, seed: int, ledger, rule: dict | None = None) -> dict:
    """The real Sweep, stopped once it has evaluated BUDGET configs (rounds that evaluate nothing -- a
    variable logged unavailable, a provably unchanged candidate -- do not count)."""
    holder: dict = {}

    def evaluated(rows):
        return sum(1 for r in rows[1:] if r.result is not None and r.result.latency_charge)

    sw = make_sweep(spec, seed, ledger, stop_flag=lambda: evaluated(holder["sw"].rows) >= BUDGET, rule=rule)
    holder["sw"] = sw
    t0 = time.perf_counter()
    sw.run()
    wall = time.perf_counter() - t0
    rows = sw.rows
    trials, incumbents, kept = [], [], rows[0]
    other = switches = 0
    last_emb = sw.start.embedder
    for r in rows[1:]:
        if r.result is None or not r.result.latency_charge:
            continue
        cfg = r.search_config
        other += cfg.embedder != sw.start.embedder
        switches += cfg.embedder != last_emb
        last_emb = cfg.embedder
        if r.kept:
            kept = r
        trials.append((cfg, {"score100": r.result.score100.total}))
        incumbents.append((kept.search_config, kept.result.score100.total))
    return {"sw": sw, "trials": trials, "incumbents": incumbents, "wall_s": wall, "other_embedder": other,
            "switches": switches, "reindex_s": sum(r.reindex_s or 0 for r in rows),
            "decisions": sw.summary().decisions}


def _best_so_far(trials, start, start_brief, guard: bool):
    """Incumbent after each trial: the best score100 so far (with the guard: among trials that lose no
    tuning hit@5 question against the start), the start itself a candidate."""
    best_cfg, best = start, start_brief
    out = []
    for cfg, b in trials:
        ok = not guard or b["hits"] >= start_brief["hits"]
        if ok and b["score100"] > best["score100"]:
            best_cfg, best = cfg, b
        out.append((best_cfg, best["score100"]))
    return out


def run_tpe(sw, seed: int) -> dict:
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ev = Evaluator(sw)
    vs = whole_space(sw)
    dists = {v.name: distribution(v) for v in vs}
    start_b = brief(sw.bench.evaluate(sw.start, sw.gold))
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    try:        # the start as the study's first (free) trial, as the sweep starts from it
        study.add_trial(optuna.trial.create_trial(params={v.name: getattr(sw.start, v.name) for v in vs},
                                                  distributions=dists, value=start_b["score100"]))
    except ValueError:
        pass     # the start lies off the grid (a fitted threshold): the sampler starts cold
    trials = []
    t0 = time.perf_counter()
    for _ in range(BUDGET):
        t = study.ask(dists)
        cfg = sw.start.replace(**t.params)
        b = brief(ev(cfg))
        study.tell(t, b["score100"])
        trials.append((cfg, b))
    return _whole_space_result(sw, ev, trials, start_b, time.perf_counter() - t0)


def run_random(sw, seed: int) -> dict:
    ev = Evaluator(sw)
    vs = whole_space(sw)
    rng = random.Random(seed)
    start_b = brief(sw.bench.evaluate(sw.start, sw.gold))
    trials = []
    t0 = time.perf_counter()
    for _ in range(BUDGET):
        cfg = sw.start.replace(**{v.name: rng.choice(grid(v)) for v in vs})
        trials.append((cfg, brief(ev(cfg))))
    return _whole_space_result(sw, ev, trials, start_b, time.perf_counter() - t0)


def _whole_space_result(sw, ev, trials, start_b, wall) -> dict:
    return {"trials": trials, "incumbents": _best_so_far(trials, sw.start, start_b, guard=False),
            "guarded": _best_so_far(trials, sw.start, start_b, guard=True), "wall_s": wall,
            "other_embedder": ev.other_embedder, "switches": ev.switches, "reindex_s": ev.reindex_s}


def interior(v, n: int, log: bool = False) -> list:
    """n values spread inside [low, high] (the centres of n equal cells, on a log scale for RRF k), on
    the variable's grid: a grid a user would write (a weight never at 0 or 1)."""
    out = []
    for i in range(n):
        f = (i + 0.5) / n
        x = math.exp(math.log(max(v.low, 1)) + f * (math.log(v.high) - math.log(max(v.low, 1)))) if log \
            else v.low + f * (v.high - v.low)
        if v.step:
            x = v.low + round((x - v.low) / v.step) * v.step
        out.append(int(round(x)) if v.kind == "int" else round(x, 6))
    return sorted(set(out))


def greedy_nodes(variables, budget: int = BUDGET) -> list[tuple[str, list[dict], str]]:
    """AutoRAG's pipeline as nodes over these variables: (node, every combination inside it, the metric
    it is chosen on). The weights x RRF k grid takes what the budget leaves after the other nodes, the
    gate node (when a gate decides) the rest."""
    import itertools
    names = {v.name: v for v in variables}
    nodes = []
    if "embedder" in names:
        nodes.append(("index", [{"embedder": c} for c in names["embedder"].choices], OBJECTIVE))
    if "depth" in names:
        nodes.append(("retrieval", [{"depth": d} for d in grid(names["depth"])], OBJECTIVE))
    gate = next((n for n in ("gate_threshold", "threshold") if n in names), None)
    used = sum(len(c) for _, c, _ in nodes) - len(nodes)     # each node's start-valued combination is free
    min_gate = 6 if gate else 0
    weights = [n for n in ("w_dense", "w_sparse", "w_decomposed", "w_entity") if n in names]
    levels = {"w_dense": 3, "w_sparse": 3, "w_decomposed": 2, "w_entity": 2}
    wgrid = [interior(names[w], levels[w]) for w in weights]
    n_w = math.prod(len(g) for g in wgrid)
    k_levels = max(1, (budget - used - min_gate) // n_w)
    kgrid = interior(names["rrf_k"], k_levels, log=True) if "rrf_k" in names else [None]
    combos = [dict(zip(weights, ws), **({"rrf_k": k} if k is not None else {}))
              for ws in itertools.product(*wgrid) for k in kgrid]
    nodes.append(("fusion", combos, OBJECTIVE))
    if gate:
        left = budget - used - len(combos)
        nodes.append(("gate", [{gate: t} for t in interior(names[gate], max(left, 1))], "gate_accuracy"))
    return nodes


def run_greedy(sw, seed: int) -> dict:
    """Node by node: every combination of the node's variables with the rest at the current config, the
    best on the node's metric passed on (the sweep's gate kind is judged on gate accuracy, so is this
    node). The seed moves nothing: a grid is a grid."""
    from tuner.sweep.keep_rule import objective_value
    ev = Evaluator(sw)
    start_res = sw.bench.evaluate(sw.start, sw.gold)
    start_b = brief(start_res)
    seen = {sw.start.config_hash(): (start_b, start_res)}
    current = sw.start
    trials, incumbents = [], []
    t0 = time.perf_counter()
    nodes = greedy_nodes(whole_space(sw))
    for _node, combos, metric in nodes:
        best = None
        for combo in combos:
            cfg = current.replace(**combo)
            h = cfg.config_hash()
            new = h not in seen
            if new:
                if ev.n >= BUDGET:
                    break
                res = ev(cfg)
                seen[h] = (brief(res), res)
                trials.append((cfg, seen[h][0]))
            b, res = seen[h]
            value = objective_value(res, metric)
            if best is None or value > best[0]:
                best = (value, cfg, b)
            if new:     # what the greedy would hand back now: the best of the node so far
                incumbents.append((best[1], best[2]["score100"]))
        if best is not None:
            current = best[1]
    return {"trials": trials, "incumbents": incumbents, "wall_s": time.perf_counter() - t0,
            "other_embedder": ev.other_embedder, "switches": ev.switches, "reindex_s": ev.reindex_s,
            "nodes": [(n, len(c), m) for n, c, m in nodes]}


# -- holdout ----------------------------------------------------------------------------------------------------

def holdout_check(sw, cfg, cache: dict, seed: int) -> dict:
    """cfg against the start on the holdout: aggregates and the paired tests' verdicts (no rows)."""
    from tuner.evaluation.compare import compare

    def hold(c):
        h = c.config_hash()
        if h not in cache:
            sw._ensure_gate(c)
            cache[h] = sw.bench.evaluate(c, sw.hold_gold)
        return cache[h]

    a, b = hold(sw.start), hold(cfg)
    c = compare(a, b, seed=seed).to_json()
    return {**brief(b), "tests": {m: {"delta": v["delta"], "p": v["p_value"], "verdict": v["verdict"]}
                                  for m, v in c["metrics"].items()}}


def changed(start, cfg) -> dict:
    s, c = start.as_dict(), cfg.as_dict()
    return {k: c[k] for k in c if c[k] != s[k]}


def record(set_name, seed, strategy, sw, out, incumbents, hold_cache, extra) -> dict:
    start_tune = brief(sw.bench.evaluate(sw.start, sw.gold))
    start_hold = holdout_check(sw, sw.start, hold_cache, seed)
    checkpoints = {}
    for n in CHECKPOINTS:
        if not incumbents:
            break
        cfg, score = incumbents[min(n, len(incumbents)) - 1]
        checkpoints[str(n)] = {"tune_score100": score, "hold": holdout_check(sw, cfg, hold_cache, seed)}
    final_cfg = incumbents[-1][0] if incumbents else sw.start
    final_tune = brief(sw.bench.evaluate(final_cfg, sw.gold))
    final_hold = holdout_check(sw, final_cfg, hold_cache, seed)
    return {"set": set_name, "seed": seed, "strategy": strategy, "evaluations": len(out["trials"]),
            "tune_questions": len(sw.gold.questions), "hold_questions": len(sw.hold_gold.questions),
            "wall_s": round(out["wall_s"], 2), "other_embedder_evals": out["other_embedder"],
            "embedder_switches": out["switches"], "reindex_s": round(out["reindex_s"], 1),
            "curve": [round(s, 3) for _, s in incumbents], "checkpoints": checkpoints,
            "start": {"tune": start_tune, "hold": start_hold}, "final": {"config_changes": changed(sw.start, final_cfg),
                                                                      "tune": final_tune, "hold": final_hold},
            "loadavg": [round(x, 2) for x in os.getloadavg()], **extra}


def run_set(name: str, spec: dict, seeds: list[int], strategies: list[str], done: set, log) -> None:
    from tuner.ledger.ledger import Ledger
    ledger_path = OUT / f"ledger-{name}.sqlite"
    ledger = Ledger(ledger_path)
    warmed = False
    for seed in seeds:
        todo = [s for s in strategies if (seed, s) not in done]
        if not todo:
            continue
        hold_cache: dict = {}
        for strategy in todo:
            if strategy in OVAT_RULES:
                if not warmed:
                    warm = prewarm(make_sweep(spec, seed, ledger))
                    warmed = True
                    print(f"   {name}: channel lists prefetched in {warm['seconds']} s {warm}", flush=True)
                out = run_ovat(spec, seed, ledger, OVAT_RULES[strategy])
                sw = out["sw"]
                rec = record(name, seed, strategy, sw, out, out["incumbents"], hold_cache,
                             {"decisions": out["decisions"]})
                recs = [rec]
            else:
                sw = make_sweep(spec, seed, ledger)
                if not warmed:
                    warm = prewarm(sw)
                    warmed = True
                    print(f"   {name}: channel lists prefetched in {warm['seconds']} s {warm}", flush=True)
                fn = {"tpe": run_tpe, "random": run_random, "autorag-greedy": run_greedy}[strategy]
                out = fn(sw, seed)
                extra = {"nodes": out["nodes"]} if "nodes" in out else {}
                recs = [record(name, seed, strategy, sw, out, out["incumbents"], hold_cache, extra)]
                if "guarded" in out:
                    recs.append(record(name, seed, strategy + "+guard", sw, out, out["guarded"], hold_cache,
                                       {"selection_of": strategy}))
            for rec in recs:
                log.write(json.dumps(rec, ensure_ascii=False) + "\n")
                log.flush()
                h = rec["final"]["hold"]
                print(f"   {name} seed {seed} {rec['strategy']:<15} {rec['evaluations']} evals {rec['wall_s']:>7.1f} s  "
                      f"tune {rec['start']['tune']['score100']:.2f} -> {rec['final']['tune']['score100']:.2f}  "
                      f"holdout hit@5 {rec['start']['hold']['hit@5']:.3f} -> {h['hit@5']:.3f} "
                      f"score100 {rec['start']['hold']['score100']:.2f} -> {h['score100']:.2f}  "
                      f"changed {sorted(rec['final']['config_changes'])}", flush=True)
    ledger.close()


# -- the report -------------------------------------------------------------------------------------------------

def load_runs() -> list[dict]:
    """Every recorded run, the first one of each (set, seed, strategy) (two processes may share a set)."""
    runs, seen = [], set()
    for p in sorted(OUT.glob("runs-*.jsonl")):
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                if (r["set"], r["seed"], r["strategy"]) not in seen:
                    seen.add((r["set"], r["seed"], r["strategy"]))
                    runs.append(r)
    return runs


def _ms(values) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "sd": None, "min": None, "max": None}
    return {"mean": round(statistics.fmean(values), 4), "sd": round(statistics.pstdev(values), 4),
            "min": round(min(values), 4), "max": round(max(values), 4)}


SET_ORDER = ("demo", "autorag-ko", "korquad-sample", "johngrib")
STRATEGY_ORDER = ("ovat", "ovat-count", "tpe", "tpe+guard", "random", "random+guard", "autorag-greedy")


def _set_rank(name: str) -> tuple:
    return (SET_ORDER.index(name) if name in SET_ORDER else len(SET_ORDER), name)


def complete_seeds(runs: list[dict], set_name: str) -> list[int]:
    """The seeds of a set on which every strategy run on that set ran: the comparison stays paired (same
    split, same gate fit) when a run was stopped part-way through a seed."""
    have: dict = {}
    for r in runs:
        if r["set"] == set_name:
            have.setdefault(r["seed"], set()).add(r["strategy"])
    ran = set().union(*have.values()) if have else set()
    return sorted(seed for seed, strats in have.items() if ran <= strats)


def aggregate(runs: list[dict]) -> dict:
    table: dict = {}
    for set_name in sorted({r["set"] for r in runs}, key=_set_rank):
        seeds = complete_seeds(runs, set_name)
        if not seeds:
            continue
        table[set_name] = {}
        for strat in STRATEGY_ORDER:
            rs = [r for r in runs if r["set"] == set_name and r["strategy"] == strat and r["seed"] in seeds]
            if not rs:
                continue
            fh = [r["final"]["hold"] for r in rs]
            sh = [r["start"]["hold"] for r in rs]
            table[set_name][strat] = {
                "seeds": sorted(r["seed"] for r in rs),
                "tune_questions": rs[0]["tune_questions"], "hold_questions": rs[0]["hold_questions"],
                "evaluations": _ms([r["evaluations"] for r in rs]),
                "tune_score100": _ms([r["final"]["tune"]["score100"] for r in rs]),
                "start_tune_score100": _ms([r["start"]["tune"]["score100"] for r in rs]),
                "hold_hit@5": _ms([h["hit@5"] for h in fh]), "hold_mrr": _ms([h["mrr"] for h in fh]),
                "hold_score100": _ms([h["score100"] for h in fh]),
                "hold_gate_accuracy": _ms([h["gate_accuracy"] for h in fh]),
                "start_hold_hit@5": _ms([h["hit@5"] for h in sh]), "start_hold_mrr": _ms([h["mrr"] for h in sh]),
                "start_hold_score100": _ms([h["score100"] for h in sh]),
                "start_hold_gate_accuracy": _ms([h["gate_accuracy"] for h in sh]),
                "hold_hit5_below_start": sum(f["hits"] < s["hits"] for f, s in zip(fh, sh)),
                "hold_score100_below_start": sum(f["score100"] < s["score100"] - 1e-9 for f, s in zip(fh, sh)),
                "hold_significantly_worse": sum(any(t["verdict"] == "A better" for t in f["tests"].values()) for f in fh),
                "hold_significantly_better": sum(any(t["verdict"] == "B better" for t in f["tests"].values()) for f in fh),
                "wall_s": _ms([r["wall_s"] for r in rs]),
                "other_embedder_evals": _ms([r["other_embedder_evals"] for r in rs]),
                "embedder_switches": _ms([r["embedder_switches"] for r in rs]),
                "curve_tune": [round(statistics.fmean(c), 3) for c in zip(*[r["curve"] for r in rs])],
                "curve_hold": {n: _ms([r["checkpoints"][n]["hold"]["score100"] for r in rs if n in r["checkpoints"]])["mean"]
                               for n in map(str, CHECKPOINTS)},
                "loadavg": _ms([r["loadavg"][0] for r in rs]),
            }
    return table


def paired(runs: list[dict]) -> dict:
    """ovat against each peer, seed by seed (same split, same gate fit): the holdout score100 difference
    (ovat - peer; mean, sd, seeds where ovat is at or above) and the holdout hit@5 questions (ovat - peer)."""
    out: dict = {}
    for set_name in sorted({r["set"] for r in runs}, key=_set_rank):
        seeds = complete_seeds(runs, set_name)
        by = {(r["seed"], r["strategy"]): r for r in runs if r["set"] == set_name and r["seed"] in seeds}
        if not seeds:
            continue
        out[set_name] = {}
        for peer in STRATEGY_ORDER[1:]:
            if (seeds[0], peer) not in by or (seeds[0], "ovat") not in by:
                continue
            d = [by[(s, "ovat")]["final"]["hold"]["score100"] - by[(s, peer)]["final"]["hold"]["score100"] for s in seeds]
            q = [by[(s, "ovat")]["final"]["hold"]["hits"] - by[(s, peer)]["final"]["hold"]["hits"] for s in seeds]
            out[set_name][peer] = {"score100_diff": _ms(d), "ovat_at_or_above": sum(x >= -1e-9 for x in d),
                                   "hit5_questions_diff": _ms(q), "seeds": len(seeds)}
    return out


def plot(table: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    sets = list(table)
    fig = Figure(figsize=(11, 3.1 * len(sets)))
    styles = {"ovat": ("C0", "-"), "ovat-count": ("C0", ":"), "tpe": ("C1", "-"), "tpe+guard": ("C1", "--"), "random": ("C2", "-"),
              "random+guard": ("C2", "--"), "autorag-greedy": ("C3", "-")}
    for i, s in enumerate(sets):
        ax_t = fig.add_subplot(len(sets), 2, 2 * i + 1)
        ax_h = fig.add_subplot(len(sets), 2, 2 * i + 2)
        for strat, row in table[s].items():
            color, ls = styles[strat]
            start_t = row["start_tune_score100"]["mean"]
            ax_t.plot(range(0, len(row["curve_tune"]) + 1), [start_t] + row["curve_tune"], color=color, ls=ls,
                      label=strat)
            xs = [0] + [int(n) for n, v in row["curve_hold"].items() if v is not None]
            ys = [row["start_hold_score100"]["mean"]] + [v for v in row["curve_hold"].values() if v is not None]
            ax_h.plot(xs, ys, color=color, ls=ls, marker="o", ms=3, label=strat)
        n_seeds = max(len(r["seeds"]) for r in table[s].values())
        ax_t.set_title(f"{s}: best-so-far tuning score100 (mean of {n_seeds} seeds)", fontsize=9)
        ax_h.set_title(f"{s}: holdout score100 of the incumbent", fontsize=9)
        for ax in (ax_t, ax_h):
            ax.set_xlabel("evaluations", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        if i == 0:
            ax_t.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def markdown(table: dict) -> str:
    def f(x, nd=3):
        return "–" if x is None else f"{x:.{nd}f}"
    lines = ["| set | strategy | seeds | evals | tuning score100 (start) | holdout hit@5 (start) | holdout MRR (start) | holdout score100 (start) "
             "| hit@5 below start | score100 below start | sig. worse / better | gate acc. (start) | wall s | evals on the other embedder |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s, rows in table.items():
        for strat, r in rows.items():
            n = len(r["seeds"])
            lines.append(
                f"| {s} | {strat} | {n} | {r['evaluations']['mean']:.0f} "
                f"| {f(r['tune_score100']['mean'], 2)} ± {f(r['tune_score100']['sd'], 2)} ({f(r['start_tune_score100']['mean'], 2)}) "
                f"| {f(r['hold_hit@5']['mean'])} ± {f(r['hold_hit@5']['sd'])} ({f(r['start_hold_hit@5']['mean'])}) "
                f"| {f(r['hold_mrr']['mean'])} ± {f(r['hold_mrr']['sd'])} ({f(r['start_hold_mrr']['mean'])}) "
                f"| {f(r['hold_score100']['mean'], 2)} ± {f(r['hold_score100']['sd'], 2)} ({f(r['start_hold_score100']['mean'], 2)}) "
                f"| {r['hold_hit5_below_start']}/{n} | {r['hold_score100_below_start']}/{n} "
                f"| {r['hold_significantly_worse']}/{r['hold_significantly_better']} "
                f"| {f(r['hold_gate_accuracy']['mean'])} ({f(r['start_hold_gate_accuracy']['mean'])}) "
                f"| {f(r['wall_s']['mean'], 1)} | {f(r['other_embedder_evals']['mean'], 1)} |")
    return "\n".join(lines)


def report(seeds: list[int] | None = None, name: str = "strategies") -> None:
    runs = [r for r in load_runs() if seeds is None or r["seed"] in seeds]
    if not runs:
        raise SystemExit(f"no runs under {OUT}" + (f" for seeds {seeds}" if seeds else "") + "; run the benchmark first")
    table = aggregate(runs)
    pairs = paired(runs)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(
        {"budget": BUDGET, "checkpoints": CHECKPOINTS, "objective": OBJECTIVE, "table": table,
         "ovat_minus_peer": pairs}, ensure_ascii=False, indent=1), encoding="utf-8")
    plot(table, RESULTS / f"{name}.png")
    print(markdown(table))
    print("\n| set | peer | holdout score100, ovat - peer (mean ± sd) | seeds ovat >= peer | holdout hit@5 questions, ovat - peer |")
    print("|---|---|---|---|---|")
    for s, peers in pairs.items():
        for peer, p in peers.items():
            print(f"| {s} | {peer} | {p['score100_diff']['mean']:+.2f} ± {p['score100_diff']['sd']:.2f} "
                  f"| {p['ovat_at_or_above']}/{p['seeds']} | {p['hit5_questions_diff']['mean']:+.1f} |")
    print(f"\nwritten {RESULTS / (name + '.json')} and {RESULTS / (name + '.png')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="demo,autorag-ko,korquad-sample,johngrib")
    ap.add_argument("--seeds", default=None, help="runs: default 0,1,2,3,4; --report: only these seeds (default all)")
    ap.add_argument("--strategies", default=",".join(RUN_STRATEGIES))
    ap.add_argument("--embedder-sets", default="demo,autorag-ko",
                    help="sets whose space includes the embedder (a second full index of the set)")
    ap.add_argument("--demo-db", type=Path, default=OUT / "bench-demo.sqlite")
    ap.add_argument("--autorag-db", type=Path, default=OUT / "autorag.sqlite")
    ap.add_argument("--johngrib-db", type=Path, default=OUT / "johngrib.sqlite")
    ap.add_argument("--report", action="store_true", help="aggregate the runs so far: table, plot, JSON")
    ap.add_argument("--report-name", default="strategies", help="--report writes benchmarks/results/NAME.{json,png}")
    args = ap.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if args.report:
        report([int(s) for s in args.seeds.split(",")] if args.seeds else None, args.report_name)
        return
    args.embedder_sets = set(filter(None, args.embedder_sets.split(",")))
    seeds = [int(s) for s in (args.seeds or "0,1,2,3,4").split(",")]
    strategies = [s for s in args.strategies.split(",") if s]
    unknown = set(strategies) - set(RUN_STRATEGIES)
    if unknown:
        raise SystemExit(f"unknown strategies {sorted(unknown)}: {', '.join(RUN_STRATEGIES)}")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in filter(None, args.sets.split(",")):
        spec = set_spec(name, args)
        path = OUT / f"runs-{name}.jsonl"
        done = {(r["seed"], r["strategy"]) for r in (json.loads(line) for line in path.read_text(encoding="utf-8")
                                                     .splitlines() if line.strip())} if path.exists() else set()
        print(f"== {name}  load average {os.getloadavg()[0]:.2f}", flush=True)
        with path.open("a", encoding="utf-8") as log:
            run_set(name, spec, seeds, strategies, done, log)


if __name__ == "__main__":
    main()
