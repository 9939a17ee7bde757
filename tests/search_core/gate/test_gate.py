import json

import numpy as np
import pytest
from click.testing import CliRunner

from search_core.config import SearchConfig
from search_core.gate.features import (ALWAYS, FEATURE_NAMES, GATE_FEATURES, HEADING_WORD_FEATURES, NGRAM_FEATURES,
                                       features_read, gate_features, idf_overlap, term_overlap, unknown_words)
from search_core.gate.model import DEFAULT_GATE_FILE, GateFitError, best_balanced_threshold, choose_gate, load_gate, sidecar_path
from tuner.gate.fit import fit_gate
from search_core.gate.request import GateRequest
from search_core.search.pipeline import Searcher
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tests.helpers.queries import QUERIES_IN, QUERIES_OUT
from tuner.cli import main


def test_features_are_absolute_and_complete(small_index):
    s = Searcher(small_index, all_gate_features=True)
    res = s.search("김치찌개 레시피")
    f = res.gate.features
    assert tuple(f) == FEATURE_NAMES
    dense = res.retrieval.lists["dense"]
    assert f["top_cos"] == pytest.approx(dense[0].score)          # not min-max'd to 1
    assert f["top_cos"] < 0.999
    assert f["hit_cos"] == pytest.approx(res.hits[0].cosine)
    assert f["cos_margin"] == pytest.approx(dense[0].score - dense[1].score)
    assert f["title_match"] == 1.0 and f["term_overlap"] == 1.0      # the title, word for word
    assert f["hangul_share"] == 1.0 and f["latin_share"] == 0.0
    other = s.search("양자 컴퓨터 큐비트 오류 정정").gate.features
    assert other["title_match"] == 0.0 and other["term_overlap"] < 0.5
    assert other["top_cos"] < f["top_cos"]


def test_a_search_computes_only_what_its_gate_and_a_refit_read(small_index, tmp_path):
    """A search computes GATE_FEATURES (what a refit reads from its logged rows), the deciding model's own
    features and ALWAYS, each with the value a search computing every feature gives; a candidate no gate reads
    (the content words against the heading path) is not computed until a gate file reads it."""
    query = "GraphRAG 커뮤니티 요약 쿠버네티스"
    full = Searcher(small_index, all_gate_features=True).search(query).gate.features
    assert set(full) == set(FEATURE_NAMES)
    s = Searcher(small_index)
    f = s.search(query).gate.features
    assert set(f) == set(GATE_FEATURES) | ALWAYS
    assert not set(f) & set(HEADING_WORD_FEATURES) and set(NGRAM_FEATURES) <= set(f)
    assert f == {k: full[k] for k in f}
    assert full["heading_word_coverage_idf"] > 0          # computed, not read: left out above
    rows = [(Searcher(small_index, all_gate_features=True).search(q).gate.features, y)
            for qs, y in ((QUERIES_IN, 1), (QUERIES_OUT, 0)) for q in qs]
    m = fit_gate([r for r, _ in rows], [y for _, y in rows], fingerprint=s.fingerprint["embedder"],
                 features=["top_cos", "heading_word_coverage_idf"])
    s = Searcher(small_index, gate=GateRequest(path=m.save(tmp_path / "candidates.json")))
    g = s.search(query).gate
    assert g.kind == "model" and set(g.features) == set(GATE_FEATURES) | ALWAYS | {"heading_word_coverage_idf"}
    assert g.features["heading_word_coverage_idf"] == full["heading_word_coverage_idf"]
    assert g.probability == pytest.approx(m.probability(full))


