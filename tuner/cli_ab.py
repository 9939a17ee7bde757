"""`autoresearch ab`: embedders (or rerankers on one embedder's index) compared on the same questions."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from search_core import SearchCoreError

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


@main.command()
@click.option("--embedders", required=True, help="Comma-separated, e.g. e5-small,minilm-l6 (two or more, or one "
              "with several --rerankers).")
@click.option("--rerankers", default=None, help="Comma-separated, e.g. none,BAAI/bge-reranker-base: compared on the "
              "one embedder's index.")
@click.option("--gold", "gold_path", required=True, type=click.Path(path_type=Path),
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
def ab(embedders, rerankers, gold_path, holdout, split, vault, db, config_path, work, fmt, out, progress):
    """A/B of embedders or rerankers: own index each, gate re-fitted, paired tests, the report."""
    from .ab import ABProgress, run_ab
    from .report_ab import ab_report
    from .reports import emit

    _sigterm_as_interrupt()
    try:
        params = prepare(embedders, rerankers, gold_path, holdout, split, vault, db, config_path, work)
        data = run_ab(params, ABProgress(sys.stderr.isatty() if progress is None else progress))
        path = emit(ab_report(data), fmt, out)
    except SearchCoreError as e:
        _fail(e)
    if path:
        click.echo(f"wrote {path}", err=True)
    for c in data["candidates"]:
        if c["status"] != "ok":
            click.echo(f"{c['label']}: {c['status']}: {c['message']}", err=True)
    if data["interrupted"]:
        click.echo(f"interrupted: cut {', '.join(data['cut'])}; the report keeps the finished candidates", err=True)
        sys.exit(130)
