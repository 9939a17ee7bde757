"""An index cut under an older text rule (what parse keeps of a note's text) has every note written again by its
next update, without embedding the chunks whose text did not change; the update after that reads nothing."""

import search_core.ingest.parse as parse
from search_core.index.indexer import TEXT_RULE_KEY, index_vault
from search_core.index.store import connect, get_meta
from tests.helpers import write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER

PAYLOAD = "iVBORw0KGgoAAAANSUhEUgAAAecAAACoCAIAAABVFrEOAAAAAXNSR0IArs4c6QAAvUxJREFUeF7tvQegLWdZ7j" * 60


def _chunks(db, note_id=None):
    c = connect(db, readonly=True)
    try:
        if note_id is None:
            return c.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return [r[0] for r in c.execute("SELECT text FROM chunks WHERE note_id = ? ORDER BY ord", (note_id,))]
    finally:
        c.close()


def test_an_index_cut_under_an_older_text_rule_is_cut_again_once(tmp_path, monkeypatch):
    vault = write_vault(tmp_path / "vault", {
        "pics.md": f"# 업로드 화면\n\n멀티파트 요청 캡처 ![](data:image/png;base64,{PAYLOAD}) 끝.\n",
        "kafka.md": "# Kafka 리밸런싱\n\n컨슈머 그룹에 멤버가 들어오면 파티션이 다시 배정된다.\n",
        "redis.md": "# Redis 축출\n\nmaxmemory에 닿으면 allkeys-lru 정책으로 키를 지운다.\n"})
    db = tmp_path / "index.sqlite"
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(tmp_path / "cache"))    # embedded counts this test's misses
    # the index as the parse before the rule wrote it: the payload kept, no rule recorded
    strip = parse.strip_data_uris
    monkeypatch.setattr(parse, "strip_data_uris", lambda body: body)
    index_vault(vault, db, embedder=FAKE_EMBEDDER)
    c = connect(db)
    c.execute("DELETE FROM meta WHERE key = ?", (TEXT_RULE_KEY,))
    c.close()
    before = _chunks(db, "pics")
    assert any(PAYLOAD[:32] in t for t in before)
    monkeypatch.setattr(parse, "strip_data_uris", strip)       # today's parse

    report = index_vault(vault, db, embedder=FAKE_EMBEDDER)
    assert report.changed == 3 and report.added == 0
    after = _chunks(db, "pics")
    assert not any(PAYLOAD[:32] in t for t in after) and len(after) < len(before)
    assert report.embedded == len(after)            # kafka's and redis's chunks kept their vectors
    c = connect(db, readonly=True)
    assert get_meta(c, TEXT_RULE_KEY) == parse.TEXT_RULE
    c.close()

    again = index_vault(vault, db, embedder=FAKE_EMBEDDER)
    assert (again.changed, again.added, again.embedded) == (0, 0, 0)
