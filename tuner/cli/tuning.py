"""The tuning verbs: `eval` a config, `compare` two evaluations, `sweep`, read the `ledger`, print the
`best` config, and the `demo` that runs the main job on the embedded vault."""

from __future__ import annotations

import dataclasses
import json
import sys

import click

from search_core import SearchCoreError
from search_core.files import atomic_write_text
from search_core.paths import DEMO, EVALS
from tuner.cli.options import (db_error, db_option, duration, duration_value, fail, in_runs, input_file,
                               json_option, ledger_option, output_file, output_folder, PathValue,
                               Progress, search_config_value, sweep_setting_options, VaultPath)
from tuner.cli.extras import require_extra


@click.command("eval")
@db_option("The index file. Default: the active config's index, else the index `index` built last.", required=False)
@click.option("--gold", "gold_path", required=True, type=PathValue(),
              help="A gold YAML file, a BEIR folder (queries.jsonl + qrels .tsv), or a KorQuAD JSON file.")
@click.option("--config", "config_path", type=PathValue(), default=None, callback=search_config_value)
@click.option("--reranker", default=None)
@click.option("--allow-missing", is_flag=True, help="Warn (instead of failing) on gold ids not in the index.")
@click.option("--no-audit", is_flag=True, help="Skip the fake-miss audit.")
@click.option("--timing-samples", type=click.IntRange(min=0), default=100, show_default=True,
              help="Repeat timed passes over a small set until each latency percentile stands on this many "
                   "timings (0: one pass).")
@click.option("--out", **in_runs(EVALS, output_folder()), help="Where the full result goes.")
@click.option("--gate", "gate_path", type=input_file(), default=None,
              help="A gate model file (default, as `search`: <db>.gate.json, else the shipped default model).")
@click.option("--progress/--no-progress", default=None, help="Progress on stderr: bars on a terminal, plain lines "
              "otherwise (default: on, off with --json).")
@json_option()
def eval_cmd(db, gold_path, config_path, reranker, allow_missing, no_audit, timing_samples, out, gate_path, progress,
             as_json):
    """Evaluate a config on a gold set: overall and per level; the full result is written under --out."""
    import time as _time
    from search_core.gate.request import GateRequest
    from search_core.search.pipeline import Searcher
    from tuner.evaluation.evaluate import evaluate
    from tuner.data.gold import load_gold
    from tuner.reports.text import format_eval
    from tuner.evaluation.score import load_score_config

    try:
        gold = load_gold(gold_path)
        from tuner.promotion.promote import resolve_search_config
        db, base_cfg = resolve_search_config(db, config_path)   # no --config: runs/active.toml
        searcher = Searcher(db, gate=GateRequest(path=gate_path))     # the gate `search` decides with
        cfg = base_cfg.replace(embedder=searcher.embedder_name)
        if reranker is not None:
            cfg = cfg.replace(reranker=reranker)
        res = evaluate(searcher, gold, cfg, allow_missing=allow_missing, audit=not no_audit,
                       score_cfg=load_score_config(config_path), min_timing_samples=timing_samples,
                       progress=Progress(progress if progress is not None else not as_json))
    except SearchCoreError as e:
        fail(e)
    except db_error() as e:
        from tuner.cli.check import damaged_index_message
        fail(damaged_index_message(db, e))
    out.mkdir(parents=True, exist_ok=True)
    result = res.to_json()
    path = out / f"{_time.strftime('%Y%m%d-%H%M%S')}-{gold.name}-{res.config_hash}.json"
    atomic_write_text(path, json.dumps(result, ensure_ascii=False, indent=1))
    for w in res.warnings:              # on stderr, so --json's stdout stays one document (it lists them too)
        click.echo(f"warning: {w}", err=True)
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False))
        return
    click.echo(format_eval(dataclasses.replace(res, warnings=[])))
    click.echo(f"full result: {path}")


@click.command()
@click.argument("a", type=input_file())
@click.argument("b", type=input_file())
@json_option()
@click.option("--seed", type=click.IntRange(min=0), default=0)
def compare(a, b, as_json, seed):
    """Compare two `eval` results (JSON files) of the same gold set: deltas, paired test, flipped questions."""
    from tuner.evaluation.compare import compare as do_compare, format_compare
    from tuner.evaluation.evaluate import EvalResult

    try:
        c = do_compare(EvalResult.read(a), EvalResult.read(b), seed=seed)
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        fail(f"cannot compare {a} and {b}: {e}")
    click.echo(json.dumps(c.to_json(), ensure_ascii=False, indent=2) if as_json else format_compare(c))


