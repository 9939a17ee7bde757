"""Hostile vaults and queries: nothing hangs, one bad file never ends the run.

The hang cases run in a subprocess with a timeout, so a regression fails the test instead of hanging the suite.
"""

import os
import subprocess
from pathlib import Path
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from search_core.index.indexer import index_vault
from search_core.search.limits import QUERY_EMBED_MAX_CHARS
from search_core.ingest.parse import parse_note
from search_core.search.pipeline import Searcher
from search_core.index.store import connect
from tests.helpers import child_env, write_vault
from tuner.cli import main



def _ids(db):
    c = connect(db)
    try:
        return sorted(r[0] for r in c.execute("SELECT id FROM notes"))
    finally:
        c.close()


def _alias_bomb(levels: int = 10) -> str:
    """A ~450-byte frontmatter whose last key expands to 9**levels strings when aliases are followed."""
    lines = ["---", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        ref = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([ref] * 9)}]")
    lines += [f"tags: *a{levels - 1}", "---", "# 폭탄\n본문은 읽힌다"]
    return "\n".join(lines)


def test_a_named_pipe_in_the_vault_is_skipped_not_read(tmp_path, shared_cache):
    vault = write_vault(tmp_path / "v", {"ok.md": "# 정상\n정상 노트"})
    os.mkfifo(vault / "pipe.md")
    db = tmp_path / "i.sqlite"
    try:
        r = subprocess.run([sys.executable, "-m", "tuner.cli", "index", str(vault), "--db", str(db),
                            "--cache", str(shared_cache)], capture_output=True, text=True, timeout=120, env=child_env())
    except subprocess.TimeoutExpired:
        pytest.fail("index hung on a named pipe called pipe.md")
    assert r.returncode == 0, r.stderr
    assert "pipe.md" in r.stderr and "named pipe, not a regular file" in r.stderr
    assert "1 skipped" in r.stdout
    assert _ids(db) == ["ok"]


def test_symlink_loop_dangling_link_unreadable_file_and_linked_folder_are_skipped(tmp_path, shared_cache):
    vault = write_vault(tmp_path / "v", {"ok.md": "# 정상\n정상 노트", "sub/inner.md": "# 안쪽\n안쪽 노트",
                                         "real.md": "# 진짜\n링크가 가리키는 노트"})
    os.symlink("self.md", vault / "self.md")                  # a loop: ELOOP on stat
    os.symlink("gone.md", vault / "dangling.md")              # ENOENT on stat
    os.symlink("real.md", vault / "alias.md")                 # a link to a regular note is indexed
    os.symlink("/proc/self/mem", vault / "eio.md")            # outside the vault (and a read would fail: EIO)
    os.symlink(vault / "sub", vault / "linked", target_is_directory=True)
    db = tmp_path / "i.sqlite"
    r = index_vault(vault, db, cache=shared_cache)
    assert _ids(db) == ["alias", "ok", "real", "sub/inner"]
    why = {os.path.basename(s.path): s.reason for s in r.skipped}
    assert "symbolic link loop" in why["self.md"]
    assert "dangling symbolic link" in why["dangling.md"]
    assert "outside the vault (/proc/" in why["eio.md"]
    assert "symlinked folder" in why["linked"]
    assert len(r.skipped) == 4
    # the incremental run reports them again and keeps the rest
    r2 = index_vault(vault, db, cache=shared_cache)
    assert r2.mode == "incremental" and len(r2.skipped) == 4 and r2.unchanged == 4


def test_a_regular_file_whose_read_fails_is_skipped(tmp_path):
    """/proc/self/mem is regular, and its first page cannot be read (EIO): read_note says why."""
    from search_core.ingest.vault import VaultFile, read_note
    r = read_note(VaultFile("eio", Path("/proc/self/mem"), 0, 0))
    assert "cannot be read" in r.reason


SECRET = "root:x:0:0:Qwuzzlethorp:/root:/bin/bash"


def _searchable(db, text):
    """The notes a search for `text` returns that hold it."""
    s = Searcher(db)
    try:
        return [h.note_id for h in s.search(text).hits if text in s.chunk_text(h.chunk_id)[1]]
    finally:
        s.close()


