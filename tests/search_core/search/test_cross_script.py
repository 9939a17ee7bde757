"""A question asked across scripts (a Korean question about notes written in English): the dense list weighs
w_dense_cross when the keyword lists leave it undecided (SearchConfig.cross_lead_margin)."""

import pytest

from search_core.config import SearchConfig
from search_core.search import scripts
from search_core.search.pipeline import Searcher
from tests.helpers import write_vault

ENGLISH_NOTES = {
    "scram.md": "# SCRAM\n\nSalted Challenge Response Authentication Mechanism: the client proves it knows the "
                "password without sending it; Kafka brokers accept SCRAM-SHA-256 and SCRAM-SHA-512 logins.\n",
    "tls.md": "# TLS handshake\n\nThe client and server agree on a cipher suite and exchange certificates before "
              "any application data is sent.\n",
    "oauth.md": "# OAuth 2.0\n\nAn authorization framework: a client gets an access token from an authorization "
                "server and presents it to the resource server.\n",
    "kerberos.md": "# Kerberos\n\nTickets issued by a key distribution center let a user authenticate to "
                   "services on a network without sending the password again.\n",
}
QUESTION = "카프카 브로커에 아이디 비번으로 붙을 때 소금 친 챌린지 응답 방식 인증"


def test_the_hangul_share_of_a_text_and_whether_a_question_crosses_scripts():
    assert scripts.hangul_share(*scripts.script_counts("카프카 인증")) == 1.0
    assert scripts.hangul_share(*scripts.script_counts("Kafka SCRAM")) == 0.0
    assert scripts.hangul_share(*scripts.script_counts("123 !!")) == 0.5        # neither script
    assert scripts.cross_script(QUESTION, [0.0, 0.1, 0.2])
    assert not scripts.cross_script(QUESTION, [0.0, 0.1, 0.6])     # one note of the first three in Korean
    assert not scripts.cross_script("SCRAM login for Kafka", [0.0, 0.1, 0.2])
    assert not scripts.cross_script(QUESTION, [])                  # no dense list (the fast path's answer)


def test_the_weights_of_a_question_across_scripts():
    cfg = SearchConfig()
    assert cfg.weights(0.05, True)["dense"] == cfg.w_dense_cross != cfg.w_dense
    assert cfg.weights(cfg.cross_lead_margin, True)["dense"] == cfg.w_dense    # the keywords lead: unchanged
    assert cfg.weights(0.05, False)["dense"] == cfg.w_dense
    assert cfg.replace(cross_lead_margin=None).weights(0.0, True)["dense"] == cfg.w_dense
    # the dense channel turned off stays off across scripts, as for the dense lead
    off = cfg.replace(w_dense=0.0, dense_lead_cos=None)
    assert off.weights(0.05, True)["dense"] == off.weights(0.9, False, True)["dense"] == 0.0
    assert not off.crosses(0.05, True) and not off.weighs_across()
    # a config recorded before the rule existed ran without it, and keeps its hash
    assert SearchConfig.from_stored({}).cross_lead_margin is None
    assert SearchConfig().replace(cross_lead_margin=None).config_hash() != SearchConfig().config_hash()


def e5_index(tmp_path, shared_cache, name: str, notes: dict):
    from search_core.index.indexer import index_vault
    db = tmp_path / name / "index.sqlite"
    index_vault(write_vault(tmp_path / f"{name}vault", notes), db, embedder="e5-small", cache=shared_cache)
    return db


@pytest.fixture
def english_index(tmp_path, shared_cache):
    return e5_index(tmp_path, shared_cache, "en", ENGLISH_NOTES)