def test_unknown_words_and_idf_overlap(small_index):
    s = Searcher(small_index)
    v, c = s.view, s.conn
    assert unknown_words(v, c, "김치찌개 레시피") == 0.0            # both in the title
    assert unknown_words(v, c, "김치찌개 만들기") == 0.5            # "만들기" is in no chunk of the vault
    assert unknown_words(v, c, "Kubernetes 김치찌개 팀") == pytest.approx(1 / 3)   # 3 words, one unseen
    assert unknown_words(v, c, "zq 팀") == 0.5                    # a short word: the short-token postings
    assert unknown_words(v, c, "") == 0.0
    # the rare term matters more than the common one: "graphrag" (1 chunk-ish) outweighs "rag" (many)
    both = idf_overlap(v, c, "GraphRAG 커뮤니티", "graphrag 커뮤니티")
    rare_only = idf_overlap(v, c, "GraphRAG 커뮤니티", "graphrag")
    assert both == pytest.approx(1.0) and 0 < rare_only < 1
    plain = term_overlap("LightRAG 요약", "graphrag 요약")
    weighted = idf_overlap(v, c, "LightRAG 요약", "graphrag 요약")
    assert weighted != pytest.approx(plain)                        # not the unweighted share
    f = s.search("Kubernetes 오토스케일링").gate.features
    assert f["unknown_words"] == 1.0 and 0.0 <= f["idf_overlap"] < 0.5
    # meta_overlap reads only the first result's title, aliases, tags and summary, not its body
    assert s.search("김치찌개 레시피").gate.features["meta_overlap"] == pytest.approx(1.0)
    f = s.search("GraphRAG 커뮤니티 요약").gate.features             # "커뮤니티 요약" is in the body only
    assert s.search("GraphRAG 커뮤니티 요약").hits[0].note_id == "ai/graphrag"
    assert 0.0 < f["meta_overlap"] < f["idf_overlap"]


def test_feature_helpers():
    assert term_overlap("GraphRAG 팀", "graphrag 팀 소개") == 1.0
    assert term_overlap("LightRAG", "GraphRAG") == pytest.approx(1 / 6)   # only "rag" of 6 trigrams
    assert term_overlap("", "x") == 0.0


def test_bm25_is_normalised_by_query_idf(small_index):
    s = Searcher(small_index)
    r = s.retrieve("RRF 점수")
    f = gate_features(r.query, r.lists, [], s.view, conn=s.conn)
    assert f["sparse_found"] == 1.0
    assert 0 < f["bm25_top_norm"] < r.lists["sparse"][0].score    # divided by a total IDF > 1


def _rows(s, queries, label):
    return [(s.search(q).gate.features, label) for q in queries]


def _fit(s, **kw):
    pairs = _rows(s, QUERIES_IN, 1) + _rows(s, QUERIES_OUT, 0)
    return fit_gate([p[0] for p in pairs], [p[1] for p in pairs], fingerprint=s.fingerprint["embedder"],
                    features=["top_cos", "term_overlap", "bm25_top_norm", "title_match"], **kw)


def test_fit_save_load_and_gate_a_search(small_index, tmp_path):
    s = Searcher(small_index)
    m = _fit(s)
    path = m.save(tmp_path / "gate.json")
    raw = json.loads(path.read_text())
    assert raw["format"] == "autoresearch-gate/1" and raw["features"] == list(m.features)
    m2 = load_gate(path)
    assert m2 == m
    s = Searcher(small_index, gate=GateRequest(path=path))
    a = s.search("김치찌개 레시피").gate
    b = s.search("양자 컴퓨터 큐비트 오류 정정").gate
    assert a.kind == "model" and a.probability > b.probability
    assert a.inject and a.band in ("inject", "caveat") and b.band == "skip" and not b.inject
    out = CliRunner().invoke(main, ["search", "김치찌개", "--db", str(small_index), "--json", "--gate", str(path)])
    data = json.loads(out.output)
    assert data["gate"]["probability"] is not None and set(data["gate"]["features"]) == features_read(m.features)
    out = CliRunner().invoke(main, ["search", "김치찌개", "--db", str(small_index), "--explain", "--gate", str(path)])
    assert "P(answerable)" in out.output and "term_overlap" in out.output


def test_sidecar_wins_over_default(small_index):
    s = Searcher(small_index)
    _fit(s, scope="index", fitted_on={"by": "test"}).save(sidecar_path(small_index))
    # an index-scoped model carries the index fingerprint
    m = _fit(s)
    m = type(m)(**{**m.__dict__, "fingerprint": s.fingerprint, "scope": "index"})
    m.save(sidecar_path(small_index))
    choice = s.gate_for("none")                      # the file appeared since the searcher chose: chosen again
    assert choice.model is not None and choice.source.endswith(".gate.json")


