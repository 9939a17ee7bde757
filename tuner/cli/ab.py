"""`autoresearch ab`: embedders (or rerankers on one embedder's index) compared on the same questions."""

from __future__ import annotations

import os
import sys

import click

from search_core import SearchCoreError
from tuner.cli.extras import require_extra

from search_core.paths import AB_WORK
from tuner.cli.options import (db_option, fail, FiniteFloat, format_option, in_runs, input_file,
                               nonempty_value, output_file, output_folder, PathValue, search_config_value,
                               sigterm_as_interrupt, VaultPath)


@click.command()
@click.option("--embedders", default=None, callback=nonempty_value, help="Comma-separated, e.g. e5-small,minilm-l6 (two or more, or one "
              "with several --rerankers).")
@click.option("--rerankers", default=None, callback=nonempty_value, help="Comma-separated, e.g. none,BAAI/bge-reranker-base: compared on the "
              "one embedder's index.")
@click.option("--gold", "gold_path", default=None, type=PathValue(),
              help="Tuning questions (the gate is fitted here); also the evaluation set without --holdout/--split.")
@click.option("--holdout", type=PathValue(), default=None, help="Evaluation questions, never fitted on.")
@click.option("--split", type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True), default=None, help="No holdout file: fit on this fraction of --gold, "
              "evaluate on the rest.")
@click.option("--vault", type=VaultPath(), default=None, help="The notes to index (default: --db's vault, or the gold set's corpus).")
@db_option("An existing index: its vault and chunking are reused.", required=False, exists=True)
@click.option("--config", "config_path", type=PathValue(), default=None, callback=search_config_value,
              help="Starting config (TOML) for every candidate (default: the built-in defaults).")
@click.option("--work", **in_runs(AB_WORK, output_folder()),
              help="Where each candidate's index lives (vectors come from the user's embedding cache).")
@format_option()
@click.option("--out", type=output_file(), default=None, help="Write the report here (default: stdout).")
@click.option("--progress/--no-progress", default=None, help="Progress on stderr: bars on a terminal, plain lines "
              "otherwise (default: on).")
@click.option("--fresh", is_flag=True, help="Re-measure every candidate, even one an earlier A/B measured on the "
              "same index, config and questions.")
@click.option("--from-json", "from_json", type=input_file(), default=None,
              help="Render a report saved with --format json in another --format; runs nothing.")
def ab(embedders, rerankers, gold_path, holdout, split, vault, db, config_path, work, fmt, out, progress, fresh,
       from_json):
    """A/B of embedders or rerankers: own index each, gate re-fitted, paired tests, the report."""
    require_extra("tune")
    from tuner.ab.prepare import prepare
    from tuner.ab.progress import ABProgress
    from tuner.ab.run import not_runnable_here, nothing_compared, run_ab
    from tuner.reports import emit
    from tuner.reports.ab import ab_report, render_saved

    if from_json:
        try:
            path = render_saved(from_json, fmt, out)
        except SearchCoreError as e:
            fail(e)
        if path:
            click.echo(f"wrote {path}", err=True)
        return
    # OpenMP threads that spin while waiting (the default) turn a 30 ms e5-small query embedding into
    # ~8 s on a 2-core machine that is busy with other work (measured at load average 25); latency is
    # what an A/B measures, so waiting threads sleep unless the user chose otherwise
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not embedders or not gold_path:
        fail(SearchCoreError("ab needs --embedders A,B and --gold FILE (or --from-json REPORT.json)"))
    sigterm_as_interrupt()
    try:
        params = prepare(embedders, rerankers, gold_path, holdout, split, vault, db, config_path, work)
        if fresh:
            import dataclasses
            params = dataclasses.replace(params, fresh=True)
        for name, why in not_runnable_here(params).items():
            click.echo(f"skipped, cannot run here: {name}: {why}", err=True)
        data = run_ab(params, ABProgress(progress is not False))
        path = emit(ab_report(data.to_json()), fmt, out)
    except SearchCoreError as e:
        fail(e)
    except KeyboardInterrupt:      # before the first candidate started: nothing to report
        click.echo("interrupted before any candidate finished; nothing was changed", err=True)
        sys.exit(130)
    for c in data.candidates:
        if c.status != "ok":
            click.echo(f"{c.label}: {c.status}: {c.message}", err=True)
    where = f" (the report of what ran: {path})" if path else ""
    if data.interrupted:
        click.echo(f"interrupted: cut {', '.join(data.cut)}; the report keeps the finished candidates{where}",
                   err=True)
        sys.exit(130)
    why = nothing_compared(data)
    if why:
        click.echo(f"Error: {why}{where}", err=True)
        sys.exit(1)
    if path:
        click.echo(f"wrote {path}", err=True)


COMMANDS = (ab,)