@click.command()
@db_option("The index of the starting embedder.")
@click.option("--gold", "gold_path", required=True, type=PathValue(), help="The tuning set.")
@click.option("--holdout", type=PathValue(), default=None, help="Reported at the end, never tuned on.")
@click.option("--space", type=PathValue(), default=None,
              help="The search space (TOML); default: the packaged spaces/default.toml.")
@click.option("--config", "config_path", type=PathValue(), default=None, callback=search_config_value,
              help="Starting config (TOML).")
@click.option("--time-budget", default=None, callback=duration_value, help="Stop after this long, e.g. 8h, 30m.")
@sweep_setting_options()
@click.option("--recalibrate", is_flag=True,
              help="Take a new cost calibration (unit costs of each kind of search work on this machine) instead "
                   "of the one stored under the runs folder's cost-model/.")
@click.option("--vault", type=VaultPath(), default=None,
              help="The vault model rounds index (default: the one --db was built from).")
@ledger_option(reading=False)
@click.option("--resume", default=None, help="Continue this sweep id where it stopped.")
@json_option()
def sweep(db, gold_path, holdout, space, config_path, time_budget, recalibrate, vault, ledger_path, resume, as_json,
          **settings):
    """One-variable-at-a-time sweep (coupled pairs in turn once a cycle keeps nothing) with a hit@5 guard; every round goes to the ledger.

    Latency is predicted by a cost model calibrated once per machine and model (stored in the ledger and
    under the runs folder), so the same sweep decides alike on a quiet machine and a busy one."""
    require_extra("tune")
    from search_core.config import load_config
    from tuner.ledger.ledger import Ledger
    from tuner.ledger.ledger import require_intact
    from tuner.sweep.loop import Sweep, SweepParams
    from tuner.sweep.settings import given_settings, setting

    try:
        if resume:
            require_intact(ledger_path)      # a missing path is refused here, before any file is created
        ledger = Ledger(ledger_path, create=not resume)
    except SearchCoreError as e:
        fail(e)
    given = given_settings(settings)
    try:
        if resume:
            info = ledger.sweep(resume)
            if info is None:
                fail(SearchCoreError(f"no sweep {resume!r} in {ledger_path}; `autoresearch ledger` shows the latest"))
            changed = sorted(set(given) - {"rounds"})
            if changed:
                fail(SearchCoreError(f"--resume continues sweep {resume} under the rule it recorded; drop "
                                     f"{', '.join(setting(n).option for n in changed)} (only --rounds may change), "
                                     "or start a new sweep with them"))
            params = dataclasses.replace(info.params.sweep, **given, recalibrate=recalibrate)
            sw = Sweep(params, ledger, sweep_id=resume, progress=lambda l: click.echo(l, err=True))
        else:
            from tuner.data.bundled import default_space
            params = SweepParams(db=str(db), gold=str(gold_path), space=str(space or default_space()),
                                 holdout=str(holdout) if holdout else None,
                                 time_budget_s=duration(time_budget, param_hint="--time-budget"),
                                 vault=str(vault) if vault else None, index_dir=str(ledger_path.parent / "indexes"),
                                 score_config=str(config_path) if config_path else None, recalibrate=recalibrate,
                                 **given)
            sw = Sweep(params, ledger, start=load_config(config_path), progress=lambda l: click.echo(l, err=True))
        click.echo(f"sweep {sw.id}: ledger {ledger_path}", err=True)
        summary = sw.run()
    except SearchCoreError as e:
        fail(e)
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted; every finished round is in {ledger_path}. Continue with: "
                   f"autoresearch sweep --db {db} --gold {gold_path} --resume {sw.id}", err=True)
        sys.exit(130)
    finally:
        ledger.close()
    if as_json:
        click.echo(json.dumps(summary.to_json(), ensure_ascii=False, indent=2))
        return
    _print_summary(summary, ledger_path)


def _print_summary(s, ledger_path=None):
    from tuner.demo import format_summary
    click.echo(format_summary(s, ledger_path))


def _json_or_none(record):
    return record.to_json() if record is not None else None


@click.command()
@click.option("--sweep", "sweep_id", default=None, help="Default: the latest sweep.")
@ledger_option()
@json_option()
@click.option("--verify", is_flag=True, help="Recompute the hash chain; name the first round that was changed.")
@click.option("--replay", is_flag=True,
              help="Decide every evaluated round again from the ledger alone (recorded work, calibration and rule; "
                   "no clock, no search); exit 1 if any decision differs.")
