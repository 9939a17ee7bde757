"""The keyword channels on long questions: a bounded FTS5 query made of the
rarest trigrams, short-token sums as arrays with the same floats, and decomposition only for queries
with parts."""

import math

import numpy as np
import pytest

from search_core.search import channels as ch
from search_core.search.pipeline import Searcher
from tests.helpers import write_vault

# Four notes with hand-countable trigrams: "qqxyz" sits in one chunk, "common" in three.
CAP_VAULT = {
    "rare.md": "---\ntitle: Rare\n---\nqqxyz\n",
    "c1.md": "---\ntitle: One\n---\ncommon\n",
    "c2.md": "---\ntitle: Two\n---\ncommon\n",
    "c3.md": "---\ntitle: Three\n---\ncommon\n",
}


@pytest.fixture
def cap_index(tmp_path, shared_cache):
    from search_core.index.indexer import index_vault
    db = tmp_path / "cap" / "index.sqlite"
    index_vault(write_vault(tmp_path / "capvault", CAP_VAULT), db, cache=shared_cache)
    return db


def test_select_trigrams_keeps_the_rarest_in_query_order_and_drops_absent_ones():
    tri = ["aaa", "bbb", "ccc", "ddd", "eee"]
    df = {"aaa": 100, "bbb": 0, "ccc": 5, "ddd": 5, "eee": 1}
    assert ch.select_trigrams(tri, df, cap=2) == ["ccc", "eee"]      # eee (1), then ccc before ddd: a tie
    assert ch.select_trigrams(tri, df, cap=3) == ["ccc", "ddd", "eee"]
    assert ch.select_trigrams(tri, df, cap=4) == ["aaa", "ccc", "ddd", "eee"]   # bbb matches nothing
    assert ch.select_trigrams(tri, {}, cap=4) == []


def test_select_trigrams_keeps_the_rarest_within_the_postings_budget_and_at_least_one():
    tri = ["aaa", "bbb", "ccc", "ddd", "eee"]
    df = {"aaa": 100, "bbb": 0, "ccc": 5, "ddd": 5, "eee": 1}
    assert ch.select_trigrams(tri, df, cap=10, budget=111) == ["aaa", "ccc", "ddd", "eee"]   # within both
    assert ch.select_trigrams(tri, df, cap=10, budget=110) == ["ccc", "ddd", "eee"]
    assert ch.select_trigrams(tri, df, cap=10, budget=6) == ["ccc", "eee"]        # eee, then ccc before ddd
    assert ch.select_trigrams(tri, df, cap=10, budget=0) == ["eee"]               # the rarest, whatever it costs
    assert ch.select_trigrams(tri, df, cap=1, budget=1000) == ["eee"]


def test_past_a_bound_a_trigram_in_half_the_chunks_is_not_read_even_as_the_one():
    """FTS5's bm25 gives a term in half the rows or more its floor idf (1e-6): past a bound it is dropped, the
    rarest of the rest kept; within both bounds the query is as written."""
    tri = ["aaa", "bbb", "ccc"]
    df = {"aaa": 50, "bbb": 49, "ccc": 60}
    assert ch.select_trigrams(tri, df, cap=10, budget=1000, chunks=100) == ["aaa", "bbb", "ccc"]   # within both
    assert ch.select_trigrams(tri, df, cap=10, budget=100, chunks=100) == ["bbb"]    # 50 and 60 of 100: floor
    assert ch.select_trigrams(tri, df, cap=10, budget=100, chunks=101) == ["aaa", "bbb"]   # 50 of 101 is not
    assert ch.select_trigrams(["aaa", "ccc"], df, cap=10, budget=10, chunks=100) == []
    assert ch.select_trigrams(["aaa", "ccc"], df, cap=10, budget=10) == ["aaa"]      # no count: at least one