def test_wrong_fingerprint_and_broken_files_fall_back(small_index, tmp_path):
    s = Searcher(small_index)
    m = _fit(s)
    foreign = type(m)(**{**m.__dict__, "fingerprint": {"name": "minilm-l6", "dim": 384}})
    foreign.save(tmp_path / "foreign.json")
    c = choose_gate(s.fingerprint, path=tmp_path / "foreign.json")
    assert c.model is None and "minilm-l6" in c.reason and "cosine gate" in c.reason
    (tmp_path / "broken.json").write_text("{not json")
    c = choose_gate(s.fingerprint, path=tmp_path / "broken.json")
    assert c.model is None and "not readable JSON" in c.reason
    (tmp_path / "short.json").write_text(json.dumps({**m.as_json(), "coef": [1.0]}))
    assert "one positive-scale entry" in choose_gate(s.fingerprint, path=tmp_path / "short.json").reason
    # the search path never fails over its gate: the CLI says why and gates by cosine
    out = CliRunner().invoke(main, ["search", "김치찌개", "--db", str(small_index), "--json",
                                    "--gate", str(tmp_path / "broken.json")])
    assert out.exit_code == 0, out.output
    g = json.loads(out.output)["gate"]
    assert g["kind"] == "cosine" and g["probability"] is None and "not readable JSON" in g["reason"]
    # another reranker than the one fitted with: cosine, with the reason
    m.save(tmp_path / "ok.json")
    s = Searcher(small_index, gate=GateRequest(path=tmp_path / "ok.json"))
    choice = s.gate_for("none")
    feats = s.search("김치찌개").gate.features
    d = choice.decide(feats, 0.9, 0.82, True, reranker="bge-reranker")
    assert d.kind == "cosine" and "reranker 'none'" in d.reason and d.inject and d.source == "cosine"
    assert choice.decide(feats, 0.9, 0.82, True).kind == "model"
    # a search with that reranker chooses again, by the same function, and says why the model does not fit
    assert s.gate_for("bge-reranker").kind == "cosine" and "reranker 'none'" in s.gate_for("bge-reranker").reason


