import fcntl
import os
import threading
import uuid

import pytest

from search_core import SearchCoreError
from search_core.index.indexer import index_vault
from search_core.search.pipeline import Searcher
from search_core.index.store import SCHEMA_VERSION, connect, get_meta
from tests.helpers import write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER


def q(db, sql):
    c = connect(db)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def test_index_fills_every_table(small_index_e5):
    db = small_index_e5
    assert q(db, "PRAGMA user_version")[0][0] == SCHEMA_VERSION == 2
    assert q(db, "PRAGMA journal_mode")[0][0] == "wal"
    assert sorted(r[0] for r in q(db, "SELECT id FROM notes")) == ["ai/graphrag", "ai/rrf", "index", "life/kimchi"]
    n_chunks = q(db, "SELECT count(*) FROM chunks")[0][0]
    assert q(db, "SELECT count(*) FROM chunks_fts")[0][0] == n_chunks
    assert q(db, "SELECT count(*) FROM chunk_vec")[0][0] == q(db, "SELECT sum(has_vector) FROM chunks")[0][0] == n_chunks
    links = dict(((s, t), d) for s, t, d in q(db, "SELECT src, target, dst FROM links"))
    assert links[("ai/rrf", "graphrag")] == "ai/graphrag"
    assert links[("index", "life/kimchi")] == "life/kimchi"
    assert ("life/kimchi", "cooking") in q(db, "SELECT note_id, tag FROM belongs_to")
    assert ("ai/graphrag", "knowledge-graph") in q(db, "SELECT note_id, tag FROM belongs_to")   # inline #tag
    assert ("그래프 RAG", "alias", "ai/graphrag") in q(db, "SELECT name, kind, note_id FROM entities")
    assert q(db, "SELECT count(*) FROM entity_vec")[0][0] == q(db, "SELECT count(*) FROM entities")[0][0]
    assert q(db, "SELECT count(*) FROM communities")[0][0] == 4
    assert q(db, "SELECT is_nav FROM notes WHERE id = 'index'")[0][0] == 1
    assert all("title:" not in t for (t,) in q(db, "SELECT text FROM chunks"))
    fp = get_meta(connect(db), "fingerprint")
    assert fp["embedder"]["name"] == "e5-small" and fp["embedder"]["dim"] == 384
    assert fp["embedder"]["query_prefix"] == "query: " and fp["chunking"]["target_chars"] == 500


def test_incremental_reindex_by_content_hash(small_vault, small_index, shared_cache):
    r = index_vault(small_vault, small_index, cache=shared_cache)
    assert (r.mode, r.added, r.changed, r.deleted, r.embedded) == ("incremental", 0, 0, 0, 0)
    # text no earlier run embedded: with AUTORESEARCH_TEST_EMBED_CACHE kept, fixed text would come from the cache
    fresh = uuid.uuid4().hex[:8]
    (small_vault / "ai" / "rrf.md").write_text(f"---\ntitle: RRF\n---\nk를 20으로 바꿨다. 새 문장 하나 {fresh}.\n",
                                               encoding="utf-8")
    (small_vault / "life" / "kimchi.md").unlink()
    (small_vault / "new.md").write_text(f"# 새 노트\n[[ai/rrf]] 를 본다 {fresh}\n", encoding="utf-8")
    r = index_vault(small_vault, small_index, cache=shared_cache)
    assert (r.added, r.changed, r.deleted) == (1, 1, 1)
    assert r.embedded >= 2                      # the changed and the new chunk; nothing else
    ids = sorted(x[0] for x in q(small_index, "SELECT id FROM notes"))
    assert ids == ["ai/graphrag", "ai/rrf", "index", "new"]
    assert q(small_index, "SELECT count(*) FROM chunks WHERE note_id = 'life/kimchi'")[0][0] == 0
    assert q(small_index, "SELECT count(*) FROM chunks_fts")[0][0] == q(small_index, "SELECT count(*) FROM chunks")[0][0]
    assert q(small_index, "SELECT count(*) FROM chunk_vec")[0][0] == q(small_index, "SELECT count(*) FROM chunks")[0][0]
    assert ("new", "ai/rrf") in q(small_index, "SELECT src, dst FROM links")
    # touching a file without changing it re-reads it but embeds nothing
    os.utime(small_vault / "new.md", ns=(1, 1))
    r = index_vault(small_vault, small_index, cache=shared_cache)
    assert (r.changed, r.embedded) == (0, 0)


def test_full_rebuild_swaps_a_new_file_and_reuses_the_cache(small_vault, small_index_e5, shared_cache):
    reader = Searcher(small_index_e5)
    before = os.stat(small_index_e5).st_ino
    r = index_vault(small_vault, small_index_e5, full=True, cache=shared_cache)
    assert r.mode == "full" and r.embedded == 0          # every vector came from the cache
    assert os.stat(small_index_e5).st_ino != before
    assert not list(small_index_e5.parent.glob("*.building-*"))
    assert reader.search("김치찌개").hits[0].note_id == "life/kimchi"   # an open reader follows the swap