def test_a_link_to_a_file_outside_the_vault_is_skipped_with_a_warning(tmp_path, shared_cache):
    """`ln -s /etc/passwd vault/passwd-link.md`: the file it points at is never read into the index, and the
    run names the link and the reason; a link to a note inside the vault is indexed as before."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "passwd").write_text(SECRET + "\n", encoding="utf-8")
    vault = write_vault(tmp_path / "v", {"ok.md": "# 정상\n정상 노트",
                                         "sub/real.md": "# 진짜\nQwuzzlethorp 안쪽 노트"})
    os.symlink(outside / "passwd", vault / "passwd-link.md")
    os.symlink("sub/real.md", vault / "inside-link.md")
    os.symlink(os.path.relpath(outside / "passwd", vault / "sub"), vault / "sub" / "relative.md")
    os.symlink("../passwd-link.md", vault / "sub" / "chain.md")       # a link to the link: outside all the same
    db = tmp_path / "i.sqlite"
    r = CliRunner().invoke(main, ["index", str(vault), "--db", str(db), "--cache", str(shared_cache)])
    assert r.exit_code == 0, r.output
    for name in ("passwd-link.md", "sub/relative.md", "sub/chain.md"):
        assert f"skipped {vault / name}: symbolic link to a file outside the vault ({outside / 'passwd'})" \
            in r.stderr, r.stderr
    assert "3 skipped" in r.stdout
    assert _ids(db) == ["inside-link", "ok", "sub/real"]
    assert _searchable(db, SECRET) == []
    # the listing leaves them out before anything opens them (read_note checks again, where /proc tells it)
    from search_core.ingest.vault import list_vault
    skipped = []
    assert [vf.note_id for vf in list_vault(vault, skipped)] == ["inside-link", "ok", "sub/real"]
    assert sorted(os.path.relpath(s.path, vault) for s in skipped) == ["passwd-link.md", "sub/chain.md",
                                                                        "sub/relative.md"]
    # a vault opened through a link to it: inside is judged by real paths, so its own links stay inside
    os.symlink(vault, tmp_path / "vault-link", target_is_directory=True)
    skipped = []
    assert [vf.note_id for vf in list_vault(tmp_path / "vault-link", skipped)] == ["inside-link", "ok", "sub/real"]
    assert len(skipped) == 3
    # a note that was indexed and is then replaced by a link out of the vault leaves the index
    (vault / "ok.md").unlink()
    os.symlink(outside / "passwd", vault / "ok.md")
    r2 = index_vault(vault, db, cache=shared_cache)
    assert r2.mode == "incremental" and r2.deleted == 1 and len(r2.skipped) == 4
    assert _ids(db) == ["inside-link", "sub/real"] and _searchable(db, SECRET) == []


def test_a_note_swapped_for_a_link_out_after_the_listing_is_not_read(tmp_path):
    """The file read_note opened is checked, not only the path the listing saw."""
    from search_core.ingest.vault import list_vault, read_note
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET, encoding="utf-8")
    vault = write_vault(tmp_path / "v", {"note.md": "# 노트\n평범한 노트"})
    [vf] = list_vault(vault)
    (vault / "note.md").unlink()
    os.symlink(secret, vault / "note.md")
    r = read_note(vf)
    assert "outside the vault" in r.reason and str(secret) in r.reason


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file; the EIO case above covers the read-error path")
def test_unreadable_note_is_skipped_with_permission_denied(tmp_path, shared_cache):
    vault = write_vault(tmp_path / "v", {"ok.md": "# 정상\n정상 노트", "secret.md": "# 비밀\n못 읽는다"})
    (vault / "secret.md").chmod(0)
    r = index_vault(vault, tmp_path / "i.sqlite", cache=shared_cache)
    assert [("secret.md" in s.path, "permission denied" in s.reason) for s in r.skipped] == [(True, True)]


def test_yaml_alias_bomb_is_refused_fast_and_names_the_note(tmp_path):
    code = textwrap.dedent(f"""
        from search_core.ingest.parse import parse_note
        n = parse_note("notes/bomb", {_alias_bomb()!r})
        print(n.warnings[0]); print(n.tags); print(n.sections[0].text)
    """)
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env())
    except subprocess.TimeoutExpired:
        pytest.fail("a 450-byte YAML alias bomb did not finish parsing in 60 s")
    assert r.returncode == 0, r.stderr
    warning, tags, body = r.stdout.splitlines()[:3]
    assert "YAML alias (*a0" in warning and "indexed without its metadata" in warning
    assert tags == "()" and body == "본문은 읽힌다"


def test_deep_and_huge_frontmatter_are_refused_with_a_warning(tmp_path, shared_cache):
    from search_core.ingest.parse import MAX_FRONTMATTER_DEPTH, FrontmatterRefused, load_frontmatter_yaml
    deep = "---\nx: " + "[" * 5000 + "]" * 5000 + "\n---\n깊은 노트 본문\n"
    huge = "---\ntitle: 큰 노트\nsummary: " + "가" * 70_000 + "\n---\n큰 노트 본문\n"
    vault = write_vault(tmp_path / "v", {"deep.md": deep, "huge.md": huge, "ok.md": "# 정상\n정상"})
    r = index_vault(vault, tmp_path / "i.sqlite", cache=shared_cache)
    assert any(w.startswith("deep: ") and f"deeper than {MAX_FRONTMATTER_DEPTH} levels" in w for w in r.warnings)
    assert any(w.startswith("huge: ") and "over the 64 KB limit" in w for w in r.warnings)
    assert _ids(tmp_path / "i.sqlite") == ["deep", "huge", "ok"]
    # our own limit, below any YAML library's (PyYAML 6.0.4's scanner stops the 5,000-deep case first)
    with pytest.raises(FrontmatterRefused, match=f"deeper than {MAX_FRONTMATTER_DEPTH} levels"):
        load_frontmatter_yaml("x: " + "[" * (MAX_FRONTMATTER_DEPTH + 1) + "]" * (MAX_FRONTMATTER_DEPTH + 1))
    load_frontmatter_yaml("x: " + "[" * (MAX_FRONTMATTER_DEPTH - 1) + "]" * (MAX_FRONTMATTER_DEPTH - 1))
    # honest nesting below the limit still loads
    n = parse_note("n", "---\na: {b: {c: [1, [2, [3]]]}}\ntags: [x]\n---\nbody")
    assert n.tags == ("x",) and not n.warnings


def test_a_long_query_is_capped_for_the_embedder_and_explain_says_so(small_index):
    s = Searcher(small_index)
    long_query = ("GraphRAG 커뮤니티 요약과 RRF 융합을 비교하는 긴 질문입니다. " * 80)[:QUERY_EMBED_MAX_CHARS + 600]
    r = s.retrieve(long_query)
    want = s.embedder.embed([long_query[:QUERY_EMBED_MAX_CHARS]], is_query=True)[0]
    assert np.allclose(r.qvec, want, atol=1e-6)
    assert r.query == long_query.strip()                      # the sparse channel still reads all of it
    # every sub-question is embedded too: together they stay within the cap (2,468 characters before the fix)
    assert r.subqueries and sum(len(p) for p in r.subqueries) <= QUERY_EMBED_MAX_CHARS
    out = CliRunner().invoke(main, ["search", long_query, "--db", str(small_index), "--explain"])
    assert out.exit_code == 0, out.output
    assert f"the embedder saw the first {QUERY_EMBED_MAX_CHARS:,}" in out.output


def test_query_bytes_that_are_not_utf8_are_replaced_with_a_warning(small_index):
    query = os.fsdecode(b"\xff\xfe \xea\xb9\x80\xec\xb9\x98")     # what $'\xff\xfe 김치' reaches Python as
    out = CliRunner().invoke(main, ["search", query, "--db", str(small_index)])
    assert out.exit_code == 0, out.output
    assert "2 byte(s) that are not UTF-8" in out.stderr
    assert "life/kimchi" in out.stdout


@pytest.mark.parametrize("args, opt", [(["search", "김치", "-k", "-1"], "-k"), (["search", "김치", "-k", "0"], "-k")])
def test_k_out_of_range_is_refused(small_index, args, opt):
    out = CliRunner().invoke(main, args + ["--db", str(small_index)])
    assert out.exit_code == 2 and f"Invalid value for '{opt}'" in out.output


def test_rounds_out_of_range_is_refused_before_anything_is_written(tmp_path):
    ledger = tmp_path / "l.sqlite"
    out = CliRunner().invoke(main, ["sweep", "--db", str(tmp_path / "x.sqlite"), "--gold", str(tmp_path / "g.yaml"),
                                    "--rounds", "-5", "--ledger", str(ledger)])
    assert out.exit_code == 2 and "Invalid value for '--rounds'" in out.output
    assert not ledger.exists()
