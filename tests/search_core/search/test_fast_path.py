"""The fast path (SearchConfig.fast_path_margin): a query the keyword lists decide is answered from them
without embedding it, and its gate decision says the keyword evidence decided; any other query runs every
channel and gets the answer it gets with the fast path off."""

import pytest

from search_core.config import SearchConfig
from search_core.search import channels as ch
from search_core.search.channels import ChannelHit, keyword_evidence
from search_core.search.pipeline import FAST_PATH_GATE, Searcher

DECIDED = "김치찌개 레시피"              # both keyword indexes put life/cooking/kimchi-jjigae first, margin 0.24
UNDECIDED = "수면 질에 영향을 준 것들"    # the keyword lists do not decide it
# queries of more trigrams than the check's FTS5 query reads (CHECK_PHRASES), whose FTS5 list over the rarest
# of them differs from the full query's: the first decided (n-gram margin 0.81, the cut FTS5 list agrees), the
# second not (margin 0.51, the cut FTS5 list puts another note first)
LONG_DECIDED = "HNSW M efConstruction efSearch"
LONG_UNDECIDED = "what sampling temperature do I use for RAG answers"


@pytest.fixture
def searcher(demo_index):
    s = Searcher(demo_index)
    yield s
    s.close()


@pytest.fixture
def embedded(searcher, monkeypatch):
    """The texts the query cache embeds (a spy on the real embedding: it still runs)."""
    seen = []
    real = searcher.query_cache.embed

    def spy(embedder, texts, *a, **k):
        seen.extend(texts)
        return real(embedder, texts, *a, **k)

    monkeypatch.setattr(searcher.query_cache, "embed", spy)
    searcher.query_cache.clear()
    return seen


def cfg(searcher, margin):
    return SearchConfig(embedder=searcher.embedder_name, fast_path_margin=margin)


def test_the_margin_is_the_lead_of_the_first_score_and_held_out_notes_are_left_out_first():
    ng = [ChannelHit("a", 1, 10.0), ChannelHit("b", 2, 8.0), ChannelHit("c", 3, 2.0)]
    fs = [ChannelHit("a", 1, 5.0), ChannelHit("c", 3, 1.0)]
    e = keyword_evidence(ng, fs, 0.2)
    assert (e.first, e.margin, e.agree, e.decided) == ("a", pytest.approx(0.2), True, True)
    assert not keyword_evidence(ng, fs, 0.25).decided
    assert not keyword_evidence(ng, None, 0.2).decided          # the margin alone never decides
    held = keyword_evidence(ng, fs, 0.2, skip={"a"})           # b leads c by 0.75, but FTS5 puts c first
    assert (held.first, held.margin, held.agree, held.decided) == ("b", pytest.approx(0.75), False, False)
    assert keyword_evidence([], fs, 0.0).first is None and not keyword_evidence([], fs, 0.0).decided
    assert keyword_evidence(ng[:1], fs, 1.0).decided            # one note found: nothing to lead


def test_fts5_is_asked_only_when_the_ngram_margin_holds(searcher, monkeypatch):
    asked = []
    real = ch.sparse_list
    monkeypatch.setattr(ch, "sparse_list", lambda conn, view, q, depth, *cap: (asked.append(q), real(conn, view, q, depth, *cap))[1])
    r = searcher.retrieve(DECIDED, 50, fast_margin=0.9)           # its margin is 0.24: no FTS5 for the check
    assert not r.evidence.fts5_ran and "margin 0.24 < 0.9" in r.evidence.reason()
    assert asked == [DECIDED]                                    # the sparse channel's own, beside the embedding
    asked.clear()
    r = searcher.retrieve(DECIDED, 50, fast_margin=0.2)
    assert r.evidence.fts5_ran and r.fast and asked == [DECIDED]


def test_a_decided_query_is_answered_from_the_keyword_lists_without_embedding_it(searcher, embedded):
    res = searcher.search(DECIDED, cfg(searcher, 0.2))
    assert embedded == []
    assert res.retrieval.fast and res.retrieval.qvec is None and set(res.retrieval.lists) == {"sparse"}
    nav = searcher.nav_notes()
    both = [h.note_id for h in ch.keyword(searcher.conn, searcher.view, DECIDED, 50, "both") if h.note_id not in nav]
    assert list(res.ranked) == both[:len(res.ranked)] and res.ranked[0] == "life/cooking/kimchi-jjigae"
    d = res.gate.decision
    assert (d.kind, d.inject, d.probability, d.threshold) == (FAST_PATH_GATE, True, None, 0.2)
    assert "not embedded" in d.reason and "kimchi-jjigae" in d.reason
    assert "embed" not in res.timings_ms and "fast_check" in res.timings_ms and res.gate.features == {}


