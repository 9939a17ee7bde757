"""The dense list weighs more when its first note leads the second in cosine (SearchConfig.dense_lead_cos)."""

import pytest

from search_core.config import SearchConfig
from search_core.search import channels as ch
from search_core.search.pipeline import Searcher


def test_the_cosine_lead_of_a_list():
    hits = [ch.ChannelHit("a", 1, 0.84), ch.ChannelHit("b", 2, 0.82), ch.ChannelHit("c", 3, 0.80)]
    assert ch.cosine_lead(hits) == pytest.approx(0.02)
    assert ch.cosine_lead(hits[:1]) == 1.0 and ch.cosine_lead([]) == 0.0


def test_the_dense_weight_when_its_first_note_leads():
    cfg = SearchConfig()
    assert cfg.weights(dense_lead=cfg.dense_lead_cos)["dense"] == cfg.w_dense_lead > cfg.w_dense
    assert cfg.weights(dense_lead=cfg.dense_lead_cos / 2)["dense"] == cfg.w_dense
    assert cfg.replace(dense_lead_cos=None).weights(dense_lead=1.0)["dense"] == cfg.w_dense
    assert cfg.replace(w_dense=0.0).weights(dense_lead=1.0)["dense"] == 0.0        # no dense list, leading or not
    # a question across scripts keeps the larger weight
    assert cfg.weights(0.0, True, dense_lead=1.0)["dense"] == max(cfg.w_dense_cross, cfg.w_dense_lead)
    # a config recorded before the rule existed ran without it, and keeps its hash
    assert SearchConfig.from_stored({}).dense_lead_cos is None
    assert SearchConfig().replace(dense_lead_cos=None).config_hash() != SearchConfig().config_hash()


def test_a_search_fuses_the_dense_list_at_the_weight_its_lead_picks(demo_index):
    s = Searcher(demo_index)
    try:
        cfg = SearchConfig(embedder=s.embedder_name, cross_lead_margin=None)    # the cross-script weights apart
        nav = s.nav_reasons(cfg.nav_globs)
        leads = []
        for q in ("김치찌개 끓이는 법", "RRF 점수 합치기", "무릎 부상 회복", "임베딩 모델 비교", "예산 규칙",
                  "GraphRAG 커뮤니티 요약", "옵시디언 플러그인"):
            r = s.retrieve(q, cfg.depth)
            lead = ch.cosine_lead([h for h in r.lists["dense"] if h.note_id not in nav])
            leads.append(lead >= cfg.dense_lead_cos)
            for c, w in ((cfg, cfg.w_dense_lead if leads[-1] else cfg.w_dense),
                         (cfg.replace(dense_lead_cos=None), cfg.w_dense)):
                terms = [(f.terms["dense"], f.ranks["dense"]) for f in s.rank(r, c, snippets=False).fused
                         if f.ranks.get("dense")]
                assert terms and all(t == pytest.approx(w / (c.rrf_k + k)) for t, k in terms)
        assert True in leads and False in leads                 # both weights were checked
    finally:
        s.close()