def ledger(sweep_id, ledger_path, as_json, verify, replay):
    """The rounds of a sweep: variable, old -> new, decision and reason (the hash chain is verified first)."""
    from tuner.ledger.ledger import Ledger
    from tuner.ledger.ledger import require_intact, verify_or_seal

    if not ledger_path.exists():
        fail(SearchCoreError(f"no ledger at {ledger_path}; run `autoresearch sweep` first"))
    try:
        if verify:
            verdict = verify_or_seal(ledger_path)
            click.echo(verdict.message())
            sys.exit(0 if verdict.ok else 1)
        require_intact(ledger_path)
        lg = Ledger(ledger_path, create=False)
    except SearchCoreError as e:
        fail(e)
    info = lg.sweep(sweep_id)
    if info is None:
        fail(SearchCoreError(f"no sweep {sweep_id!r} in {ledger_path}" if sweep_id else f"{ledger_path} has no sweeps"))
    rounds = lg.rounds(info.id)
    if replay:
        from tuner.sweep.loop import replay_sweep
        try:
            out = replay_sweep(info, rounds)
        except SearchCoreError as e:
            fail(e)
        if as_json:
            click.echo(json.dumps([x.to_json() for x in out], ensure_ascii=False))
        else:
            for x in out:
                click.echo(f"{x.round:>4} {x.variable:<13} recorded {x.recorded:<24} recomputed "
                           f"{x.recomputed:<24} {'ok' if x.agrees else 'DIFFERS'}")
            bad = sum(not x.agrees for x in out)
            click.echo(f"{len(out)} evaluated rounds replayed from the ledger: " +
                       (f"{bad} decided otherwise" if bad else "every decision recomputed alike"))
        sys.exit(1 if any(not x.agrees for x in out) else 0)
    if as_json:
        click.echo(json.dumps({"sweep": info.to_json(), "rounds": [r.to_json() for r in rounds],
                               "holdout": _json_or_none(lg.holdout(info.id))}, ensure_ascii=False))
        return
    click.echo(f"sweep {info.id} ({info.status}), started {info.created}")
    for r in rounds:
        click.echo(f"{r.round:>4} {r.variable:<13} {json.dumps(r.old, ensure_ascii=False):>10} -> "
                   f"{json.dumps(r.new, ensure_ascii=False):<10} {r.decision:<24} {r.reason}")


@click.command()
@click.option("--sweep", "sweep_id", default=None, help="Default: the latest sweep.")
@ledger_option()
@click.option("--out", type=output_file(), default=None, help="Write the TOML here (default: stdout).")
def best(sweep_id, ledger_path, out):
    """The winning config of a sweep as TOML, for `search --config` and `eval --config`."""
    from tuner.ledger.winner import sweep_winner
    from tuner.promotion.config_toml import config_toml

    try:
        cfg, info, round_no = sweep_winner(ledger_path, sweep_id)
    except SearchCoreError as e:
        fail(e)
    text = config_toml(cfg, f"winner of sweep {info.id} (round {round_no})")
    if out:
        atomic_write_text(out, text)
        click.echo(f"wrote {out}")
    else:
        click.echo(text, nl=False)




@click.command()
@click.option("--out", **in_runs(DEMO, output_folder()), help="Where results go.")
@click.option("--rounds", type=click.IntRange(min=1), default=119)
@click.option("--seed", type=click.IntRange(min=0), default=0)
@click.option("--vault-questions", "vault_questions", type=click.IntRange(min=0), default=None,
              help="Questions `gold make` cuts from the demo vault to tune on beside the hand-written ones "
                   "(default 600, made as `gold make` makes them: anchors first, each without its link; 0: the "
                   "hand-written set alone).")
def demo(out, rounds, seed, vault_questions):
    """The main job on the demo vault: index it, make the questions its own text supplies, sweep 119 rounds from
    a hand-set start, check the holdout, report."""
    require_extra("tune")
    from tuner.demo import DEMO_VAULT_QUESTIONS, format_evidence, next_steps, run_demo

    try:
        run = run_demo(out, rounds=rounds, seed=seed, echo=click.echo,
                       progress=lambda l: click.echo("   " + l, err=True),
                       index_progress=Progress(),
                       vault_questions=DEMO_VAULT_QUESTIONS if vault_questions is None else vault_questions)
    except SearchCoreError as e:
        fail(e)
    _print_summary(run.summary)
    if run.evidence is not None:
        click.echo(format_evidence(run.evidence))
    db = run.db
    click.echo(f"\nresults in {out}/: index.sqlite, eval-start.json, ledger.sqlite (rounds), indexes/ (one per embedder)")
    click.echo(next_steps(out, db))
    html = run.reports["html"]
    click.echo(f"\nmorning report: {html} (Markdown: {run.reports['md']})")
    click.echo(f"open it: python -m webbrowser {html.resolve().as_uri()}")


COMMANDS = (eval_cmd, compare, sweep, ledger, best, demo)