def test_a_query_of_floor_idf_trigrams_past_the_budget_reads_no_fts5_rows(cap_index, monkeypatch):
    """'common' sits in 3 of the 4 chunks: past the budget nothing is sent to FTS5 (no row of it is read)."""
    s = Searcher(cap_index)
    sent = []
    real = ch.fts_best
    monkeypatch.setattr(ch, "fts_best", lambda view, conn, tri, limit: (sent.append(ch.fts_match_expr(tri)),
                                                                        real(view, conn, tri, limit))[1])
    monkeypatch.setattr(ch, "MAX_POSTINGS", 3)      # "common": 4 trigrams x 3 chunks; "qqxyz": 3 x 1, within
    assert ch.sparse(s.conn, s.view, "common", 50) == []
    assert [h.note_id for h in ch.sparse(s.conn, s.view, "qqxyz", 50)] == ["rare"]
    s.close()
    assert sent == ['"qqx" OR "qxy" OR "xyz"']


def test_a_query_past_the_postings_budget_sends_only_its_rarest_trigrams(cap_index, monkeypatch):
    """'qqxyz common': qqx qxy xyz (df 1) and com omm mmo mon (df 3), 15 postings in all. Within 3 postings
    only the rare three are sent, so the "common" notes no longer match; within 15, all seven are."""
    s = Searcher(cap_index)
    sent = []
    real = ch.fts_best
    monkeypatch.setattr(ch, "fts_best", lambda view, conn, tri, limit: (sent.append(list(tri)),
                                                                        real(view, conn, tri, limit))[1])
    monkeypatch.setattr(ch, "MAX_POSTINGS", 3)
    capped = [h.note_id for h in ch.sparse(s.conn, s.view, "qqxyz common", 50)]
    monkeypatch.setattr(ch, "MAX_POSTINGS", 15)
    full = [h.note_id for h in ch.sparse(s.conn, s.view, "qqxyz common", 50)]
    s.close()
    assert sent == [["qqx", "qxy", "xyz"], ["qqx", "qxy", "xyz", "com", "omm", "mmo", "mon"]]
    assert capped == ["rare"]
    assert full[0] == "rare" and sorted(full[1:]) == ["c1", "c2", "c3"]


def test_term_df_counts_chunks_from_the_fts_vocabulary(cap_index):
    s = Searcher(cap_index)
    df = ch.term_df(s.view, s.conn, ["qqx", "com", "zzz"])
    s.close()
    assert df == {"qqx": 1, "com": 3, "zzz": 0}


def test_a_long_query_sends_only_its_rarest_trigrams_to_fts5(cap_index, monkeypatch):
    """'qqxyz common' has 7 trigrams: qqx qxy xyz (df 1) and com omm mmo mon (df 3). With a cap of 3 the
    FTS5 query is the three rare ones, so the "common" notes no longer match; uncapped, all four do."""
    s = Searcher(cap_index)
    sent = []
    real = ch.fts_best
    monkeypatch.setattr(ch, "fts_best", lambda view, conn, tri, limit: (sent.append(list(tri)),
                                                                        real(view, conn, tri, limit))[1])
    monkeypatch.setattr(ch, "MAX_PHRASES", 3)
    capped = [h.note_id for h in ch.sparse(s.conn, s.view, "qqxyz common", 50)]
    monkeypatch.setattr(ch, "MAX_PHRASES", 64)
    full = [h.note_id for h in ch.sparse(s.conn, s.view, "qqxyz common", 50)]
    s.close()
    assert sent == [["qqx", "qxy", "xyz"], ["qqx", "qxy", "xyz", "com", "omm", "mmo", "mon"]]
    assert capped == ["rare"]
    assert full[0] == "rare" and sorted(full[1:]) == ["c1", "c2", "c3"]


def _per_note_as_a_dict_loop(places, weights, depth, note_start, note_ids):
    """The reference best_chunk_per_note must match exactly: sums in a dict in source order, one stable sort of
    them (ties by place), then each note's first place in that order."""
    sums: dict[int, float] = {}
    for a, w in zip(places, weights):
        for k, x in zip(a.tolist(), w.tolist()):
            sums[k] = sums.get(k, 0.0) + x
    out, seen = [], set()
    for place, score in sorted(sums.items(), key=lambda kv: (-kv[1], kv[0])):
        note = int(np.searchsorted(note_start, place, side="right")) - 1
        if note not in seen:
            seen.add(note)
            out.append(ch.ChannelHit(note_ids[note], place + 1000, score))     # chunk id: place + 1000 here
        if len(out) == depth:
            break
    return out


