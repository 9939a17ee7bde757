"""Shared by the gate's tests: a recall log of real, labelled searches against the index they searched."""

import time

import pytest

from search_core.recall.log import index_id, log_search
from search_core.search.pipeline import Searcher

ANSWERABLE = ["김치찌개 레시피", "GraphRAG 커뮤니티 요약", "RRF 점수 k 값", "그래프 RAG 엔티티 추출", "돼지 앞다리살 두부",
              "Leiden 알고리즘 커뮤니티"]
PROBES = ["양자 컴퓨터 큐비트 오류 정정", "LightRAG 설치", "축구 월드컵 우승국", "파리 에펠탑 높이", "주식 배당금 세금",
          "비트코인 반감기"]


@pytest.fixture
def labelled_log(tmp_path, shared_cache):
    """Real searches of the small vault logged with labels (6 answerable, 6 probes) against its index: (index,
    log, the index's fingerprint key). One per test: the tests may write to the log."""
    from search_core.index.indexer import index_vault
    from tests.helpers import SMALL_VAULT, write_vault
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(write_vault(tmp_path / "vault", SMALL_VAULT), db, cache=shared_cache)
    s = Searcher(db)
    key = index_id(s.fingerprint)
    now = time.time()
    rows = [{"ts": now - 3600 + i, "session": "a", "query": q, "res": s.search(q), "index_fingerprint": key,
             "label": "relevant" if q in ANSWERABLE else "irrelevant"} for i, q in enumerate(ANSWERABLE + PROBES)]
    s.close()
    log = tmp_path / "recall-log.sqlite"
    log_search(log, rows)
    return db, log, key