def test_a_korean_question_about_english_notes_weighs_the_dense_list_more(english_index):
    s = Searcher(english_index)
    try:
        cfg = SearchConfig(embedder=s.embedder_name, dense_lead_cos=None)      # the dense lead's weight apart
        assert all(s.view.hangul_share(n) < 0.1 for n in ("scram", "tls", "oauth", "kerberos"))
        for query, crosses in ((QUESTION, True), ("SCRAM login for Kafka brokers", False)):
            r = s.retrieve(query, cfg.depth)
            on, off = s.rank(r, cfg, snippets=False), s.rank(r, cfg.replace(cross_lead_margin=None), snippets=False)
            w = cfg.w_dense_cross if crosses else cfg.w_dense
            checked = 0
            for res, weight in ((on, w), (off, cfg.w_dense)):
                for f in res.fused:
                    if f.ranks.get("dense"):
                        assert f.terms["dense"] == pytest.approx(weight / (cfg.rrf_k + f.ranks["dense"]))
                        checked += 1
            assert checked
        # with the dense channel off, a question across scripts fuses no dense list either: the answer is the
        # keyword lists' alone, as with the rule off (here none: no keyword of the question is in these notes)
        r = s.retrieve(QUESTION, cfg.depth)
        off = cfg.replace(w_dense=0.0)
        assert s.rank(r, cfg, snippets=False).fused[0].terms.get("dense")          # on: the dense list counts
        res = s.rank(r, off, snippets=False)
        assert not any(f.terms.get("dense") for f in res.fused), [f.terms for f in res.fused]
        assert res.ranked == s.rank(r, off.replace(cross_lead_margin=None), snippets=False).ranked
    finally:
        s.close()


def test_an_english_question_whose_meaning_alone_points_at_a_korean_note():
    english = "splitting the shared database when migrating a monolith"
    assert scripts.alone_across(english, 0.9, in_keywords=False)
    assert not scripts.alone_across(english, 0.9, in_keywords=True)        # a keyword list found it too
    assert not scripts.alone_across(english, 0.3, in_keywords=False)       # the note is not on the Hangul side
    assert not scripts.alone_across(QUESTION, 0.0, in_keywords=False)      # a Korean question about an English note
    cfg = SearchConfig()
    assert cfg.weights(0.9, False, True)["dense"] == cfg.w_dense_cross     # whatever the n-gram lead
    assert cfg.weights(0.9, False, False)["dense"] == cfg.w_dense
    assert cfg.replace(cross_lead_margin=None).weights(0.0, False, True)["dense"] == cfg.w_dense


KOREAN_NOTES = {
    "monolith.md": "# 마이크로서비스 도입\n\n모놀리스를 마이크로서비스로 옮길 때 가장 어려운 일은 함께 쓰던 데이터베이스를 "
                   "서비스마다 나누는 것이다. 테이블 소유권을 정하고, 조인은 호출로 바꾸며, 동기화는 이벤트로 한다.\n",
    "database.md": "# database\n\nSELECT a.id FROM shared a JOIN split b ON a.id = b.id; the shared database table.\n",
    "shell.md": "# 셸 명령\n\n`split -b 100m shared.tar` 로 큰 파일을 나누고 옮긴다.\n",
    "kimchi.md": "# 김치찌개\n\n묵은지와 돼지고기를 볶다가 물을 붓고 끓인다. 두부는 마지막에 넣는다.\n",
}


@pytest.fixture
def korean_index(tmp_path, shared_cache):
    return e5_index(tmp_path, shared_cache, "ko", KOREAN_NOTES)


def test_an_english_question_the_keywords_send_elsewhere_weighs_the_dense_list_more(korean_index):
    """The lists of a real retrieval, laid out as on aegis1920: the dense list puts the Korean note first, the
    keyword lists hold it nowhere (or, the second time, last). A four-note vault cannot make e5-small and the
    keyword lists disagree so, so the lists are reordered; the weights are the pipeline's own."""
    import dataclasses
    s = Searcher(korean_index)
    try:
        cfg = SearchConfig(embedder=s.embedder_name)
        r = s.retrieve("splitting the shared database when migrating a monolith to microservices", cfg.depth)
        assert s.view.hangul_share("monolith") > 0.9
        first = sorted(r.lists["dense"], key=lambda h: h.note_id != "monolith")
        for keep_in_keywords, weight in ((False, cfg.w_dense_cross), (True, cfg.w_dense)):
            lists = {c: [h for h in hits if h.note_id != "monolith"] for c, hits in r.lists.items()}
            lists["dense"] = first
            if keep_in_keywords:                        # the FTS5 list found it too, last
                lists["sparse"] = lists["sparse"] + first[:1]
            assert keep_in_keywords == any(h.note_id == "monolith" for h in lists["sparse"] + lists["ngram"])
            res = s.rank(dataclasses.replace(r, lists=lists), cfg, snippets=False)
            terms = [(f.terms["dense"], f.ranks["dense"]) for f in res.fused if f.ranks.get("dense")]
            assert terms and all(t == pytest.approx(weight / (cfg.rrf_k + k)) for t, k in terms)
    finally:
        s.close()