def per_note(places, weights, depth, note_start, note_ids):
    chunk_at = np.arange(int(note_start[-1])) + 1000
    place_note = np.searchsorted(note_start, np.arange(len(chunk_at)), side="right") - 1     # view.place_note
    return ch.best_chunk_per_note(places, weights, depth, place_note, chunk_at, note_ids).hits()


def test_best_chunk_per_note_by_hand():
    # notes a (places 0-2), b (3-4), c (5); sources: FTS5 (places 1, 3, 5) and a short token (1, 4, 5)
    starts, ids = np.array([0, 3, 5, 6]), ("a", "b", "c")
    got = per_note([np.array([3, 1, 5]), np.array([1, 4, 5])], [np.array([2.0, 1.0, 0.5]), np.full(3, 0.5)], 10,
                   starts, ids)
    # place 1: 1.0 + 0.5 = 1.5 (a); 3: 2.0 (b); 4: 0.5 (b); 5: 0.5 + 0.5 = 1.0 (c)
    assert got == [ch.ChannelHit("b", 1003, 2.0), ch.ChannelHit("a", 1001, 1.5), ch.ChannelHit("c", 1005, 1.0)]
    # a note's tied chunks: the earlier place; tied notes: vault order
    got = per_note([np.array([2, 0, 4, 3])], [np.array([1.0, 1.0, 1.0, 1.0])], 2, starts, ids)
    assert got == [ch.ChannelHit("a", 1000, 1.0), ch.ChannelHit("b", 1003, 1.0)]
    assert per_note([], [], 5, starts, ids) == [] and per_note([np.array([], np.int64)], [np.zeros(0)], 5, starts, ids) == []


def test_best_chunk_per_note_is_the_dict_loop_whatever_the_depth():
    """Sums, ties and the cut at depth x 8 places (ties at the cut, too few notes in the head) against the dict
    loop, exactly."""
    rng = np.random.default_rng(7)
    starts = np.concatenate(([0], np.cumsum(rng.integers(0, 40, 300))))     # notes without chunks too
    ids = tuple(f"n{i:03d}" for i in range(300))
    size = int(starts[-1])
    for trial in range(40):
        keys = [rng.choice(size, size=n, replace=False) for n in rng.integers(1, min(size, 3000), 3)]
        weights = [-rng.random(len(keys[0])).round(1) * 5, np.full(len(keys[1]), 0.25),
                   np.full(len(keys[2]), float(rng.choice([0.25, 1.5])))]
        for depth in (1, 3, 50, 400):
            assert per_note(keys, weights, depth, starts, ids) == \
                _per_note_as_a_dict_loop(keys, weights, depth, starts, ids), (trial, depth)


