"""`autoresearch index`: build or update an index file from a vault."""

from __future__ import annotations

import json
import sys

import click

from search_core import SearchCoreError
from tuner.cli.options import (db_option, fail, json_option, nonempty_value, Progress,
                               sigterm_as_interrupt, SqlitePath, VaultPath)


@click.command()
@click.argument("vault", type=VaultPath())
@db_option("The index file (SQLite); the index built last becomes the default index of every verb.", reading=False)
@click.option("--embedder", default=None, callback=nonempty_value, help="Embedder name (default: the index's, or e5-small for a new index).")
@click.option("--full", is_flag=True, help="Rebuild from scratch into a new file, swapped in when complete.")
@click.option("--chunk-chars", type=click.IntRange(min=1), default=None, help="Target chunk size in characters (needs --full to change).")
@click.option("--dense-per-note", type=click.IntRange(min=0), default=None, help="Vectors per note, 0 = every chunk (needs --full).")
@click.option("--cache", type=SqlitePath("an embedding cache", reading=False), default=None,
              help="Embedding cache file (default: embed-cache.sqlite in $AUTORESEARCH_CACHE_DIR, else "
                   "$XDG_CACHE_HOME/autoresearch, else ~/.cache/autoresearch; shared by every index; bounded at "
                   "$AUTORESEARCH_CACHE_MAX_MB of vectors, default 512, the least recently used evicted).")
@json_option("Print the report as JSON.")
@click.option("--progress/--no-progress", default=None, help="Progress on stderr: bars on a terminal, plain lines "
              "otherwise (default: on).")
@click.option("--communities", is_flag=True, help="Recompute the note communities now (an update recomputes "
                                                  "them only once enough notes' links or tags changed).")
@click.option("--watch", is_flag=True, help="After indexing, keep watching VAULT and re-index notes shortly "
                                            "after they are saved (Ctrl-C stops).")
def index(vault, db, embedder, full, chunk_chars, dense_per_note, cache, as_json, progress, communities, watch):
    """Index VAULT (a folder of .md notes, or a BEIR corpus folder) into --db."""
    from search_core.config import ChunkConfig
    from search_core.index.indexer import index_vault

    chunk_cfg = ChunkConfig.from_flags(chunk_chars, dense_per_note)
    bars = Progress(progress)
    sigterm_as_interrupt()
    try:
        report = index_vault(vault, db, embedder=embedder, full=full, chunk_cfg=chunk_cfg, cache=cache,
                             progress=bars, communities=communities)
    except SearchCoreError as e:
        bars.close()
        fail(e)
    except KeyboardInterrupt:
        bars.close()
        click.echo(f"\ninterrupted: {db} is unchanged (the old index stays usable); embeddings computed so far "
                   "are kept in the cache, so running the same command again resumes quickly", err=True)
        sys.exit(130)
    bars.close()
    from search_core.paths import record_default_index
    record_default_index(db)
    _print(report, vault, db, as_json)
    if watch:
        from search_core.index.watch import VaultWatcher
        click.echo(f"watching {vault} (Ctrl-C stops)", err=True)
        try:
            VaultWatcher(vault, db, cache=cache, on_update=lambda r: _print(r, vault, db, as_json)).run()
        except KeyboardInterrupt:
            pass


def _print(report, vault, db, as_json) -> None:
    if as_json:
        click.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        return
    click.echo(f"{report.mode} index of {vault} -> {db}: {report.notes} notes, {report.chunks} chunks "
               f"(+{report.added} ~{report.changed} -{report.deleted}, {report.unchanged} unchanged), "
               f"{report.embedded} embedded, {len(report.skipped)} skipped, {report.seconds:.1f}s")
    from search_core.paths import shown_path
    click.echo(f"{report.vector_note()}; texts embedded before, by any index, come from the embedding cache "
               f"{shown_path(report.cache)}")
    for s in report.skipped:
        click.echo(f"skipped {s.path}: {s.reason}", err=True)
    for w in report.warnings:
        click.echo(f"warning {w}", err=True)


COMMANDS = (index,)
