"""The vault order's log beside the index: an update appends an entry for each note it removed, rewrote or
added, and the small file lists what died and where the new entries go; a reader's merge gives exactly the
order SQLite holds (note ids, their chunks by ord), and the same notes and chunk counts as a fresh build. A
change of the notes' index-page flags rewrites only the small file. The test embedder makes the vectors."""

import shutil

import numpy as np
import pytest

from search_core.index import layout as layout_module
from search_core.index.indexer import NAV_RULE_KEY, index_vault
from search_core.index.layout import COUNTS, NAMES, layout_from_index, layout_path, read_layout, rows_path
from search_core.index.store import connect, read_snapshot
from tests.helpers import DEMO_VAULT
from tests.helpers.layout import same_order
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER

PARAGRAPHS = "\n\n".join(f"## 덧붙인 절 {i}\n\n레이아웃의 순서 로그에 들어갈 문단 {i}: 청크가 늘어난다." for i in range(6))


@pytest.fixture
def vault(tmp_path):
    v = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT / "ai" / "rag", v)
    for i in range(40):                        # enough notes that the edits below stay under DEAD_SHARE
        (v / f"m-{i:02d}.md").write_text(f"# 메모 {i}\n\n짧은 메모 {i}: 순서 로그의 바탕.\n", encoding="utf-8")
    return v


def mapped(db):
    """(the mapped layout, the layout SQLite gives) of the index's current commit."""
    conn = connect(db, readonly=True)
    try:
        with read_snapshot(conn):
            got, source = read_layout(conn, db)
            assert source.mapped, source.reason
            return got, layout_from_index(conn)
    finally:
        conn.close()


def order_bytes(db, name):
    return sum(rows_path(db, name + tail).stat().st_size for tail in ("", COUNTS, NAMES))


def edits(vault):
    """Updates that move the order: a note grows, notes sort in first, between and last, a note goes, and
    notes appended by an earlier update are rewritten again."""
    notes = sorted(p for p in vault.rglob("*.md"))
    middle = notes[len(notes) // 2]
    yield lambda: middle.write_text(middle.read_text(encoding="utf-8") + "\n\n" + PARAGRAPHS, encoding="utf-8")

    def add():
        (vault / "0-first.md").write_text("# 맨 앞\n\n정렬에서 맨 앞에 오는 새 노트.\n", encoding="utf-8")
        (vault / middle.with_name(middle.stem + "-b.md").name).write_text("# 사이\n\n사이에 끼는 노트.\n", encoding="utf-8")
        (vault / "zz-last.md").write_text("# 맨 뒤\n\n맨 뒤의 새 노트.\n", encoding="utf-8")
    yield add
    yield lambda: notes[1].unlink()
    yield lambda: (vault / "0-first.md").write_text("# 맨 앞\n\n다시 쓴 노트.\n\n" + PARAGRAPHS, encoding="utf-8")
    yield lambda: middle.write_text("# 줄어든 노트\n\n한 문단만 남았다.\n", encoding="utf-8")


def test_updates_append_to_the_order_log_and_resolve_to_the_vault_order(vault, tmp_path, shared_cache):
    db = tmp_path / "updated" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    first, want = mapped(db)
    same_order(first, want)
    name, size = first.order.name, order_bytes(db, first.order.name)
    assert first.order.base == first.order.entries == len(first.note_ids) and not len(first.order.pending)
    for k, edit in enumerate(edits(vault)):
        edit()
        report = index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
        assert report.mode == "incremental"
        got, want = mapped(db)
        same_order(got, want)
        # the same log, grown by the entries of the notes written (their ids, chunk counts, chunk ids) only
        written = report.added + report.changed
        assert got.order.name == name
        grew = order_bytes(db, name) - size
        assert (grew > 0) == (written > 0) and grew < 300 * max(written, 1), (k, grew)
        assert len(got.order.pending) > 0
        size = order_bytes(db, name)
    assert len(got.order.dead) == 2            # the base entries of the grown (later shrunk) and the deleted notes

    fresh = tmp_path / "fresh" / "index.sqlite"
    index_vault(vault, fresh, embedder=FAKE_EMBEDDER, cache=shared_cache)
    built, _ = mapped(fresh)
    assert got.note_ids == built.note_ids and np.array_equal(np.diff(got.note_start), np.diff(built.note_start))
    assert not len(built.order.dead) and not len(built.order.pending)


def test_past_the_dead_share_an_update_starts_a_new_log(vault, tmp_path, shared_cache, monkeypatch):
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    names = [mapped(db)[0].order.name]
    monkeypatch.setattr(layout_module, "DEAD_SHARE", 0.0)
    for edit in edits(vault):
        edit()
        index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
        got, want = mapped(db)
        same_order(got, want)
        assert got.order.name not in names and got.order.base == got.order.entries
        names.append(got.order.name)
    # the log of the commit before is kept (its `.prev` names it); older ones are gone
    assert not rows_path(db, names[-3]).exists() and rows_path(db, names[-2]).exists()


def test_a_change_of_index_page_flags_rewrites_only_the_small_file(vault, tmp_path, shared_cache):
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    before, _ = mapped(db)
    files = {p.name: (p.stat().st_ino, p.stat().st_size) for p in layout_path(db).parent.iterdir()
             if p.name.startswith(layout_path(db).name + ".")}
    conn = connect(db)
    with conn:                                 # flags of an older rule: the next run reads every note again
        conn.execute("DELETE FROM meta WHERE key = ?", (NAV_RULE_KEY,))
        conn.execute("UPDATE notes SET nav_reason = 'an older rule' WHERE rowid = (SELECT min(rowid) FROM notes)")
    conn.close()
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    got, want = mapped(db)
    same_order(got, want)
    assert got.stamp[0] == before.stamp[0] + 1
    assert [f.name for f in got.files] == [f.name for f in before.files] and got.order.name == before.order.name
    now = {p.name: (p.stat().st_ino, p.stat().st_size) for p in layout_path(db).parent.iterdir()
           if p.name.startswith(layout_path(db).name + ".")}
    kept = {n: v for n, v in files.items() if not n.endswith(".prev")}
    assert {n: now[n] for n in kept} == kept   # every rows file and the order log as they were


def test_a_writer_that_leaves_a_changed_note_out_gets_a_whole_order(vault, tmp_path, shared_cache, monkeypatch):
    from search_core.index import indexer
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    name = mapped(db)[0].order.name
    real = indexer.refresh_layout
    monkeypatch.setattr(indexer, "refresh_layout", lambda *a, moved=None, **kw: real(*a, moved=(), **kw))
    grown = sorted(vault.rglob("*.md"))[5]     # more chunks than before: the count check sees it
    grown.write_text(grown.read_text(encoding="utf-8") + "\n\n" + PARAGRAPHS, encoding="utf-8")
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    got, want = mapped(db)
    same_order(got, want)
    assert got.order.name != name and got.order.base == got.order.entries
