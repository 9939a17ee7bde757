import json

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.search.channels import fts_match_expr, query_terms, shares_query_vector, split_query
from search_core.config import SearchConfig
from search_core.search.pipeline import Searcher, confidence_label
from tuner.cli import main


def test_query_terms_and_quoting():
    tri, short = query_terms('GraphRAG란 AI 팀 "NEAR(" OR *')
    assert "gra" in tri and "rag" in tri and "ag란" in tri and "nea" in tri
    assert short == ["ai", "팀", "or"]
    assert fts_match_expr(['a"b']) == '"a""b"'


def test_a_part_that_is_most_of_the_query_shares_its_vector():
    query = "RAG와 GraphRAG의 차이"                                 # 17 characters
    assert split_query(query) == ["RAG", "GraphRAG의 차이"]
    assert shares_query_vector("GraphRAG의 차이", query)            # 13 >= 8.5
    assert not shares_query_vector("RAG", query)                     # 3 < 8.5
    assert shares_query_vector("ab c", "ab c, ef") and not shares_query_vector("ab c", "ab c, efg")  # half, less
    assert not shares_query_vector("GraphRAG", "GraphRAG와 RRF 점수")   # 8 >= 7.5, but one word: a name


def test_split_query():
    assert split_query("RAG와 GraphRAG의 차이") == ["RAG", "GraphRAG의 차이"]
    assert split_query("bge-m3 vs e5") == ["bge-m3", "e5"]
    assert split_query("결과 분석 방법") == []          # "과" inside a word is not a conjunction
    assert split_query("GraphRAG") == []


@pytest.mark.parametrize("query,expect", [('"', None), ('"""', None), ("*", None), ("NEAR(", None),
                                          ("NEAR(a b", None), ("OR", None), ("a OR b -c", None), ("- - -", None),
                                          ("(a AND b", None), ("제목:*", None), ("😀😀😀", None),
                                          ("🍲 김치", "life/kimchi"), ('"GraphRAG" OR', "ai/graphrag"),
                                          ("NEAR(커뮤니티", "ai/graphrag")])
def test_hostile_queries_do_not_break_sparse(small_index, query, expect):
    """Operators and quotes are searched as text: the words in them still find their note through
    sparse (which would be empty if the MATCH had failed and been swallowed), and dense always answers."""
    s = Searcher(small_index)
    res = s.search(query)
    assert res.hits and res.gate.threshold > 0 and res.confidence in {"high", "medium", "low", "very_low"}
    sparse = [h.note_id for h in s.retrieve(query, depth=10).lists["sparse"]]
    if expect:
        assert sparse[:1] == [expect], sparse


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_refused(small_index, query):
    with pytest.raises(SearchCoreError, match="query is empty"):
        Searcher(small_index).search(query)


def test_short_tokens_use_the_like_fallback(small_index):
    s = Searcher(small_index)
    r = s.retrieve("AI 팀", depth=10)
    hits = r.lists["sparse"]
    assert hits[0].note_id == "life/kimchi"                # the only note with both "AI" and "팀"
    assert hits[0].score > hits[1].score                   # others only hold "ai" (in the link "ai/rrf")


def test_alias_reaches_the_note_through_the_entity_channel(small_index):
    r = Searcher(small_index).retrieve("RRF 점수 계산", depth=10)
    assert r.lists["entity"][0].note_id == "ai/rrf"


# Two paragraphs of one article under the article's title, and a note of its own name.
ARTICLE_VAULT = {
    "hangang/p1.md": "---\ntitle: 한강\n---\n한강은 태백산맥에서 시작해 서해로 흐르는 강이다.\n",
    "hangang/p2.md": "---\ntitle: 한강\n---\n한강에는 서른 개가 넘는 다리가 놓여 있다.\n",
    "seoul.md": "---\ntitle: 서울특별시\n---\n서울특별시는 대한민국의 수도이다.\n",
}