def test_best_balanced_threshold():
    t, b = best_balanced_threshold([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    assert t == pytest.approx(0.5) and b == 1.0
    # 3 answerable, 1 probe: accuracy would inject everything; balanced accuracy must not
    t, b = best_balanced_threshold([0.3, 0.6, 0.7, 0.8], [0, 1, 1, 1])
    assert 0.3 < t < 0.6 and b == 1.0
    # 6 answerable (two score low), 1 probe: accuracy injects all (6/7); balanced accuracy cuts above the probe
    t, b = best_balanced_threshold([0.1, 0.2, 0.5, 0.6, 0.7, 0.8, 0.9], [1, 1, 0, 1, 1, 1, 1])
    assert t == pytest.approx(0.55) and b == pytest.approx((4 / 6 + 1) / 2)
    with pytest.raises(GateFitError, match="both"):
        best_balanced_threshold([0.1, 0.2], [1, 1])


def test_shipped_default_loads():
    if not DEFAULT_GATE_FILE.exists():
        pytest.skip("no default gate shipped yet")
    m = load_gate(DEFAULT_GATE_FILE)
    assert m.scope == "embedder" and m.fingerprint["name"] == "e5-small"


def test_eval_rows_carry_features_and_refit_the_gate(small_index):
    from tuner.evaluation.evaluate import evaluate
    from tuner.data.gold import GoldSet, Question
    from tuner.sweep.workbench import fit_gate_model
    s = Searcher(small_index)
    qs = tuple(Question(f"a{i}", "L1", q, ("life/kimchi",)) for i, q in enumerate(QUERIES_IN)) + \
        tuple(Question(f"p{i}", "probe", q, ()) for i, q in enumerate(QUERIES_OUT))
    res = evaluate(s, GoldSet("g", "g.yaml", qs), SearchConfig(), audit=False)
    assert all(set(GATE_FEATURES) <= set(q.gate_features) for q in res.per_query)     # what the refit reads
    m = fit_gate_model(res.per_query, s.fingerprint, gold_name="g")
    assert m is not None and m.scope == "index" and m.mismatch(s.fingerprint) is None
    from tuner.gate.calibrate import fitted_sources
    assert fitted_sources(m) == {"g"}          # calibrate --labels on the tuning set flags it in-sample
    assert fit_gate_model([q for q in res.per_query if q.level != "probe"], s.fingerprint) is None


def test_a_broken_index_table_never_fails_the_features():
    import sqlean

    from search_core.gate.features import _term_df
    from search_core.search.view import ViewCaches

    class View:
        chunk_note = {1: "a"}
        caches = ViewCaches()

    conn = sqlean.connect(":memory:")          # no chunks_fts: the vocabulary lookup fails inside
    assert _term_df(View(), conn, ["abc", "xyz"]) == {"abc": 0, "xyz": 0}


# ---- third round: unknown_latin, heading_overlap, bm25_wig (hand-computed) --------------------------------

def test_unknown_latin_reads_latin_names_in_a_korean_query(small_index):
    from search_core.gate.features import unknown_latin
    s = Searcher(small_index)
    v, c = s.view, s.conn
    assert unknown_latin(v, c, "Kubernetes 김치찌개 팀") == 1.0        # its one Latin word: "kub" is in no chunk
    assert unknown_latin(v, c, "Kubernetes RRF 김치찌개") == 0.5       # rrf is in the vault, kubernetes is not
    assert unknown_latin(v, c, "GraphRAG를 설명") == 0.0               # the particle does not stick: "graphrag"
    assert unknown_latin(v, c, "팀 zq") == 1.0 and unknown_latin(v, c, "팀 AI") == 0.0   # short words: postings
    assert unknown_latin(v, c, "Kubernetes autoscaling") == 0.0        # no Hangul: English words are not names
    assert unknown_latin(v, c, "김치찌개 만들기") == 0.0                 # no Latin word (unknown_words: 0.5)
    assert s.search("Kubernetes 오토스케일링").gate.features["unknown_latin"] == 1.0


def test_heading_overlap_reads_the_chunk_heading_path_only(small_index):
    from types import SimpleNamespace
    from search_core.gate.features import idf_overlap
    s = Searcher(small_index)
    (cid, ctx), = s.conn.execute("SELECT id, context FROM chunks WHERE text LIKE '%Leiden%'").fetchall()
    assert "커뮤니티" in ctx and "leiden" not in ctx.lower()
    hit = SimpleNamespace(note_id="ai/graphrag", chunk_id=cid, score=1.0, cosine=0.9)
    r = s.retrieve("커뮤니티")
    f = gate_features("커뮤니티", r.lists, [hit], s.view, conn=s.conn)
    assert f["heading_overlap"] == 1.0                                  # every term in "GraphRAG > 커뮤니티"
    f = gate_features("Leiden", r.lists, [hit], s.view, conn=s.conn)
    assert f["heading_overlap"] == 0.0 and f["term_overlap"] == 1.0    # in the chunk's text, not its headings
    f = gate_features("커뮤니티 Leiden", r.lists, [hit], s.view, conn=s.conn)
    assert f["heading_overlap"] == pytest.approx(idf_overlap(s.view, s.conn, "커뮤니티 Leiden", ctx))
    assert 0.0 < f["heading_overlap"] < 1.0


def test_idf_weighting_by_hand(monkeypatch):
    """N = 10 chunks; "abc" in 1 (idf ln(1 + 9.5/1.5) = 1.99243), "xyz" in 9 (idf ln(1 + 1.5/9.5) = 0.14660):
    a text holding only "abc" covers 1.99243 / 2.13903 = 0.93147 of the query."""
    from types import SimpleNamespace
    import search_core.gate.features as gf
    monkeypatch.setattr(gf, "_term_df", lambda view, conn, grams: {g: {"abc": 1, "xyz": 9}[g] for g in grams})
    view = SimpleNamespace(chunk_note=list(range(10)))
    assert gf.idf_overlap(view, None, "abc xyz", "-- abc --") == pytest.approx(0.93147, abs=1e-5)
    assert gf.query_idf(view, None, "abc xyz") == pytest.approx(2.13903, abs=1e-5)


def test_bm25_wig_pads_a_short_list_with_zeros(small_index, monkeypatch):
    """Sparse scores 6, 3, 1 (three notes matched), query IDF 2: WIG = (6 - (6 + 3 + 1) / 10) / 2 = 2.5,
    not (6 - 10/3) / 2 = 1.33 (the mean over the three found)."""
    from search_core.search.channels import ChannelHit
    import search_core.gate.features as gf
    s = Searcher(small_index)
    monkeypatch.setattr(gf, "query_idf", lambda view, conn, q: 2.0)
    lists = {"sparse": [ChannelHit("a", None, 6.0), ChannelHit("b", None, 3.0), ChannelHit("c", None, 1.0)]}
    f = gf.gate_features("RRF", lists, [], s.view, conn=s.conn)
    assert f["bm25_wig"] == pytest.approx(2.5) and f["bm25_top_norm"] == pytest.approx(3.0)
    assert gf.gate_features("RRF", {}, [], s.view, conn=s.conn)["bm25_wig"] == 0.0   # nothing found


# ---- fourth round: unknown_names, the word-level test (hand-computed over the small vault's word table) ----

def test_unknown_names_tests_whole_words_where_the_trigram_test_is_blind(small_index):
    from search_core.gate.features import unknown_latin, unknown_names
    s = Searcher(small_index)
    v, c = s.view, s.conn
    # "unity": its trigrams uni, nit, ity all occur inside "community", so the trigram test calls it seen;
    # no chunk holds it as a word (tests/search_core/index/test_word_df.py lists the vault's words)
    assert unknown_latin(v, c, "Unity 커뮤니티") == 0.0
    assert unknown_names(v, c, "Unity 커뮤니티") == 1.0
    assert unknown_names(v, c, "Unity RRF 김치찌개") == 0.5            # rrf: 3 chunks; unity: none
    assert unknown_names(v, c, "GPT-4o로 요약") == 1.0                  # gpt and 4o, both unseen
    assert unknown_names(v, c, "GraphRAG를 설명") == 0.0               # the particle does not stick
    assert unknown_names(v, c, "팀 zq") == 1.0 and unknown_names(v, c, "팀 AI") == 0.0   # short words too
    assert unknown_names(v, c, "unity community") == 0.0              # no Hangul: 0 (BENCHMARKS, fourth round)
    assert unknown_names(v, c, "김치찌개 2024년") == 0.0                # a number is not a name
    f = s.search("Unity 커뮤니티 요약").gate.features
    assert (f["unknown_names"], f["unknown_latin"]) == (1.0, 0.0)


def test_unknown_names_falls_back_to_the_trigram_test_on_an_index_without_the_table(small_index, tmp_path):
    import json
    from click.testing import CliRunner
    from search_core.index import word_df
    from search_core.index.store import atomic, connect
    from tuner.cli import main
    conn = connect(small_index)
    with atomic(conn):
        conn.execute("DROP TABLE latin_word_df")
        conn.execute("DELETE FROM meta WHERE key = ?", (word_df.META_KEY,))
    conn.close()
    s = Searcher(small_index)
    f = s.search("Unity 커뮤니티 요약").gate.features
    assert (f["unknown_names"], f["unknown_latin"]) == (0.0, 0.0)       # the trigram test's answer
    assert s.search("Kubernetes 커뮤니티").gate.features["unknown_names"] == 1.0
    r = CliRunner().invoke(main, ["search", "Unity 커뮤니티", "--db", str(small_index), "--explain"])
    assert r.exit_code == 0 and word_df.STALE in r.output
    r = CliRunner().invoke(main, ["search", "Unity 커뮤니티", "--db", str(small_index), "--json"])
    assert json.loads(r.output)["gate"]["features"]["unknown_names"] == 0.0


# ---- fifth round: each channel's own top chunk (features that do not move with the fusion's rrf_k) ----

def test_channel_top_idf_overlap_by_hand(monkeypatch):
    """N = 10 chunks; "abc" in 1 (idf 1.99243), "xyz" in 9 (idf 0.14660); query total 2.13903. The dense
    channel's top chunk holds only "abc": 1.99243 / 2.13903 = 0.93147; the sparse channel's top only "xyz":
    0.14660 / 2.13903 = 0.06853; the fused first result holds both (idf_overlap 1). No sparse list: 0."""
    import sqlite3
    from types import SimpleNamespace
    import search_core.gate.features as gf
    from search_core.search.channels import ChannelHit
    monkeypatch.setattr(gf, "_term_df", lambda view, conn, grams: {g: {"abc": 1, "xyz": 9}[g] for g in grams})
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY, context TEXT, text TEXT)")
    conn.executemany("INSERT INTO chunks VALUES (?, ?, ?)",
                     [(1, "na", "abc only"), (2, "nb", "xyz only"), (3, "nc", "abc and xyz")])
    view = SimpleNamespace(chunk_note=list(range(10)), notes={n: {"title": n} for n in ("na", "nb", "nc")},
                           ngram_index=lambda: None)       # an index written before the n-gram lists
    hit = SimpleNamespace(note_id="nc", chunk_id=3, score=1.0, cosine=0.9)
    lists = {"dense": [ChannelHit("na", 1, 0.9), ChannelHit("nc", 3, 0.8)], "sparse": [ChannelHit("nb", 2, 5.0)]}
    f = gf.gate_features("abc xyz", lists, [hit], view, conn=conn)
    assert f["dense_idf_overlap"] == pytest.approx(0.93147, abs=1e-5)
    assert f["sparse_idf_overlap"] == pytest.approx(0.06853, abs=1e-5)
    assert f["idf_overlap"] == pytest.approx(1.0)
    f = gf.gate_features("abc xyz", {"dense": lists["dense"]}, [hit], view, conn=conn)
    assert f["sparse_idf_overlap"] == 0.0 and f["dense_idf_overlap"] == pytest.approx(0.93147, abs=1e-5)
    # the fused first result is the dense top: one chunk read serves both, the same value
    f = gf.gate_features("abc xyz", lists, [SimpleNamespace(note_id="na", chunk_id=1, score=1.0, cosine=0.9)],
                         view, conn=conn)
    assert f["idf_overlap"] == pytest.approx(f["dense_idf_overlap"])


def test_cross_script_compares_the_query_with_the_dense_top_chunk(small_index):
    from search_core.gate.features import _chunk_doc, script_mix
    s = Searcher(small_index)
    r = s.retrieve("김치찌개 끓이는 법")                  # the dense top: a Korean chunk of life/kimchi
    doc_hangul = script_mix(_chunk_doc(s.view, s.conn, r.lists["dense"][0])[0])[0]
    assert doc_hangul > 0.5
    for query, cross in (("김치찌개 끓이는 법", 0.0), ("how to cook kimchi stew", 1.0)):
        f = gate_features(query, r.lists, [], s.view, conn=s.conn)   # the same lists, so the same top chunk
        assert f["script_gap"] == pytest.approx(abs(script_mix(query)[0] - doc_hangul))
        assert f["cross_script"] == cross
        assert f["cross_script_cos_z10"] == pytest.approx(cross * f["cos_z10"])
        assert f["cross_script_dense_rank_inv"] == cross * f["dense_rank_inv"]
        assert f["cross_script_cos_margin_ratio"] == pytest.approx(cross * f["cos_margin_ratio"])
    s.close()


# ---- the query's content words and the n-gram BM25 list ----

WORD_AND_NGRAM = ("unseen_words", "unseen_any", "word_coverage", "word_coverage_idf", "rarest_in_top",
                  "ngram_rank_inv", "ngram_top1_dense", "ngram_margin_ratio", "ngram_top_norm")


def test_content_words_drop_particles_and_one_syllable_words():
    from search_core.gate.features import CONTENT_WORDS, content_words
    assert content_words("임베딩을 서버에서 GraphRAG를 돌리는 법") == ["임베딩", "서버", "graphrag", "돌리"]
    assert content_words("김치찌개 레시피 김치찌개의") == ["김치찌개", "레시피"]     # no repeats
    assert content_words("이 가 뭐") == []                                          # one syllable each
    assert content_words("회의") == ["회의"]             # "의" is a particle, but then one syllable would stay
    assert len(content_words(" ".join(f"단어{i}" for i in range(20)))) == CONTENT_WORDS


def test_unseen_words_and_word_coverage_read_whole_words(small_index):
    from search_core.gate.features import word_note_df
    s = Searcher(small_index)
    index = s.view.ngram_index()
    assert word_note_df(index, "김치찌개") == 1 and word_note_df(index, "커뮤니티") == 1
    assert word_note_df(index, "kubernetes") == 0 and word_note_df(index, "찌개김치") == 0
    f = s.search("김치찌개 레시피").gate.features
    assert s.search("김치찌개 레시피").hits[0].note_id == "life/kimchi"
    assert (f["unseen_words"], f["unseen_any"], f["word_coverage"], f["word_coverage_idf"], f["rarest_in_top"]) == \
        (0.0, 0.0, 1.0, 1.0, 1.0)
    res = s.search("Kubernetes 김치찌개를")
    f = res.gate.features
    assert res.hits[0].note_id == "life/kimchi"
    assert (f["unseen_words"], f["unseen_any"], f["word_coverage"], f["rarest_in_top"]) == (0.5, 1.0, 0.5, 0.0)
    assert 0.0 < f["word_coverage_idf"] < 0.5           # the unseen word weighs more than the one the top holds
    # a search that holds a note out reads the vault without it: its words are unseen if no other note has them
    f = s.search("김치찌개 레시피", exclude=frozenset({"life/kimchi"})).gate.features
    assert (f["unseen_words"], f["unseen_any"]) == (1.0, 1.0)
    f = s.search("GraphRAG 커뮤니티", exclude=frozenset({"life/kimchi"})).gate.features
    assert f["unseen_words"] == 0.0
    s.close()


def test_heading_word_features_read_the_title_aliases_and_heading_path_only(small_index):
    from types import SimpleNamespace
    s = Searcher(small_index)
    (cid,), = s.conn.execute("SELECT id FROM chunks WHERE text LIKE '%Leiden%'").fetchall()   # under "커뮤니티"
    hit = SimpleNamespace(note_id="ai/graphrag", chunk_id=cid, score=1.0, cosine=0.9)
    r = s.retrieve("Leiden 커뮤니티")
    f = gate_features("Leiden 커뮤니티", r.lists, [hit], s.view, conn=s.conn)
    # both words in one note each (equal IDF), both in the chunk; only 커뮤니티 in its heading path
    assert (f["word_coverage_idf"], f["rarest_in_top"]) == (1.0, 1.0)
    assert f["heading_word_coverage_idf"] == pytest.approx(0.5) and f["rarest_in_heading"] == 0.0   # leiden: first
    f = gate_features("그래프 RAG 커뮤니티", r.lists, [hit], s.view, conn=s.conn)       # an alias names "그래프", "rag"
    assert f["heading_word_coverage_idf"] == 1.0
    (kid,), = s.conn.execute("SELECT id FROM chunks WHERE text LIKE '%묵은지%'").fetchall()
    kimchi = SimpleNamespace(note_id="life/kimchi", chunk_id=kid, score=1.0, cosine=0.9)
    f = gate_features("김치찌개 묵은지", s.retrieve("김치찌개 묵은지").lists, [kimchi], s.view, conn=s.conn)
    assert f["word_coverage_idf"] == 1.0 and f["rarest_in_heading"] == 1.0     # one note each: the first, in the title
    assert 0.0 < f["heading_word_coverage_idf"] < 1.0                          # 묵은지: the text only
    s.close()


def test_note_word_features_read_the_first_results_whole_note(small_index):
    """note_word_coverage_idf and note_word_tf_idf read the first result's whole note, not its chunk: a chunk of
    GraphRAG without "Leiden" still has a note that holds it; unseen_stems counts a word whose stem is unseen too."""
    import math
    from types import SimpleNamespace
    from search_core.gate.features import BM25_B, BM25_K1, content_words, word_note_df, word_tf_in_note
    s = Searcher(small_index)
    index = s.view.ngram_index()
    graphrag, kimchi = index.note_ids.index("ai/graphrag"), index.note_ids.index("life/kimchi")
    assert word_tf_in_note(index, "leiden", graphrag) == 1 and word_tf_in_note(index, "leiden", kimchi) == 0
    assert word_tf_in_note(index, "커뮤니티", graphrag) >= 1 and word_tf_in_note(index, "쿠버네티스", graphrag) == 0
    # a Latin word is one term: its count is the count of that term over the note's chunk documents
    from search_core.index import ngram_postings
    ids = [r[0] for r in s.conn.execute("SELECT id FROM chunks WHERE note_id = 'ai/graphrag'")]
    by_hand = sum(ngram_postings.chunk_terms(doc)["graphrag"] for _, doc in ngram_postings.chunk_docs(s.conn, ids))
    assert by_hand >= 2 and word_tf_in_note(index, "graphrag", graphrag) == by_hand
    (cid,), = s.conn.execute("SELECT id FROM chunks WHERE text LIKE '%entity와%'").fetchall()    # not the Leiden one
    hit = SimpleNamespace(note_id="ai/graphrag", chunk_id=cid, score=1.0, cosine=0.9)
    query = "Leiden 커뮤니티"
    f = gate_features(query, s.retrieve(query).lists, [hit], s.view, conn=s.conn)
    assert f["word_coverage_idf"] < 1.0 and f["note_word_coverage_idf"] == 1.0
    n = len(index.note_ids)
    k = BM25_K1 * (1 - BM25_B + BM25_B * index.note_len[graphrag] / index.avg_note_len)
    df = {w: word_note_df(index, w) for w in content_words(query)}
    idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}
    tf = {w: word_tf_in_note(index, w, graphrag) for w in idf}
    assert f["note_word_tf_idf"] == pytest.approx(sum(idf[w] * tf[w] / (tf[w] + k) for w in idf) / sum(idf.values()))
    assert 0.0 < f["note_word_tf_idf"] < 1.0
    f = gate_features("Leiden 김치찌개", s.retrieve("Leiden 김치찌개").lists, [hit], s.view, conn=s.conn)
    assert f["note_word_coverage_idf"] == pytest.approx(0.5)        # one note each: equal IDF, the note holds one
    (kid,), = s.conn.execute("SELECT id FROM chunks WHERE text LIKE '%묵은지%'").fetchall()
    kimchi_hit = SimpleNamespace(note_id="life/kimchi", chunk_id=kid, score=1.0, cosine=0.9)
    f = gate_features(query, s.retrieve(query).lists, [kimchi_hit], s.view, conn=s.conn)
    assert f["note_word_coverage_idf"] == 0.0 and f["note_word_tf_idf"] == 0.0
    # "커뮤니티에서" is in no note but its stem "커뮤" is; "쿠버네티스" and its stem are in none
    s.close()
    s = Searcher(small_index, all_gate_features=True)      # candidates: computed when a gate file or a benchmark asks
    f = s.search("커뮤니티에서도 쿠버네티스").gate.features
    assert f["unseen_words"] == 1.0 and f["unseen_stems"] == 0.5
    s.close()