def test_best_chunk_per_note_reads_the_head_alone_when_it_holds_depth_notes():
    """Scores all distinct, thousands of places, shallow depths: the head of depth x 8 places holds `depth` notes, is
    read alone, and gives the dict loop's notes, chunks and floats exactly."""
    rng = np.random.default_rng(5)
    starts = np.concatenate(([0], np.cumsum(rng.integers(0, 12, 500))))
    ids = tuple(f"n{i:03d}" for i in range(500))
    size = int(starts[-1])
    for trial in range(60):
        keys = [rng.choice(size, size=n, replace=False) for n in rng.integers(size // 4, size, 2)]
        weights = [rng.random(len(k)) for k in keys]
        for depth in (1, 5, 20):
            assert per_note(keys, weights, depth, starts, ids) == \
                _per_note_as_a_dict_loop(keys, weights, depth, starts, ids), (trial, depth)


def test_best_chunk_per_note_adds_a_places_weights_in_source_order():
    """Weights whose sums depend on the order they are added in (BM25 floats, idfs): the dict loop's floats, exactly."""
    rng = np.random.default_rng(11)
    starts = np.concatenate(([0], np.cumsum(rng.integers(1, 6, 40))))
    ids = tuple(f"n{i:02d}" for i in range(40))
    size = int(starts[-1])
    for trial in range(200):
        keys = [rng.choice(size, size=n, replace=False) for n in rng.integers(1, size, rng.integers(1, 6))]
        weights = [rng.random(len(k)) * 10 ** rng.uniform(-3, 3) for k in keys]
        assert per_note(keys, weights, 50, starts, ids) == _per_note_as_a_dict_loop(keys, weights, 50, starts, ids), trial


def _sparse_as_a_dict_loop(conn, view, query, depth):
    """The channel as it was written before the arrays: the reference the arrays must match exactly. Ties
    go to the chunk first in vault order (note id, ord), and FTS5's cut keeps every row tied with its last."""
    trigrams, short = ch.query_terms(query)
    trigrams = ch.fts_trigrams(view, conn, trigrams)
    scores = {}
    if trigrams:
        sql = (f"SELECT rowid, bm25(chunks_fts, {', '.join(map(str, ch.FIELD_WEIGHTS))}) AS s FROM chunks_fts "
               "WHERE chunks_fts MATCH ? ORDER BY s")
        rows = conn.execute(sql, (ch.fts_match_expr(trigrams),)).fetchall()
        for cid, sc in rows:
            if sc <= rows[min(depth * 4, len(rows)) - 1][1]:
                scores[cid] = -sc
    n = max(len(view.chunk_note), 1)
    for tok in short:
        ids = view.short_index().chunks_containing(tok).tolist()
        if ids:
            idf = math.log(1 + (n - len(ids) + 0.5) / (len(ids) + 0.5))
            for cid in ids:
                scores[cid] = scores.get(cid, 0.0) + idf
    place = {cid: i for i, cid in enumerate(view.chunk_at.tolist())}
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], place[kv[0]]))
    return ch._dedup_notes(ranked, depth, view)


@pytest.mark.parametrize("query", ["GraphRAG와 RRF 커뮤니티 요약", "AI 팀 회식 메뉴", "k는 보통 60", "a i 팀 요약",
                                   "김치찌개 레시피 돼지 앞다리살 묵은지 두부 고기를 먼저 볶고 김치를 넣는다"])
def test_sparse_gives_the_same_hits_and_floats_as_the_dict_loop(small_index, query):
    s = Searcher(small_index)
    for depth in (1, 2, 50):
        assert ch.sparse(s.conn, s.view, query, depth) == _sparse_as_a_dict_loop(s.conn, s.view, query, depth)
    s.close()


def test_short_tokens_are_read_once_per_view_and_answer_the_same_from_the_cache(small_index, monkeypatch):
    """A short token's places and idf are kept on the view: asked again, the list is the dict loop's still, the
    token is not read again, and a cache at its bound starts over (each token then read anew)."""
    query = "a i 팀 요약 AI"
    s = Searcher(small_index)
    reads = []
    index = s.view.short_index()
    real = index.chunks_containing
    monkeypatch.setattr(index, "chunks_containing", lambda tok: (reads.append(tok), real(tok))[1])
    want = _sparse_as_a_dict_loop(s.conn, s.view, query, 50)
    reads.clear()
    for _ in range(3):
        assert ch.sparse(s.conn, s.view, query, 50) == want
    assert sorted(reads) == sorted(ch.query_terms(query)[1])          # the first search read each token, once
    monkeypatch.setattr(s.view.caches.short_places, "budget", 1)
    s.view.caches.short_places.clear()
    reads.clear()
    for _ in range(2):
        assert ch.sparse(s.conn, s.view, query, 50) == want
    assert len(reads) == 2 * len(ch.query_terms(query)[1]) and len(s.view.caches.short_places) == 1
    s.close()


def test_a_query_without_parts_runs_sparse_once(small_index, monkeypatch):
    """Decomposition is for queries with parts: a single part would only repeat the sparse query."""
    calls = []
    real = ch.sparse
    monkeypatch.setattr(ch, "sparse", lambda conn, view, q, depth: (calls.append(q), real(conn, view, q, depth))[1])
    s = Searcher(small_index)
    r = s.retrieve("GraphRAG 커뮤니티 요약")
    assert calls == ["GraphRAG 커뮤니티 요약"] and r.lists["decomposed"] == [] and r.subqueries == ()
    calls.clear()
    r = s.retrieve("GraphRAG와 RRF 점수")
    s.close()
    assert sorted(calls) == sorted(["GraphRAG와 RRF 점수", "GraphRAG", "RRF 점수"])
    assert r.subqueries == ("GraphRAG", "RRF 점수") and r.lists["decomposed"]


