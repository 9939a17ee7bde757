"""The `autoresearch` command line: thin verbs over search_core and tuner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from search_core import SearchCoreError
from tuner.extras import require_extra


def _sigterm_as_interrupt():
    """`kill PID` ends an index run the way Ctrl-C does: transaction rolled back, temp file removed."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _fail(e: Exception):
    raise click.ClickException(str(e))


def _db_error():
    import sqlean
    return sqlean.DatabaseError


class _Progress:
    """tqdm bars per stage on stderr; silent when stderr is not a terminal unless forced."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bars = {}

    def __call__(self, stage, done, total):
        if not self.enabled:
            return
        from tqdm import tqdm
        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(total=total, desc=f"{stage:<8}", unit=" items", file=sys.stderr,
                                          leave=True, dynamic_ncols=True)
        if stage == "parse":
            bar.n = done
            bar.refresh()
        else:
            bar.total = total
            bar.n = done
            bar.refresh()

    def close(self):
        for b in self.bars.values():
            b.close()


@click.group()
@click.version_option(package_name="autoresearch")
def main():
    """Local hybrid search over a markdown vault, and the tuner that sets its knobs by experiment."""


@main.command()
@click.argument("vault", type=click.Path(path_type=Path))
@click.option("--db", required=True, type=click.Path(path_type=Path), help="The index file (SQLite).")
@click.option("--embedder", default=None, help="Embedder name (default: the index's, or e5-small for a new index).")
@click.option("--full", is_flag=True, help="Rebuild from scratch into a new file, swapped in when complete.")
@click.option("--chunk-chars", type=int, default=None, help="Target chunk size in characters (needs --full to change).")
@click.option("--dense-per-note", type=int, default=None, help="Vectors per note, 0 = every chunk (needs --full).")
@click.option("--cache", type=click.Path(path_type=Path), default=None, help="Embedding cache file.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
def index(vault, db, embedder, full, chunk_chars, dense_per_note, cache, as_json, progress):
    """Index VAULT (a folder of .md notes, or a BEIR corpus folder) into --db."""
    from search_core.config import ChunkConfig
    from search_core.indexer import index_vault

    chunk_cfg = None
    if chunk_chars is not None or dense_per_note is not None:
        base = ChunkConfig()
        chunk_cfg = ChunkConfig(target_chars=chunk_chars or base.target_chars,
                                max_chars=max(base.max_chars, int((chunk_chars or 0) * 1.6)),
                                min_chars=base.min_chars,
                                dense_per_note=base.dense_per_note if dense_per_note is None else dense_per_note)
    bars = _Progress(sys.stderr.isatty() if progress is None else progress)
    _sigterm_as_interrupt()
    try:
        report = index_vault(vault, db, embedder=embedder, full=full, chunk_cfg=chunk_cfg, cache=cache,
                             progress=bars)
    except SearchCoreError as e:
        bars.close()
        _fail(e)
    except KeyboardInterrupt:
        bars.close()
        click.echo(f"\ninterrupted: {db} is unchanged (the old index stays usable); embeddings computed so far "
                   "are kept in the cache, so running the same command again resumes quickly", err=True)
        sys.exit(130)
    bars.close()
    if as_json:
        click.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        return
    click.echo(f"{report.mode} index of {vault} -> {db}: {report.notes} notes, {report.chunks} chunks "
               f"(+{report.added} ~{report.changed} -{report.deleted}, {report.unchanged} unchanged), "
               f"{report.embedded} embedded, {len(report.skipped)} skipped, {report.seconds:.1f}s")
    for s in report.skipped:
        click.echo(f"skipped {s.path}: {s.reason}", err=True)
    for w in report.warnings:
        click.echo(f"warning {w}", err=True)


@main.command("eval")
@click.option("--db", default=None, type=click.Path(path_type=Path), help="Default: the active config's index.")
@click.option("--gold", "gold_path", required=True, type=click.Path(path_type=Path),
              help="A gold YAML file, a BEIR folder (queries.jsonl + qrels .tsv), or a KorQuAD JSON file.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None)
@click.option("--reranker", default=None)
@click.option("--allow-missing", is_flag=True, help="Warn (instead of failing) on gold ids not in the index.")
@click.option("--no-audit", is_flag=True, help="Skip the fake-miss audit.")
@click.option("--timing-samples", type=click.IntRange(min=0), default=100, show_default=True,
              help="Repeat timed passes over a small set until each latency percentile stands on this many "
                   "timings (0: one pass).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/evals"), help="Where the full result goes.")
@click.option("--json", "as_json", is_flag=True)
def eval_cmd(db, gold_path, config_path, reranker, allow_missing, no_audit, timing_samples, out, as_json):
    """Evaluate a config on a gold set: overall and per level; the full result is written under --out."""
    import time as _time
    from search_core.pipeline import Searcher
    from tuner.evaluate import evaluate
    from tuner.gold import load_gold
    from tuner.report_text import format_eval
    from tuner.score import load_score_config

    try:
        gold = load_gold(gold_path)
        from tuner.promote import resolve_search_config
        db, base_cfg = resolve_search_config(db, config_path)   # no --config: runs/active.toml
        searcher = Searcher(db)
        cfg = base_cfg.replace(embedder=searcher.embedder_name)
        if reranker is not None:
            cfg = cfg.replace(reranker=reranker)
        result = evaluate(searcher, gold, cfg, allow_missing=allow_missing, audit=not no_audit,
                          score_cfg=load_score_config(config_path), min_timing_samples=timing_samples).as_json()
    except SearchCoreError as e:
        _fail(e)
    except _db_error() as e:
        from tuner.cli_check import damaged_index_message
        _fail(damaged_index_message(db, e))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{_time.strftime('%Y%m%d-%H%M%S')}-{gold.name}-{result['config_hash']}.json"
    path.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False))
        return
    click.echo(format_eval(result))
    click.echo(f"full result: {path}")


@main.command()
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@click.option("--seed", type=int, default=0)
def compare(a, b, as_json, seed):
    """Compare two `eval` results (JSON files) of the same gold set: deltas, paired test, flipped questions."""
    from tuner.compare import compare as do_compare, format_compare

    try:
        c = do_compare(json.loads(a.read_text()), json.loads(b.read_text()), seed=seed)
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        _fail(f"cannot compare {a} and {b}: {e}")
    click.echo(json.dumps(c, ensure_ascii=False, indent=2) if as_json else format_compare(c))


def _parse_duration(text: str | None) -> float | None:
    from tuner.durations import DurationError, parse_duration
    if not text:
        return None
    try:
        return parse_duration(text)
    except DurationError as e:
        raise click.BadParameter(str(e)) from None


@main.command()
@click.option("--db", required=True, type=click.Path(path_type=Path), help="The index of the starting embedder.")
@click.option("--gold", "gold_path", required=True, type=click.Path(path_type=Path), help="The tuning set.")
@click.option("--holdout", type=click.Path(path_type=Path), default=None, help="Reported at the end, never tuned on.")
@click.option("--split", type=float, default=None, help="No holdout file: tune on this fraction of --gold, hold out the rest.")
@click.option("--space", type=click.Path(path_type=Path), default=None,
              help="The search space (TOML); default: the packaged spaces/default.toml.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help="Starting config (TOML).")
@click.option("--rounds", type=click.IntRange(min=1), default=None, help="Rounds (default 119; with --resume: the sweep's own).")
@click.option("--time-budget", default=None, help="Stop after this long, e.g. 8h, 30m.")
@click.option("--seed", type=int, default=0)
@click.option("--objective", type=click.Choice(["score100", "mrr", "hit@5", "ndcg@10"]), default="score100")
@click.option("--epsilon", type=float, default=0.0, help="The objective must rise by more than this.")
@click.option("--gate-epsilon", type=float, default=0.0,
              help="Threshold rounds: the gate accuracy (0..1) must rise by more than this.")
@click.option("--level-guard", is_flag=True, help="Reject a candidate that loses more than one question in a level.")
@click.option("--latency-budget", type=float, default=None, help="Reject a candidate whose p95 (ms) is over this.")
@click.option("--timing-samples", type=click.IntRange(min=0), default=None,
              help="Timed rounds repeat passes over the tuning set until each p95 stands on this many timings "
                   "(default 100; 0: one pass).")
@click.option("--vault", default=None, help="The vault model rounds index (default: the one --db was built from).")
@click.option("--ledger", "ledger_path", type=click.Path(path_type=Path), default=Path("runs/ledger.sqlite"))
@click.option("--resume", default=None, help="Continue this sweep id where it stopped.")
@click.option("--json", "as_json", is_flag=True)
def sweep(db, gold_path, holdout, split, space, config_path, rounds, time_budget, seed, objective, epsilon, gate_epsilon,
          level_guard, latency_budget, timing_samples, vault, ledger_path, resume, as_json):
    """One-variable-at-a-time sweep with a hit@5 guard; every round goes to the ledger."""
    require_extra("tune")
    from search_core.config import load_config
    from tuner.ledger import Ledger
    from tuner.ledger_chain import require_intact
    from tuner.sweep import Sweep, SweepParams

    try:
        if resume:
            require_intact(ledger_path)      # a missing path is refused here, before any file is created
        ledger = Ledger(ledger_path, create=not resume)
    except SearchCoreError as e:
        _fail(e)
    try:
        if resume:
            info = ledger.sweep(resume)
            if info is None:
                _fail(SearchCoreError(f"no sweep {resume!r} in {ledger_path}; `autoresearch ledger` shows the latest"))
            params = SweepParams.from_record(
                info["params"], rounds=rounds if rounds is not None else info["params"]["rounds"])
            sw = Sweep(params, ledger, sweep_id=resume, progress=lambda l: click.echo(l, err=True))
        else:
            from tuner.resources import default_space
            params = SweepParams(db=str(db), gold=str(gold_path), space=str(space or default_space()),
                                 holdout=str(holdout) if holdout else None, rounds=rounds or 119,
                                 time_budget_s=_parse_duration(time_budget), seed=seed, objective=objective,
                                 epsilon=epsilon, gate_epsilon=gate_epsilon, level_guard=level_guard, latency_budget_ms=latency_budget,
                                 vault=vault, index_dir=str(ledger_path.parent / "indexes"), split=split,
                                 score_config=str(config_path) if config_path else None,
                                 **({} if timing_samples is None else {"timing_samples": timing_samples}))
            sw = Sweep(params, ledger, start=load_config(config_path), progress=lambda l: click.echo(l, err=True))
        click.echo(f"sweep {sw.id}: ledger {ledger_path}", err=True)
        summary = sw.run()
    except SearchCoreError as e:
        _fail(e)
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted; every finished round is in {ledger_path}. Continue with: "
                   f"autoresearch sweep --db {db} --gold {gold_path} --resume {sw.id}", err=True)
        sys.exit(130)
    finally:
        ledger.close()
    if as_json:
        click.echo(json.dumps(summary, ensure_ascii=False, indent=2))
        return
    _print_summary(summary)


def _print_summary(s: dict):
    from tuner.demo import format_summary
    click.echo(format_summary(s))


@main.command()
@click.option("--sweep", "sweep_id", default=None, help="Default: the latest sweep.")
@click.option("--ledger", "ledger_path", type=click.Path(path_type=Path), default=Path("runs/ledger.sqlite"))
@click.option("--json", "as_json", is_flag=True)
@click.option("--verify", is_flag=True, help="Recompute the hash chain; name the first round that was changed.")
def ledger(sweep_id, ledger_path, as_json, verify):
    """The rounds of a sweep: variable, old -> new, decision and reason (the hash chain is verified first)."""
    from tuner.ledger import Ledger
    from tuner.ledger_chain import require_intact, verify_or_seal

    if not ledger_path.exists():
        _fail(SearchCoreError(f"no ledger at {ledger_path}; run `autoresearch sweep` first"))
    try:
        if verify:
            verdict = verify_or_seal(ledger_path)
            click.echo(verdict.message())
            sys.exit(0 if verdict.ok else 1)
        require_intact(ledger_path)
        lg = Ledger(ledger_path, create=False)
    except SearchCoreError as e:
        _fail(e)
    info = lg.sweep(sweep_id)
    if info is None:
        _fail(SearchCoreError(f"no sweep {sweep_id!r} in {ledger_path}" if sweep_id else f"{ledger_path} has no sweeps"))
    rounds = lg.rounds(info["id"])
    if as_json:
        keep = ("sweep", "round", "variable", "old", "new", "decision", "reason", "metrics", "config_hash",
                "baseline_hash", "index_fingerprint", "eval_s", "reindex_s")
        click.echo(json.dumps({"sweep": info, "rounds": [{k: r[k] for k in keep} for r in rounds],
                               "holdout": lg.holdout(info["id"])}, ensure_ascii=False))
        return
    click.echo(f"sweep {info['id']} ({info['status']}), started {info['created']}")
    for r in rounds:
        click.echo(f"{r['round']:>4} {r['variable']:<13} {json.dumps(r['old'], ensure_ascii=False):>10} -> "
                   f"{json.dumps(r['new'], ensure_ascii=False):<10} {r['decision']:<24} {r['reason']}")


@main.command()
@click.option("--sweep", "sweep_id", default=None, help="Default: the latest sweep.")
@click.option("--ledger", "ledger_path", type=click.Path(path_type=Path), default=Path("runs/ledger.sqlite"))
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write the TOML here (default: stdout).")
def best(sweep_id, ledger_path, out):
    """The winning config of a sweep as TOML, for `search --config` and `eval --config`."""
    from search_core.config import SearchConfig
    from tuner.ledger import Ledger
    from tuner.ledger_chain import require_intact
    from tuner.toml_out import config_toml

    if not ledger_path.exists():      # opening a Ledger would create an empty one at a mistyped path
        _fail(SearchCoreError(f"no ledger at {ledger_path}; run `autoresearch sweep` first"))
    try:
        require_intact(ledger_path)
        lg = Ledger(ledger_path, create=False)
    except SearchCoreError as e:
        _fail(e)
    info = lg.sweep(sweep_id)
    if info is None:
        _fail(SearchCoreError(f"no sweep {sweep_id!r} in {ledger_path}"))
    kept = [r for r in lg.rounds(info["id"]) if r["decision"] == "kept"]
    if not kept:
        _fail(SearchCoreError(f"sweep {info['id']} has no evaluated rounds yet"))
    cfg = SearchConfig().replace(**kept[-1]["config"])
    text = config_toml(cfg, f"winner of sweep {info['id']} (round {kept[-1]['round']})")
    if out:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}")
    else:
        click.echo(text, nl=False)


@main.command()
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/demo"), help="Where results go.")
@click.option("--rounds", type=click.IntRange(min=1), default=119)
@click.option("--seed", type=int, default=0)
def demo(out, rounds, seed):
    """The main job on the demo vault: index it, sweep 119 rounds from a hand-set start, check the holdout, report."""
    require_extra("tune")
    from tuner.demo import run_demo

    try:
        run = run_demo(out, rounds=rounds, seed=seed, echo=click.echo,
                       progress=lambda l: click.echo("   " + l, err=True),
                       index_progress=_Progress(sys.stderr.isatty()))
    except SearchCoreError as e:
        _fail(e)
    _print_summary(run.summary)
    db = run.db
    click.echo(f"\nresults in {out}/: index.sqlite, eval-start.json, ledger.sqlite (rounds), indexes/ (one per embedder)")
    click.echo(f"next: autoresearch ledger --ledger {out}/ledger.sqlite; "
               f"autoresearch best --ledger {out}/ledger.sqlite --out best.toml; "
               f"autoresearch search \"GraphRAG 커뮤니티 요약\" --db {db} --config best.toml --explain")
    html = run.reports["html"]
    click.echo(f"\nmorning report: {html} (Markdown: {run.reports['md']})")
    click.echo(f"open it: python -m webbrowser {html.resolve().as_uri()}")


from . import cli_search  # noqa: E402,F401  registers verbs
from . import cli_check  # noqa: E402,F401  registers verbs
from . import cli_gate  # noqa: E402,F401  registers verbs
from . import cli_recall  # noqa: E402,F401  registers verbs
from . import cli_ab  # noqa: E402,F401  registers verbs
from . import cli_daemon  # noqa: E402,F401  registers verbs

if __name__ == "__main__":
    # `python -m tuner.cli` runs this file as __main__, a second module object; the verbs above register
    # on tuner.cli's group, so run that one
    from tuner.cli import main as _registered_main
    _registered_main()