def test_a_word_is_in_a_note_only_when_all_its_ngrams_are_in_that_note(tmp_path, shared_cache):
    from search_core.index.indexer import index_vault
    from search_core.gate.features import word_note_df
    from tests.helpers import write_vault
    vault = write_vault(tmp_path / "v", {"a.md": "# 하나\n\n가나다 이야기.\n", "b.md": "# 둘\n\n나다라 이야기.\n",
                                         "c.md": "# 셋\n\n가나다라마 이야기.\n"})
    index_vault(vault, tmp_path / "i.sqlite", embedder=FAKE_EMBEDDER, cache=shared_cache)
    s = Searcher(tmp_path / "i.sqlite")
    index = s.view.ngram_index()
    assert word_note_df(index, "가나다") == 2 and word_note_df(index, "나다라") == 2
    assert word_note_df(index, "가나다라") == 1          # every n-gram is in a and b too, all together only in c
    assert word_note_df(index, "다라마바") == 0          # "마바" is in no note
    s.close()


def test_ngram_list_features_by_hand(small_index):
    import math
    from search_core.config import NGRAM_LIST
    from search_core.index import ngram_postings
    s = Searcher(small_index, all_gate_features=True)      # the n-gram list's features: candidates no gate reads
    query = "GraphRAG 커뮤니티 요약 쿠버네티스"             # 쿠버네티스: n-grams no note holds (at df 0)
    res = s.search(query)
    f, ng = res.gate.features, res.retrieval.lists[NGRAM_LIST]
    assert res.hits[0].note_id == ng[0].note_id == "ai/graphrag"
    assert f["ngram_rank_inv"] == 1.0
    assert f["ngram_top1_dense"] == float(res.retrieval.lists["dense"][0].note_id == "ai/graphrag")
    assert len(ng) >= 2 and f["ngram_margin_ratio"] == pytest.approx((ng[0].score - ng[1].score) / ng[0].score)
    index = s.view.ngram_index()
    n = len(index.note_ids)
    assert not index.term_lists(["쿠버"])
    total = 0.0
    for t in dict.fromkeys(ngram_postings.terms_of(query)):
        found = index.term_lists([t])
        df = len(found[0].note_no) if found else 0
        total += math.log(1 + (n - df + 0.5) / (df + 0.5))
    assert f["ngram_top_norm"] == pytest.approx(ng[0].score / total)
    s.close()


def test_word_and_ngram_features_are_zero_on_an_index_without_the_ngram_lists(small_index):
    from search_core.index import ngram_postings
    from search_core.index.store import atomic, connect
    conn = connect(small_index)
    with atomic(conn):
        conn.execute("DROP TABLE ngram_postings")
        conn.execute("DELETE FROM meta WHERE key = ?", (ngram_postings.META_KEY,))
    conn.close()
    s = Searcher(small_index, all_gate_features=True)
    f = s.search("Kubernetes 김치찌개를").gate.features
    assert all(f[k] == 0.0 for k in WORD_AND_NGRAM) and f["top_cos"] > 0
    s.close()
    from search_core.gate.features import NGRAM_STALE
    r = CliRunner().invoke(main, ["search", "Kubernetes 김치찌개를", "--db", str(small_index), "--explain"])
    assert r.exit_code == 0 and NGRAM_STALE in r.output