# -- the n-gram BM25 (keyword_index = "ngram") --------------------------------------------------------------

# Three notes whose counts can be done by hand: "검색" is a stem "검색을" and "검색은" carry with their particles.
NGRAM_VAULT = {
    "a.md": "---\ntitle: Alpha\n---\n검색을 한다\n",
    "b.md": "---\ntitle: Beta\n---\n검색은 빠르다 검색은\n",
    "c.md": "---\ntitle: Gamma\n---\nzyx 색인\n",
}


@pytest.fixture
def ngram_index(tmp_path, shared_cache):
    from search_core.index.indexer import index_vault
    db = tmp_path / "ngram" / "index.sqlite"
    index_vault(write_vault(tmp_path / "ngramvault", NGRAM_VAULT), db, cache=shared_cache)
    return db


def test_ngram_terms_cut_where_the_script_changes_and_keep_latin_words_whole():
    from search_core.index.ngram_postings import terms_of
    assert terms_of("GraphRAG의 검색을 e5-small 팀") == [
        "graphrag", "의", "검색", "색을", "검색을", "e5", "small", "팀"]


def test_ngram_bm25_scores_notes_by_hand_and_finds_a_stem_under_its_particles(ngram_index):
    s = Searcher(ngram_index)
    try:
        hits = ch.ngram_sparse(s.conn, s.view, "검색", 10)
        # "검색" is in a (once) and b (twice); every note's length in terms: a = alpha + 검색, 색을, 검색을,
        # 한다 = 5; b = beta + 검색 색은 검색은 빠르 르다 빠르다 검색 색은 검색은 = 10; c = gamma + zyx + 색인 = 3
        n, df, k1, b = 3, 2, ch.BM25_K1, ch.BM25_B
        avg = (5 + 10 + 3) / 3
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))

        def bm25(tf, length):
            return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        assert [(h.note_id, h.score) for h in hits] == [("b", pytest.approx(bm25(2, 10), abs=1e-12)),
                                                        ("a", pytest.approx(bm25(1, 5), abs=1e-12))]
        assert [h.note_id for h in ch.ngram_sparse(s.conn, s.view, "ZYX", 10)] == ["c"]   # a Latin word, any case
        assert ch.ngram_sparse(s.conn, s.view, "없는말", 10) == []
    finally:
        s.close()


def test_an_index_without_ngram_lists_runs_the_fts5_channel(ngram_index):
    from search_core.index.store import connect
    conn = connect(ngram_index)
    conn.execute("DELETE FROM meta WHERE key = 'ngram_postings'")
    conn.commit()
    conn.close()
    s = Searcher(ngram_index)
    try:
        assert ch.ngram_sparse(s.conn, s.view, "검색을", 10) == ch.sparse(s.conn, s.view, "검색을", 10)
    finally:
        s.close()


