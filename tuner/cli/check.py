"""`autoresearch check`: is an index file damaged? (search_core.index.check does the work.)"""

from __future__ import annotations

import json
import sys

import click

from search_core import SearchCoreError

from tuner.cli.options import (db_option, fail, json_option)


def damaged_index_message(db, e: Exception) -> str:
    """What search and eval say when SQLite fails while reading an index, instead of a traceback."""
    return (f"index {db} could not be read ({e}); it is probably damaged. See what is wrong with "
            f"`autoresearch check --db {db}`, then rebuild it: `autoresearch index VAULT --db {db} --full`")


@click.command()
@db_option("The index file to check.")
@click.option("--quick", is_flag=True, help="Only quick_check and reading every vector (what `index` runs first).")
@click.option("--sample", type=click.IntRange(min=0), default=16, help="Vectors re-embedded and compared (0 = none).")
@json_option()
def check(db, quick, sample, as_json):
    """Check an index for damage: SQLite integrity_check, FTS5 integrity-check, every vector read, and a
    sample of vectors compared with fresh embeddings of their text. Exits 1 if anything is damaged."""
    from search_core.index.check import check_index

    try:
        report = check_index(db, quick=quick, sample=sample)
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    else:
        for c in report.checks:
            click.echo(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
        click.echo(report.message(), err=not report.ok)
    sys.exit(0 if report.ok else 1)


COMMANDS = (check,)