def test_notes_that_one_name_gives_the_same_evidence_make_no_entity_list(tmp_path, shared_cache):
    """Ranked by their cosine alone, such notes would be the dense list's order again (fused twice); a name
    held by one note still lists it."""
    from search_core.index.indexer import index_vault
    from tests.helpers import write_vault
    from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
    db = tmp_path / "article" / "index.sqlite"
    index_vault(write_vault(tmp_path / "articlevault", ARTICLE_VAULT), db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    s = Searcher(db)
    try:
        assert s.retrieve("한강 다리는 몇 개인가", depth=10).lists["entity"] == []
        assert [h.note_id for h in s.retrieve("서울특별시의 인구", depth=10).lists["entity"]][:1] == ["seoul"]
    finally:
        s.close()


def test_results_have_no_nav_notes_and_no_note_twice(small_index):
    res = Searcher(small_index).search("GraphRAG RRF 김치찌개", SearchConfig(top_k=10))
    ids = [h.note_id for h in res.hits]
    assert "index" not in ids and len(ids) == len(set(ids))
    res = Searcher(small_index).search("GraphRAG RRF", SearchConfig(top_k=10, exclude_nav=False))
    assert "index" in [h.note_id for h in res.hits]


def test_gate_and_confidence(small_index):
    s = Searcher(small_index)
    res = s.search("김치찌개에 돼지 앞다리살 몇 그램?")
    assert res.hits[0].note_id == "life/kimchi"
    assert res.gate.top_score == pytest.approx(res.hits[0].cosine)
    assert res.gate.inject == (res.gate.top_score >= res.gate.threshold)
    assert res.gate.threshold == 0.82                      # e5-small's own default
    strict = s.search("김치찌개", SearchConfig(threshold=0.99))
    assert not strict.gate.inject and strict.gate.threshold == 0.99


def test_confidence_bands():
    assert [confidence_label(x, 0.8) for x in (0.9, 0.86, 0.8, 0.76, 0.7)] == \
        ["high", "high", "medium", "low", "very_low"]


def test_channel_weights_change_the_fusion(small_index):
    s = Searcher(small_index)
    r = s.retrieve("GraphRAG 커뮤니티", depth=10)
    only_sparse = s.rank(r, SearchConfig(w_dense=0, w_decomposed=0, w_entity=0, w_sparse=1, w_ngram=0))
    assert only_sparse.hits[0].channels["sparse"] == 1
    assert all(set(f.terms) == {"sparse"} for f in only_sparse.fused)


def test_search_json_shape(small_index):
    out = CliRunner().invoke(main, ["search", "RRF k 값", "--db", str(small_index), "--json", "-k", "2"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert set(data) == {"query", "results", "gate", "confidence", "timings_ms"}
    assert len(data["results"]) == 2
    assert set(data["results"][0]) >= {"note_id", "title", "score", "snippet", "channels"}
    assert set(data["results"][0]["channels"]) == {"dense", "sparse", "decomposed", "entity", "ngram"}
    assert set(data["gate"]) == {"inject", "top_score", "threshold", "band", "kind", "probability", "reason",
                                 "decided_by", "features"}
    assert set(data["gate"]["decided_by"]) == {"inject", "probability", "band", "kind", "source", "threshold", "reason"}
    assert {"embed", "dense", "sparse", "decomposed", "entity", "fusion", "rerank", "total"} <= set(data["timings_ms"])
    assert "---" not in data["results"][0]["snippet"] and "aliases:" not in data["results"][0]["snippet"]


def test_search_explain_shows_lists_and_arithmetic(small_index):
    out = CliRunner().invoke(main, ["search", "RRF와 GraphRAG", "--db", str(small_index), "--explain"])
    assert out.exit_code == 0, out.output
    assert "sub-questions: RRF | GraphRAG" in out.output
    assert "[dense]" in out.output and "[entity]" in out.output
    assert "weighted RRF" in out.output
    # each fused line is its own arithmetic: score = sum of the channel terms w_c / (k + rank_c)
    fused = out.output.split("weighted RRF", 1)[1].split("\ngate", 1)[0]
    lines = [ln.split("   ")[0].strip() for ln in fused.splitlines()[1:] if " = " in ln]
    assert lines and any("dense " in ln for ln in lines)
    for ln in lines:
        total, terms = ln.split(" = ")
        assert abs(float(total) - sum(float(t.split()[1]) for t in terms.split(" + "))) < 2e-5, ln


def test_cli_errors_are_one_clear_line(tmp_path, small_index):
    r = CliRunner().invoke(main, ["search", "x", "--db", str(tmp_path / "missing.sqlite")])
    assert r.exit_code == 1 and "autoresearch index VAULT --db" in r.output
    r = CliRunner().invoke(main, ["search", " ", "--db", str(small_index)])
    assert r.exit_code == 1 and "query is empty" in r.output
    r = CliRunner().invoke(main, ["index", str(tmp_path / "nope"), "--db", str(tmp_path / "x.sqlite")])
    assert r.exit_code == 1 and "does not exist" in r.output
    r = CliRunner().invoke(main, ["search", "x", "--db", str(small_index), "--embedder", "minilm-l6"])
    assert r.exit_code == 1 and "--full" in r.output
    r = CliRunner().invoke(main, ["search", "x", "--db", str(small_index), "--reranker", "bogus"])
    assert r.exit_code == 1 and "unknown reranker" in r.output
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all" * 100)
    r = CliRunner().invoke(main, ["search", "x", "--db", str(garbage)])
    assert r.exit_code == 1 and "--full" in r.output


def test_index_and_stats_cli(small_vault, tmp_path):
    db = tmp_path / "cli.sqlite"
    r = CliRunner().invoke(main, ["index", str(small_vault), "--db", str(db), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["notes"] == 4       # progress lines go to stderr
    r = CliRunner().invoke(main, ["stats", "--db", str(db), "--json"])
    s = json.loads(r.output)
    assert s["notes"] == 4 and s["nav_notes"] == 1 and s["vectors"] == s["chunks"]
    assert s["fingerprint"]["embedder"]["name"] == "e5-small"


def test_demo_vault_is_a_real_vault(demo_index):
    from search_core.index.stats import index_stats
    s = index_stats(demo_index)
    assert s["notes"] >= 120
    assert s["nav_notes"] >= 3
    assert s["links"] > 200 and s["unresolved_links"] >= 1
    assert s["communities"] > 1 and s["notes_with_warnings"] == 0


def test_demo_vault_search(demo_index_e5):
    s = Searcher(demo_index_e5)            # what the first answer is, is what real vectors decide
    res = s.search("GraphRAG 커뮤니티 요약")
    assert res.hits[0].note_id.endswith("graphrag")
    assert all(not s.is_nav(h.note_id) for h in res.hits)


def test_short_token_index_equals_the_like_scan(small_index):
    s = Searcher(small_index)
    idx = s.view.short_index()
    for tok in ["ai", "AI", "팀", "김", "k", "60", "zz", "묵은"]:
        like = sorted(r[0] for r in s.conn.execute(
            "SELECT id FROM chunks WHERE text LIKE ? OR context LIKE ?", (f"%{tok}%", f"%{tok}%")))
        assert sorted(idx.chunks_containing(tok).tolist()) == like, tok
