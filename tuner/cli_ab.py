"""`autoresearch ab`: embedders (or rerankers on one embedder's index) compared on the same questions."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from search_core import SearchCoreError
from tuner.extras import require_extra

from .cli import _fail, _sigterm_as_interrupt, main


def load_ab_gold(gold_path: Path, holdout: Path | None, split: float | None):
    """(tuning set, evaluation set, a note on how they were made)."""
    from .gold import load_gold, split_gold

    if holdout and split:
        raise SearchCoreError("give --holdout FILE or --split F, not both")
    gold = load_gold(gold_path)
    if holdout:
        return gold, load_gold(holdout), ""
    if split:
        tune, hold = split_gold(gold, split)
        return tune, hold, (f"{gold.name} split by a hash of each question id: {len(tune.questions)} tuning, "
                            f"{len(hold.questions)} holdout (--split {split}).")
    return gold, gold, ""


def prepare(embedders: str, rerankers: str | None, gold_path: Path, holdout: Path | None, split: float | None,
            vault: str | None, db: Path | None, config_path: Path | None, work: Path):
    """Every check that needs no model: names, gold files, vault. Returns ABParams."""
    from search_core.config import load_config
    from search_core.store import connect, get_meta

    from .ab import ABError, ABParams, parse_candidates

    embs, rers = parse_candidates(embedders, rerankers)
    tune, ev, note = load_ab_gold(gold_path, holdout, split)
    if vault is None and db is not None:
        conn = connect(db)
        try:
            vault = get_meta(conn, "vault")
        finally:
            conn.close()
    vault = vault or ev.vault or tune.vault
    if not vault or not Path(vault).exists():
        raise ABError(f"no vault to index: {vault!r} is not here; pass --vault DIR (the notes folder, a BEIR "
                      "corpus folder or a KorQuAD JSON file)")
    return ABParams(embs, rers, tune, ev, str(vault), str(work), str(db) if db else None, load_config(config_path),
                    note)


def render_saved(path: Path, fmt: str, out: Path | None):
    """A report saved with --format json, rendered again in another format (no model is loaded)."""
    import json

    from .report_ab import ab_report
    from .reports import emit

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise SearchCoreError(f"cannot read the saved A/B report {path}: {e}") from None
    if doc.get("kind") != "ab":
        raise SearchCoreError(f"{path} is not an A/B report saved with --format json (kind {doc.get('kind')!r})")
    return emit(ab_report(doc["data"], generated=doc.get("generated", "")), fmt, out)


@main.command()
@click.option("--embedders", default=None, help="Comma-separated, e.g. e5-small,minilm-l6 (two or more, or one "
              "with several --rerankers).")
@click.option("--rerankers", default=None, help="Comma-separated, e.g. none,BAAI/bge-reranker-base: compared on the "
              "one embedder's index.")
@click.option("--gold", "gold_path", default=None, type=click.Path(path_type=Path),
              help="Tuning questions (the gate is fitted here); also the evaluation set without --holdout/--split.")
@click.option("--holdout", type=click.Path(path_type=Path), default=None, help="Evaluation questions, never fitted on.")
@click.option("--split", type=float, default=None, help="No holdout file: fit on this fraction of --gold, "
              "evaluate on the rest.")
@click.option("--vault", default=None, help="The notes to index (default: --db's vault, or the gold set's corpus).")
@click.option("--db", type=click.Path(path_type=Path, exists=True), default=None,
              help="An existing index: its vault, chunking and embedding cache are reused.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="Starting config (TOML) for every candidate (default: the built-in defaults).")
@click.option("--work", type=click.Path(path_type=Path), default=Path("runs/ab"),
              help="Where each candidate's index and the embedding cache live.")
@click.option("--format", "fmt", type=click.Choice(["md", "html", "json"]), default="md")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write the report here (default: stdout).")
@click.option("--progress/--no-progress", default=None, help="Progress bars on stderr (default: when a terminal).")
@click.option("--fresh", is_flag=True, help="Re-measure every candidate, even one an earlier A/B measured on the "
              "same index, config and questions.")
@click.option("--from-json", "from_json", type=click.Path(path_type=Path, exists=True), default=None,
              help="Render a report saved with --format json in another --format; runs nothing.")
def ab(embedders, rerankers, gold_path, holdout, split, vault, db, config_path, work, fmt, out, progress, fresh,
       from_json):
    """A/B of embedders or rerankers: own index each, gate re-fitted, paired tests, the report."""
    require_extra("tune")
    from .ab import run_ab
    from .ab_progress import ABProgress
    from .report_ab import ab_report
    from .reports import emit

    if from_json:
        try:
            path = render_saved(from_json, fmt, out)
        except SearchCoreError as e:
            _fail(e)
        if path:
            click.echo(f"wrote {path}", err=True)
        return
    # OpenMP threads that spin while waiting (the default) turn a 30 ms e5-small query embedding into
    # ~8 s on a 2-core machine that is busy with other work (measured at load average 25); latency is
    # what an A/B measures, so waiting threads sleep unless the user chose otherwise
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not embedders or not gold_path:
        _fail(SearchCoreError("ab needs --embedders A,B and --gold FILE (or --from-json REPORT.json)"))
    _sigterm_as_interrupt()
    try:
        params = prepare(embedders, rerankers, gold_path, holdout, split, vault, db, config_path, work)
        if fresh:
            import dataclasses
            params = dataclasses.replace(params, fresh=True)
        data = run_ab(params, ABProgress(sys.stderr.isatty() if progress is None else progress))
        path = emit(ab_report(data), fmt, out)
    except SearchCoreError as e:
        _fail(e)
    except KeyboardInterrupt:      # before the first candidate started: nothing to report
        click.echo("interrupted before any candidate finished; nothing was changed", err=True)
        sys.exit(130)
    if path:
        click.echo(f"wrote {path}", err=True)
    for c in data["candidates"]:
        if c["status"] != "ok":
            click.echo(f"{c['label']}: {c['status']}: {c['message']}", err=True)
    if data["interrupted"]:
        click.echo(f"interrupted: cut {', '.join(data['cut'])}; the report keeps the finished candidates", err=True)
        sys.exit(130)