def test_another_embedder_is_refused_with_the_fix(small_vault, small_index, shared_cache):
    import sys
    torch_before = "torch" in sys.modules
    with pytest.raises(SearchCoreError, match=r"--full --embedder minilm-l6"):
        index_vault(small_vault, small_index, embedder="minilm-l6", cache=shared_cache)
    # said on the name alone: the model it would refuse is never loaded (torch for minilm-l6)
    assert torch_before or "torch" not in sys.modules
    with pytest.raises(SearchCoreError, match=r"autoresearch index VAULT --db .* --full"):
        Searcher(small_index, embedder="minilm-l6")


@pytest.mark.models
def test_model_swap_rebuilds_from_scratch_never_mixed(small_vault, small_index, shared_cache):
    index_vault(small_vault, small_index, embedder="minilm-l6", full=True, cache=shared_cache)
    fp = get_meta(connect(small_index), "fingerprint")
    assert fp["embedder"]["name"] == "minilm-l6"
    assert q(small_index, "SELECT count(*) FROM chunk_vec")[0][0] == q(small_index, "SELECT count(*) FROM chunks")[0][0]
    s = Searcher(small_index)
    assert s.embedder_name == "minilm-l6" and s.view.matrix.shape[1] == 384
    # swapping back costs nothing: the first model's vectors are still in the cache
    r = index_vault(small_vault, small_index, embedder=FAKE_EMBEDDER, full=True, cache=shared_cache)
    assert r.embedded == 0


def test_changed_chunking_is_refused(small_vault, small_index, shared_cache):
    from search_core.config import ChunkConfig
    with pytest.raises(SearchCoreError, match="chunking"):
        index_vault(small_vault, small_index, chunk_cfg=ChunkConfig(target_chars=300), cache=shared_cache)


def test_bad_files_are_reported_and_the_rest_indexed(tmp_path, shared_cache):
    big = "---\ntitle: 일기\n---\n" + ("## 날\n" + "오늘도 달렸다. 기록은 5km 28분. " * 40 + "\n") * 180
    assert len(big.encode()) > 300_000
    vault = write_vault(tmp_path / "v", {
        "ok.md": "# 정상\n정상 노트",
        "bad-yaml.md": "---\ntitle: [oops\n: : :\n---\n본문은 살아남는다\n",
        "latin1.md": "caf\xe9 note: ".encode("latin-1") + "한글".encode("utf-8"),
        "binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00",
        "diary.md": big,
    })
    db = tmp_path / "i.sqlite"
    r = index_vault(vault, db, cache=shared_cache)
    assert sorted(x[0] for x in q(db, "SELECT id FROM notes")) == ["bad-yaml", "diary", "latin1", "ok"]
    assert [s.reason for s in r.skipped if s.path.endswith("binary.md")][0].startswith("binary file")
    assert any("bad-yaml" in w and "malformed YAML" in w for w in r.warnings)
    assert any("latin1" in w and "not valid UTF-8" in w for w in r.warnings)
    assert "본문은 살아남는다" in q(db, "SELECT group_concat(text) FROM chunks WHERE note_id = 'bad-yaml'")[0][0]
    assert q(db, "SELECT count(*) FROM chunks WHERE note_id = 'diary'")[0][0] > 100
    assert q(db, "SELECT count(*) FROM chunk_vec")[0][0] < q(db, "SELECT count(*) FROM chunks")[0][0]


def test_empty_vault_and_missing_vault(tmp_path, small_index, shared_cache):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SearchCoreError, match="no .md notes"):
        index_vault(tmp_path / "empty", tmp_path / "x.sqlite", cache=shared_cache)
    assert not (tmp_path / "x.sqlite").exists()
    with pytest.raises(SearchCoreError, match="does not exist"):
        index_vault(tmp_path / "nope", tmp_path / "x.sqlite", cache=shared_cache)
    # an empty vault never wipes an existing index
    with pytest.raises(SearchCoreError, match="left as it was"):
        index_vault(tmp_path / "empty", small_index, cache=shared_cache)
    assert q(small_index, "SELECT count(*) FROM notes")[0][0] == 4


def test_a_second_index_while_one_runs_is_refused(small_vault, small_index, shared_cache):
    lock = open(str(small_index) + ".lock", "a+")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(SearchCoreError, match="already writing"):
            index_vault(small_vault, small_index, cache=shared_cache)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


