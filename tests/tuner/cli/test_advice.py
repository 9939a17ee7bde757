"""Advice that is right: text that is not UTF-8, gold typos, what differs between
an index and a request and a command that works, and lock / build files left by failed or killed runs."""

import os

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.index.indexer import index_vault
from tests.helpers.gold import GOOD, write
from tuner.cli import main
from tuner.data.gold import GoldError, load_gold


def test_a_cp949_gold_file_is_named_with_its_encoding(tmp_path):
    p = tmp_path / "ko.yaml"
    p.write_bytes(GOOD.replace('"GraphRAG"', '"그래프 검색"').encode("cp949"))
    with pytest.raises(GoldError, match=rf"{p} line 6: not UTF-8 .*it reads as cp949; convert it: `iconv -f cp949"):
        load_gold(p)
    r = CliRunner().invoke(main, ["eval", "--db", str(tmp_path / "none.sqlite"), "--gold", str(p)])
    assert r.exit_code == 1 and "cp949" in r.output and "Traceback" not in r.output


def test_a_utf8_gold_file_with_a_bom_loads(tmp_path):
    p = tmp_path / "bom.yaml"
    p.write_bytes(b"\xef\xbb\xbf" + GOOD.encode("utf-8"))
    assert [q.id for q in load_gold(p).questions] == ["Q1", "P1"]


@pytest.mark.parametrize("text, match", [
    (GOOD.replace('query: "GraphRAG"', "query: 12345"), r"line 4: question Q1: query must be text, got int 12345"),
    (GOOD.replace('query: "GraphRAG"', 'qeury: "GraphRAG"'),
     r"line 4: question Q1 has unknown key 'qeury' \(did you mean 'query'\?\)"),
    (GOOD.replace('why: "title"', 'wyh: "title"'), r"unknown key 'wyh' \(did you mean 'why'\?\)"),
])
def test_gold_typos_say_what_is_wrong(tmp_path, text, match):
    with pytest.raises(GoldError, match=match):
        load_gold(write(tmp_path, text))


def test_changed_chunking_names_the_difference_and_a_command_that_works(small_vault, small_index, shared_cache):
    r = CliRunner().invoke(main, ["index", str(small_vault), "--db", str(small_index), "--chunk-chars", "300",
                                  "--cache", str(shared_cache)])
    assert r.exit_code == 1
    assert "two models" not in r.output and "target_chars 500 in the index vs 300 asked" in r.output
    command = r.output.split("`")[1]
    assert command.startswith("autoresearch index VAULT") and "--full" in command and "--chunk-chars 300" in command
    args = command.split()[2:]
    args[0] = str(small_vault)
    r = CliRunner().invoke(main, ["index", *args, "--cache", str(shared_cache), "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["stats", "--db", str(small_index), "--json"])
    assert '"target_chars": 300' in r.output


def test_an_unknown_embedder_is_named_not_suggested_for_a_rebuild(small_index):
    r = CliRunner().invoke(main, ["search", "김치", "--db", str(small_index), "--embedder", "nonsense-model"])
    assert r.exit_code == 1
    assert "unknown embedder 'nonsense-model'" in r.output and "leave out --embedder" in r.output
    assert "--embedder nonsense-model" not in r.output


def test_lock_and_build_files_of_failed_or_killed_runs_are_cleaned(small_vault, small_index, shared_cache, tmp_path):
    lock = small_index.with_name(small_index.name + ".lock")
    assert not lock.exists()                                   # a finished run leaves no lock file
    (tmp_path / "empty").mkdir()
    with pytest.raises(SearchCoreError, match="no .md notes"):
        index_vault(tmp_path / "empty", small_index, cache=shared_cache)
    assert not lock.exists()                                   # nor does a failed one
    # what kill -9 during `index --full` leaves: a lock file naming a dead pid and a half-built file
    lock.write_text("424242")
    stale = [small_index.with_name(f"{small_index.name}.building-424242{s}") for s in ("", "-wal", "-shm")]
    for p in stale:
        p.write_bytes(b"half-written")
    r = index_vault(small_vault, small_index, cache=shared_cache)   # an incremental run cleans both
    assert r.mode == "incremental"
    assert not lock.exists() and not any(p.exists() for p in stale)
    assert sorted(os.listdir(small_index.parent)) == sorted(
        n for n in os.listdir(small_index.parent) if not n.endswith(".lock") and ".building-" not in n)