def test_an_undecided_query_runs_every_channel_and_answers_as_with_the_fast_path_off(searcher, embedded):
    fast = searcher.search(UNDECIDED, cfg(searcher, 0.2))
    assert embedded == [UNDECIDED] and not fast.retrieval.fast
    assert not fast.retrieval.evidence.decided
    searcher.query_cache.clear()
    off = searcher.search(UNDECIDED, cfg(searcher, None))
    assert fast.ranked == off.ranked and fast.hits == off.hits
    assert fast.retrieval.lists == off.retrieval.lists
    assert fast.gate.decision == off.gate.decision and fast.gate.features == off.gate.features


def test_the_check_reads_the_rarest_trigrams_and_a_decided_answer_is_made_of_that_list(searcher, embedded):
    assert ch.cut_by(searcher.view, searcher.conn, LONG_DECIDED, ch.CHECK_PHRASES)
    cut = ch.sparse_list(searcher.conn, searcher.view, LONG_DECIDED, 50, ch.CHECK_PHRASES)
    assert [h.note_id for h in cut.hits()] != [h.note_id for h in ch.sparse(searcher.conn, searcher.view, LONG_DECIDED, 50)]
    res = searcher.search(LONG_DECIDED, cfg(searcher, 0.2))
    assert embedded == [] and res.retrieval.fast
    ngram = ch.ngram_list(searcher.conn, searcher.view, LONG_DECIDED, 50)
    nav = searcher.nav_notes()
    both = [h.note_id for h in ch.both_keyword(ngram, cut, 50) if h.note_id not in nav]
    assert list(res.ranked) == both[:len(res.ranked)]


def test_an_undecided_query_whose_check_read_fewer_trigrams_gets_the_full_sparse_list(searcher, embedded):
    assert ch.cut_by(searcher.view, searcher.conn, LONG_UNDECIDED, ch.CHECK_PHRASES)
    fast = searcher.search(LONG_UNDECIDED, cfg(searcher, 0.2))
    assert fast.retrieval.evidence.fts5_ran and not fast.retrieval.evidence.decided
    searcher.query_cache.clear()
    off = searcher.search(LONG_UNDECIDED, cfg(searcher, None))
    assert fast.retrieval.lists == off.retrieval.lists and fast.ranked == off.ranked



def test_a_postings_budget_that_binds_before_the_caps_cuts_the_check_and_the_channel_alike(searcher, embedded,
                                                                                         monkeypatch):
    """LONG_UNDECIDED has 25 trigrams, more than the check reads (12); under a budget of 50 postings both the
    check's and the channel's own query keep the same 7 rarest (4 + 4 + 5 + 5 + 5 + 11 + 12 = 46 postings on
    the demo): no cut, so the check's FTS5 list is the sparse channel's and FTS5 runs once."""
    view, conn = searcher.view, searcher.conn
    trigrams = ch.query_terms(LONG_UNDECIDED)[0]
    assert len(trigrams) > ch.CHECK_PHRASES and ch.cut_by(view, conn, LONG_UNDECIDED, ch.CHECK_PHRASES)
    monkeypatch.setattr(ch, "MAX_POSTINGS", 50)
    check = ch.fts_trigrams(view, conn, trigrams, ch.CHECK_PHRASES)
    assert check == ch.fts_trigrams(view, conn, trigrams) and len(check) == 7
    assert not ch.cut_by(view, conn, LONG_UNDECIDED, ch.CHECK_PHRASES)
    monkeypatch.setattr(ch, "MAX_POSTINGS", 160)    # the 12 rarest sum 129, the 13th (23) fits: the cap cuts
    assert ch.cut_by(view, conn, LONG_UNDECIDED, ch.CHECK_PHRASES)
    monkeypatch.setattr(ch, "MAX_POSTINGS", 50)
    asked = []
    real = ch.sparse_list
    monkeypatch.setattr(ch, "sparse_list", lambda conn, view, q, depth, *cap: (asked.append(q), real(conn, view, q, depth, *cap))[1])
    fast = searcher.search(LONG_UNDECIDED, cfg(searcher, 0.2))
    assert fast.retrieval.evidence.fts5_ran and not fast.retrieval.evidence.decided
    assert asked.count(LONG_UNDECIDED) == 1
    searcher.query_cache.clear()
    off = searcher.search(LONG_UNDECIDED, cfg(searcher, None))
    assert fast.retrieval.lists == off.retrieval.lists and fast.ranked == off.ranked

