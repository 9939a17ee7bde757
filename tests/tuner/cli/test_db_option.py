"""Which index a verb uses: --db, else $AUTORESEARCH_DB, else the default index `index` recorded last;
none of them: an error naming all three."""

import json
from pathlib import Path

import click
from click.testing import CliRunner

from search_core.paths import default_index, record_default_index
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tuner.cli import main
from tuner.cli.options import db_option


@click.command()
@db_option()
def which(db):
    click.echo(str(db))


def test_db_then_the_environment_then_the_recorded_default(tmp_path, monkeypatch):
    cli = CliRunner()
    none = cli.invoke(which, [])
    assert none.exit_code == 2
    for way in ("--db FILE", "AUTORESEARCH_DB=FILE", "autoresearch index VAULT --db FILE"):
        assert way in none.output, none.output
    record_default_index(tmp_path / "recorded.sqlite")
    assert cli.invoke(which, []).output.strip() == str((tmp_path / "recorded.sqlite").resolve())
    monkeypatch.setenv("AUTORESEARCH_DB", str(tmp_path / "env.sqlite"))
    assert cli.invoke(which, []).output.strip() == str(tmp_path / "env.sqlite")
    assert cli.invoke(which, ["--db", str(tmp_path / "flag.sqlite")]).output.strip() == str(tmp_path / "flag.sqlite")


def test_every_verb_that_takes_db_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_DB", str(tmp_path / "from-env.sqlite"))

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        for p in cmd.params:
            if isinstance(p, click.Option) and "--db" in p.opts:
                yield path, p

    found = list(walk(main, []))
    assert len(found) >= 10
    for path, p in found:
        assert p.envvar == "AUTORESEARCH_DB", f"`{' '.join(path)} --db` does not read AUTORESEARCH_DB"


def test_index_records_the_default_and_search_uses_it(small_vault, tmp_path, shared_cache):
    cli = CliRunner()
    db = tmp_path / "made.sqlite"
    r = cli.invoke(main, ["index", str(small_vault), "--db", str(db), "--embedder", FAKE_EMBEDDER,
                          "--cache", str(shared_cache)])
    assert r.exit_code == 0, r.output
    assert default_index() == db.resolve()
    r = cli.invoke(main, ["search", "GraphRAG", "--json", "-k", "1"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["results"][0]["abs_path"].startswith(str(Path(small_vault).resolve()))