def test_the_ngram_list_is_fused_beside_the_sparse_channel_with_its_own_weight(demo_index):
    from dataclasses import replace

    from search_core.config import SearchConfig
    s = Searcher(demo_index)
    try:
        cfg = SearchConfig(embedder=s.embedder_name)
        assert cfg.keyword_index == "fts5" and cfg.w_ngram > 0
        moved, leads = 0, []
        for q in ("김치찌개 끓이는 법", "RRF 점수 합치기", "무릎 부상 회복", "임베딩 모델 비교", "예산 규칙"):
            r = s.retrieve(q, cfg.depth)
            assert r.lists["ngram"] == ch.ngram_sparse(s.conn, s.view, r.channel_text, cfg.depth)   # beside FTS5's
            ng = r.lists["ngram"]
            lead = (ng[0].score - ng[1].score) / ng[0].score
            leads.append(lead >= cfg.ngram_lead_margin)
            w = cfg.w_ngram_lead if leads[-1] else cfg.w_ngram  # a list whose first note leads weighs more
            for c in (cfg, cfg.replace(ngram_lead_margin=None)):
                on = s.rank(r, c, snippets=False)
                for f in on.fused:
                    if f.ranks.get("ngram"):
                        assert f.terms["ngram"] == pytest.approx(w / (c.rrf_k + f.ranks["ngram"]))
                w = cfg.w_ngram                                 # no lead margin: w_ngram, whatever the lead
            off = s.rank(r, cfg.replace(w_ngram=0.0), snippets=False)
            alone = s.rank(replace(r, lists={c: v for c, v in r.lists.items() if c != "ngram"}), cfg, snippets=False)
            assert off.ranked == alone.ranked                   # w_ngram 0: the four channels alone, leading or not
            moved += s.rank(r, cfg, snippets=False).ranked != off.ranked
        assert moved                                            # the weight moves some answer
        assert True in leads and False in leads                 # both weights were checked
    finally:
        s.close()


# none, a tie within the first query's rows (tie_room(8) = 10: rows 3-8 tie, the cut is the 8th), one past them
@pytest.mark.parametrize("limit, tied", [(3, 1), (8, 6), (3, 40)])
def test_fts_best_keeps_every_row_tied_with_its_last_in_one_query_or_two(limit, tied):
    import sqlite3
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(title, aliases, tags, summary, body, tokenize='trigram')")
    rows = [("", "", "", "", "quokka quokka")] * 2 + [("", "", "", "", "quokka 풀밭")] * tied + \
           [("", "", "", "", f"quokka 먼 문장 {'가나' * i}") for i in range(1, 20)]
    conn.executemany("INSERT INTO chunks_fts VALUES (?, ?, ?, ?, ?)", rows)
    queries = []
    conn.set_trace_callback(lambda sql: queries.append(sql) if "MATCH" in sql else None)
    got = ch._fts_best(conn, ch.fts_match_expr(["quo", "okk"]), limit)
    conn.set_trace_callback(None)
    every = conn.execute("SELECT rowid, bm25(chunks_fts, 3.0, 3.0, 2.0, 2.0, 1.0) AS s FROM chunks_fts "
                         "WHERE chunks_fts MATCH ? ORDER BY s", (ch.fts_match_expr(["quo", "okk"]),)).fetchall()
    want = [r for r in every if r[1] <= every[limit - 1][1]]
    assert sorted(got) == sorted(want) and len(got) == 2 + tied
    assert len(queries) == (2 if 2 + tied >= ch.tie_room(limit) else 1) == (2 if tied == 40 else 1)


def test_top_stable_is_the_head_of_a_stable_sort():
    """The k largest with ties by index, as a stable sort of every value gives them, for values with many ties."""
    rng = np.random.default_rng(3)
    for values in (rng.integers(0, 4, 1000).astype(np.float32), rng.random(500), np.zeros(50), np.arange(3.0)):
        for k in (1, 5, 49, 50, 2000):
            assert ch.top_stable(values, k).tolist() == np.argsort(-values, kind="stable")[:k].tolist()


def test_first_best_in_segments_is_argmax_per_segment_with_ties_to_the_first():
    """The n-gram list's chunk of each note: what lo + np.argmax(values[lo:hi]) gives, segment by segment, on
    values with many ties, segments of one value and segments asked in any order."""
    rng = np.random.default_rng(1)
    for _ in range(500):
        n = int(rng.integers(1, 200))
        values = rng.integers(0, 4, n).astype(np.float64)           # four values: ties in most segments
        inner = rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, 40))), replace=False) if n > 1 else []
        starts = np.concatenate([[0], np.sort(inner), [n]]).astype(np.int64)
        asked = rng.permutation(len(starts) - 1)[: int(rng.integers(1, len(starts)))]
        got = ch._first_best_in_segments(values, starts[asked], starts[asked + 1])
        assert got.tolist() == [int(starts[i] + np.argmax(values[starts[i]:starts[i + 1]])) for i in asked]