@pytest.mark.parametrize("stage", ["embed", "entities"])
def test_ctrl_c_leaves_the_old_index_usable(small_vault, small_index, shared_cache, stage):
    (small_vault / "ai" / "rrf.md").write_text("# RRF\n완전히 새로운 내용: " + stage + " 단계에서 중단\n", encoding="utf-8")
    (small_vault / "extra.md").write_text("# 추가\n중단 테스트용 " + stage + "\n", encoding="utf-8")

    def interrupt(s, done, total):
        if s == stage:
            raise KeyboardInterrupt

    for full in (False, True):
        with pytest.raises(KeyboardInterrupt):
            index_vault(small_vault, small_index, cache=shared_cache, full=full, progress=interrupt)
        assert sorted(x[0] for x in q(small_index, "SELECT id FROM notes")) == ["ai/graphrag", "ai/rrf", "index", "life/kimchi"]
        assert "k는 보통 60" in q(small_index, "SELECT group_concat(text) FROM chunks WHERE note_id='ai/rrf'")[0][0]
        assert not list(small_index.parent.glob("*.building-*"))
        assert Searcher(small_index).search("김치찌개").hits[0].note_id == "life/kimchi"
    r = index_vault(small_vault, small_index, cache=shared_cache)      # and the next run completes
    assert (r.added, r.changed) == (1, 1)


def test_searches_run_while_an_update_is_written(small_vault, small_index, shared_cache):
    """The overlap is forced: the reader searches from inside the writer's open transaction (the
    entities stage runs after the new note is written and before the commit)."""
    reader = Searcher(small_index)
    during = []

    def search_now():
        try:
            res = reader.search("RRF 점수")
            during.append((bool(res.hits), "more" in reader.view.notes))
        except Exception as e:  # reported below
            during.append(e)

    def progress(stage, done, total):
        if stage == "entities" and not during:
            t = threading.Thread(target=search_now)
            t.start()
            t.join(timeout=60)

    (small_vault / "more.md").write_text("# 더\nRRF와 BM25를 섞는다\n", encoding="utf-8")
    index_vault(small_vault, small_index, cache=shared_cache, progress=progress)
    assert during == [(True, False)]            # served from the last commit while the writer held its own
    reader.search("RRF 점수")
    assert "more" in reader.view.notes          # and the commit is seen right after


def test_beir_corpus_reads_as_a_vault(tmp_path, shared_cache):
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "doc.pdf", "text": "한국은행 기준금리는 3.5%로 동결되었다."}\n'
        '{"_id": "d2", "title": "", "text": "서울 지하철 요금이 인상된다."}\n'
        'not json\n', encoding="utf-8")
    r = index_vault(beir, tmp_path / "b.sqlite", cache=shared_cache)
    assert r.notes == 2 and len(r.skipped) == 1
    assert Searcher(tmp_path / "b.sqlite").search("기준금리 동결").hits[0].note_id == "d1"


def test_a_newer_schema_is_refused_with_the_fix(small_index):
    c = connect(small_index)
    c.execute("PRAGMA user_version = 99")
    c.close()
    with pytest.raises(SearchCoreError, match="newer than this autoresearch"):
        Searcher(small_index)


def test_stale_build_files_from_a_killed_run_are_removed(small_vault, tmp_path, shared_cache):
    db = tmp_path / "k.sqlite"
    stale = tmp_path / "k.sqlite.building-99999"
    stale.write_bytes(b"half-written")
    index_vault(small_vault, db, cache=shared_cache)
    assert not stale.exists() and db.exists()


def test_korquad_json_reads_as_a_vault_and_evaluates(tmp_path, shared_cache):
    import json as _json
    from search_core.config import SearchConfig
    from tuner.evaluation.evaluate import evaluate
    from tuner.data.gold import load_gold
    doc = {"version": "KorQuAD_v1.0_dev", "data": [
        {"title": "한국은행", "paragraphs": [
            {"context": "한국은행은 2024년 기준금리를 3.5%로 동결했다.", "qas": [
                {"id": "q1", "question": "한국은행이 동결한 기준금리는?", "answers": [{"text": "3.5%", "answer_start": 15}]}]},
            {"context": "서울 지하철 기본요금은 1,400원으로 올랐다.", "qas": [
                {"id": "q2", "question": "지하철 기본요금은 얼마로 올랐나?", "answers": [{"text": "1,400원", "answer_start": 13}]}]}]}]}
    p = tmp_path / "KorQuAD_mini.json"
    p.write_text(_json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    db = tmp_path / "kq.sqlite"
    r = index_vault(p, db, cache=shared_cache)
    assert r.notes == 2 and sorted(x[0] for x in q(db, "SELECT id FROM notes")) == ["000-00", "000-01"]
    res = evaluate(Searcher(db), load_gold(p), SearchConfig(exclude_nav=False))
    assert res.overall["n"] == 2 and res.overall["hit@1"] == 1.0