def test_the_work_counted_for_the_check_is_its_cut_fts5_query(searcher):
    """The cost model charges what ran: a decided query's one FTS5 query over the rarest trigrams; an undecided
    one's check, then the sparse channel's full query."""
    from search_core.search.work import search_work

    def postings(query, phrases):
        trigrams = ch.query_terms(query)[0]
        df = ch.term_df(searcher.view, searcher.conn, trigrams)
        return sum(df.get(t, 0) for t in ch.select_trigrams(trigrams, df, phrases))

    c = cfg(searcher, 0.2)
    for query, fast in ((LONG_DECIDED, True), (LONG_UNDECIDED, False)):
        assert postings(query, ch.CHECK_PHRASES) < postings(query, ch.MAX_PHRASES)
        r = searcher.retrieve_for(query, c)
        w = search_work(searcher, r, c, searcher.rank(r, c, snippets=False).fused)
        assert r.fast == fast and w.ahead_fts
        want = (postings(query, ch.CHECK_PHRASES),) + (() if fast else (postings(query, ch.MAX_PHRASES),))
        assert w.fts_postings[:len(want)] == want
        assert len(w.fts_postings) == len(want) + len(r.subqueries)


def test_a_margin_above_the_lead_sends_a_decided_query_down_the_full_path(searcher, embedded):
    res = searcher.search(DECIDED, cfg(searcher, 0.9))
    assert embedded == [DECIDED] and not res.retrieval.fast and res.gate.kind != FAST_PATH_GATE


def test_the_check_leaves_out_the_notes_the_search_holds_out(searcher, embedded):
    """A question asked with its own source held out: the fast path must not decide on that note."""
    res = searcher.search(DECIDED, cfg(searcher, 0.0), exclude={"life/cooking/kimchi-jjigae"})
    assert res.retrieval.evidence.first != "life/cooking/kimchi-jjigae"
    assert "life/cooking/kimchi-jjigae" not in res.ranked


def test_evaluation_runs_the_fast_path_as_search_does(searcher):
    from tuner.data.gold import GoldSet, Question
    from tuner.evaluation.evaluate import RetrievalCache, run_queries
    gold = GoldSet("t", "test", (Question("q1", "L0", DECIDED, ("life/cooking/kimchi-jjigae",)),
                         Question("q2", "L0", UNDECIDED, ("life/health/sleep",))))
    c = cfg(searcher, 0.2)
    for cache in (None, RetrievalCache()):
        rows = run_queries(searcher, gold, c, cache)
        assert [r.gate.kind == FAST_PATH_GATE for r in rows] == [True, False]
        assert rows[0].search_work.embed_lengths == () and rows[0].search_work.dense_rows == 0
        assert rows[1].search_work.embed_lengths != ()
        for r, q in zip(rows, gold.questions):
            assert list(r.ranked[:5]) == list(searcher.search(q.query, c).ranked[:5])


def test_the_fast_path_is_off_by_default_and_its_margin_is_part_of_a_configs_hash():
    """(A config without it keeps the hash it had before the field: tests/tuner/sweep/test_gate_tuning.py.)"""
    cfg = SearchConfig()
    assert cfg.fast_path_margin is None
    assert len({cfg.config_hash(), cfg.replace(fast_path_margin=0.2).config_hash(),
                cfg.replace(fast_path_margin=0.3).config_hash()}) == 3


def test_the_both_list_is_the_record_fusion_of_the_two_lists(searcher):
    """both_keyword fuses note numbers (fusion.rrf_order); weighted_rrf over the note ids, the chunk the n-gram
    list's else FTS5's, is the same list with the same floats: the view's note numbers are in id order."""
    from search_core.search.fusion import weighted_rrf
    from tests.helpers import ROOT
    from tuner.data.gold import load_gold
    conn, view = searcher.conn, searcher.view
    queries = [q.query for name in ("demo-tune", "demo-holdout", "demo-probes")
               for q in load_gold(ROOT / f"experiments/gold/{name}.yaml").questions]
    assert len(queries) > 100
    for query in [*queries, DECIDED, LONG_DECIDED, LONG_UNDECIDED]:
        for phrases in (ch.CHECK_PHRASES, None):
            ngram = ch.ngram_list(conn, view, query, 50)
            fts5 = ch.sparse_list(conn, view, query, 50, phrases)
            ng, fs = ngram.hits(), fts5.hits()
            fused = weighted_rrf({"ngram": [h.note_id for h in ng], "fts5": [h.note_id for h in fs]},
                                 ch.BOTH_WEIGHTS, ch.BOTH_RRF_K, limit=50)
            chunk = {h.note_id: h.chunk_id for h in fs + ng}      # the n-gram list's chunk wins
            assert ch.both_keyword(ngram, fts5, 50) == [ChannelHit(f.id, chunk[f.id], f.score) for f in fused], query
