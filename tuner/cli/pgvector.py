"""`autoresearch pgvector sync`: an index's dense channel on PostgreSQL + pgvector (search_core.index.pgvector)."""

from __future__ import annotations

import dataclasses
import json

import click

from search_core import SearchCoreError

from tuner.cli.options import db_option, fail, json_option


@click.group()
def pgvector():
    """The dense channel on PostgreSQL + pgvector: an optional backend for a vault past one machine's memory
    (`pip install 'autoresearch[pgvector]'`)."""


@pgvector.command()
@db_option("The index whose vectors go to PostgreSQL.")
@click.option("--dsn", default=None, help="The PostgreSQL server, e.g. postgresql://user@host:5432/dbname (a password "
              "is better in ~/.pgpass or $PGPASSWORD than here). Default: the one the index's settings file names.")
@click.option("--table", default=None, help="The table of this index's vectors. Default: the settings file's, else "
              "autoresearch_dense_ and a hash of the index's path.")
@click.option("--search", "search_mode", type=click.Choice(["exact", "hnsw"]), default=None,
              help="exact: a scan, the lists numpy gives (the default); hnsw: pgvector's HNSW index.")
@click.option("--m", type=int, default=None, help="HNSW: links per node (default 32).")
@click.option("--ef-construction", type=int, default=None, help="HNSW: candidates while building, per "
              "partition (default 200; docs/search.md says what the build costs).")
@click.option("--ef-search", type=int, default=None, help="HNSW: candidates per search and partition "
              "(default 800; at most 1000, pgvector's limit; never fewer than the rows the channel reads, 200 at "
              "depth 50).")
@click.option("--read-rows", type=int, default=None, help="HNSW: rows each search reads before the best are kept "
              "(default 0: the rows the channel asks for); past 1000 pgvector's iterative scan reads on.")
@click.option("--partitions", type=int, default=None, help="The table hash-partitioned in this many by chunk id, "
              "one HNSW graph each (default 4: recall@10 0.985 at 525,000 vectors where one graph stops short of 0.98; "
              "1: one table, one graph; docs/search.md).")
@click.option("--full", is_flag=True, help="Load the table whole, even if only a few notes changed.")
@json_option()
def sync(db, dsn, table, search_mode, m, ef_construction, ef_search, read_rows, partitions, full, as_json):
    """Make the index's PostgreSQL table hold its current vectors and search the dense channel there from now
    on (the settings go beside the index, in INDEX.pgvector.toml; delete that file to search with numpy
    again). The first sync loads every vector; later ones write the notes that changed (an `index` run of the
    vault does that by itself)."""
    from search_core.index.pgvector import PgvectorSettings, default_table, read_settings, sync as sync_table

    try:
        have = read_settings(db)
        if have is None and dsn is None:
            raise SearchCoreError(f"{db} does not search PostgreSQL yet: give --dsn "
                                  "postgresql://user@host:5432/dbname")
        base = have or PgvectorSettings(dsn=dsn, table=table or default_table(db))
        changes = {k: v for k, v in (("dsn", dsn), ("table", table), ("search", search_mode), ("m", m),
                                     ("ef_construction", ef_construction), ("ef_search", ef_search),
                                     ("read_rows", read_rows), ("partitions", partitions)) if v is not None}
        settings = dataclasses.replace(base, **changes)
        report = sync_table(db, settings, full=full)
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(report), indent=2))
        return
    click.echo(f"{report.table}: {report.mode} sync of generation {report.generation}, {report.rows} vectors "
               f"({report.inserted} written, {report.deleted} deleted; {report.keys_read} keys compared) "
               f"in {report.seconds:.1f} s"
               + (f"; HNSW index built in {report.index_seconds:.1f} s" if report.hnsw_built else ""))


COMMANDS = (pgvector,)
