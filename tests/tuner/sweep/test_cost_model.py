"""The cost model: counted work, predicted latency, decisions that never read the clock."""

import dataclasses
import json
import random
import time

import pytest

from search_core import SearchCoreError
from search_core.search.work import SearchWork
from tuner.evaluation.cost_model import UNITS, Calibration, CostStore, Machine, predict

from tests.helpers import DEMO_VAULT, ROOT
from tests.helpers.sweeps import hand_set_calibrations

UNIT_COSTS = {"embed_solo_ms": 10.0, "embed_solo_per_unit": 1.0, "embed_ms": 2.0, "embed_per_unit": 1.5,
              "dense_per_mrowdim": 2.0, "entity_ms": 1.0, "entity_per_note": 0.1, "sparse_ms": 0.5,
              "sparse_per_kposting": 2.0, "short_per_kposting": 1.0, "rank_ms": 0.3, "rank_per_item": 0.01,
              "search_ms": 4.0, "ngram_ms": 0.2, "ngram_per_term": 0.1, "ngram_per_kposting": 1.0}


def calibration(**rerank) -> Calibration:
    return Calibration("k", Machine("test", 1, "x86_64", "Linux"), "e5-small", {"name": "e5-small"}, "tokens", dict(UNIT_COSTS), rerank)


def test_every_unit_has_a_hand_set_cost_here():
    assert set(UNIT_COSTS) == set(UNITS)


def test_a_lone_query_costs_its_embedding_plus_its_searches():
    w = SearchWork(embed_lengths=(20,), solo=True, dense_rows=1000, dim=500, entity_rows=100, entity_notes=10,
                   fts_postings=(3000,), short_postings=(2000,), fused_items=200)
    p = predict(w, calibration())
    # worker: embed 10 + 20 x 1 = 30, dense 2 x 0.5 = 1, entity 1 + 10 x 0.1 + 2 x 0.05 = 2.1 -> 33.1
    # caller: FTS5 0.5 + 3 x 2 + 2 x 1 = 8.5, overlapped; rank 0.3 + 200 x 0.01 = 2.3; overhead 4
    assert p["embed"] == pytest.approx(30.0) and p["sparse"] == pytest.approx(8.5)
    assert p["retrieve"] == pytest.approx(33.1) and p["rank"] == pytest.approx(2.3)
    assert p["total"] == pytest.approx(39.4)


def test_sub_questions_go_to_whichever_thread_is_free_and_pairs_are_charged():
    w = SearchWork(embed_lengths=(30, 12, 8), solo=False, dense_rows=1000, dim=500, entity_rows=100,
                   entity_notes=10, fts_postings=(3000, 1000, 500), short_postings=(0, 0, 0), fused_items=200,
                   rerank_pairs=20)
    p = predict(w, calibration(x=0.5), "x")
    # worker: 2 + 30 x 1.5 = 47 + dense 1 + entity 2.1 = 50.1; caller: FTS5 6.5 + 2.5 + 1.5 = 10.5
    # part 12: 2 + 18 + 1 = 21 -> caller (free at 10.5) 31.5; part 8: 2 + 12 + 1 = 15 -> caller 46.5
    assert p["retrieve"] == pytest.approx(50.1) and p["parts"] == pytest.approx(36.0)
    assert p["rerank"] == pytest.approx(10.0)
    assert p["total"] == pytest.approx(50.1 + 2.3 + 10.0 + 4.0)
    with pytest.raises(SearchCoreError, match="no per-pair cost for reranker 'y'"):
        predict(w, calibration(x=0.5), "y")


def test_an_ngram_query_is_charged_its_own_terms_and_postings():
    w = SearchWork(embed_lengths=(20,), solo=True, dense_rows=1000, dim=500, fts_postings=(), short_postings=(),
                   ngram_postings=(4000,), ngram_terms=(30,), fused_items=200)
    p = predict(w, calibration())
    # n-gram: 0.2 + 30 x 0.1 + 4 x 1.0 = 7.2, beside the embedding (30 + dense 1 = 31)
    assert p["sparse"] == pytest.approx(7.2) and p["ahead"] == 0.0 and p["retrieve"] == pytest.approx(31.0)
    both = predict(SearchWork(**{**w.to_json(), "fts_postings": (3000,), "short_postings": (2000,)}), calibration())
    assert both["sparse"] == pytest.approx(7.2 + 8.5)          # keyword_index both: the FTS5 query as well


def test_the_fast_paths_check_runs_before_the_embedding_and_a_decided_query_embeds_nothing():
    undecided = SearchWork(embed_lengths=(20,), solo=True, dense_rows=1000, dim=500, fts_postings=(3000,),
                           short_postings=(2000,), ngram_postings=(4000,), ngram_terms=(30,), ahead_ngram=True,
                           fused_items=200)
    p = predict(undecided, calibration())
    # ahead: the n-gram query 7.2; then max(embedding 31, FTS5 8.5 beside it)
    assert p["ahead"] == pytest.approx(7.2) and p["retrieve"] == pytest.approx(7.2 + 31.0)
    both_ahead = predict(SearchWork(**{**undecided.to_json(), "ahead_fts": True}), calibration())
    assert both_ahead["retrieve"] == pytest.approx(7.2 + 8.5 + 31.0)
    decided = SearchWork(fts_postings=(3000,), short_postings=(2000,), ngram_postings=(4000,), ngram_terms=(30,),
                         ahead_ngram=True, ahead_fts=True, fused_items=20)
    d = predict(decided, calibration())
    assert d["embed"] == 0.0 and d["dense"] == 0.0 and d["retrieve"] == pytest.approx(15.7)


def test_a_version_1_calibration_charges_its_own_rounds_and_refuses_an_ngram_query():
    v1 = {**calibration().to_json(), "version": 1}
    v1["units"] = {k: v for k, v in v1["units"].items() if not k.startswith("ngram")}
    cal = Calibration.from_json(v1)
    w = SearchWork(embed_lengths=(20,), solo=True, dense_rows=1000, dim=500, entity_rows=100, entity_notes=10,
                   fts_postings=(3000,), short_postings=(2000,), fused_items=200)
    assert predict(w, cal)["total"] == pytest.approx(39.4)
    with pytest.raises(SearchCoreError, match="no n-gram BM25 units"):
        predict(SearchWork(**{**w.to_json(), "ngram_postings": (10,), "ngram_terms": (2,)}), cal)
    with pytest.raises(SearchCoreError, match="lacks the units ngram_ms"):
        Calibration.from_json({**v1, "version": 2})


def test_a_calibration_round_trips_and_an_older_one_is_refused(tmp_path):
    cal = calibration(x=0.5)
    store = CostStore(tmp_path / "cost-model")
    store.put(cal)
    assert store.get("k") == cal
    assert Calibration.from_json(json.loads(json.dumps(cal.to_json()))) == cal
    old = {**cal.to_json(), "version": 0}
    with pytest.raises(SearchCoreError, match="--recalibrate"):
        Calibration.from_json(old)
    (tmp_path / "cost-model" / "k.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SearchCoreError, match="k.json cannot be used"):
        store.get("k")                            # unreadable: named, and the sweep retakes it (below)
    assert store.get("absent") is None


def test_the_work_counted_is_the_work_retrieve_runs(demo_index):
    import sqlean
    from search_core.search import channels as ch
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from search_core.search.work import search_work
    s = Searcher(demo_index)
    cfg = SearchConfig(embedder=s.embedder_name, reranker="x", rerank_depth=12)
    q = "GraphRAG와 RRF 점수"
    r = s.retrieve(q, cfg.depth, pair_terms=0)        # the query as asked (the expansion: below)
    # ranked without the reranker (it has no model here), the fused list as deep as cfg's window reads it: rank
    # builds records only as deep as its own config and its caller read
    res = s.rank(r, SearchConfig(embedder=s.embedder_name), snippets=False, limit_fused=cfg.depth)
    w = search_work(s, r, cfg, res.fused)
    assert r.subqueries == ("GraphRAG", "RRF 점수")
    assert not w.solo and len(w.embed_lengths) == 3             # the query and both parts have own vectors
    assert w.embed_lengths[0] == s.embedder.text_length(q, is_query=True) > len(q.split())
    assert w.dense_rows == s.view.matrix.shape[0] and w.dim == s.embedder.dim == s.view.matrix.shape[1]
    assert w.rerank_pairs == 12 and len(w.fts_postings) == 3
    # the postings FTS5 reads for the query, counted from FTS5's own vocabulary (not the stored df table)
    conn = sqlean.connect(str(demo_index))
    conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, chunks_fts, row)")
    trigrams, short = ch.query_terms(q)
    df = dict(conn.execute(f"SELECT term, doc FROM temp.v WHERE term IN ({','.join('?' * len(trigrams))})", trigrams))
    assert w.fts_postings[0] == sum(df.values()) > 0
    # "점수" is too short for a trigram: the chunks holding it, as the LIKE scan it stands for counts them
    like = conn.execute("SELECT count(*) FROM chunks WHERE text LIKE '%점수%' OR context LIKE '%점수%'").fetchone()[0]
    assert short == ["점수"] and w.short_postings[0] == like > 0
    assert search_work(s, s.retrieve(q, cfg.depth, pair_terms=0), cfg, res.fused) == w   # the same work every time
    # with the vault's paired terms added ("RRF(알알에프)" in the demo vault), the work is the expanded text's
    wide = s.retrieve(q, cfg.depth)
    assert wide.query == q and wide.channel_text == q + " 알알에프"
    assert search_work(s, wide, cfg, res.fused).embed_lengths[0] == s.embedder.text_length(wide.channel_text,
                                                                                           is_query=True)
    lone = search_work(s, s.retrieve("커뮤니티 요약", cfg.depth), cfg, res.fused)
    assert lone.solo and len(lone.embed_lengths) == 1
    # fts5: the query's n-gram query alone (its list is fused on its own), none for the parts
    assert len(w.ngram_postings) == 1 and not (w.ahead_ngram or w.ahead_fts)


def test_the_ngram_work_counted_is_the_lists_the_channel_reads(demo_index):
    from search_core.config import SearchConfig
    from search_core.index import ngram_postings
    from search_core.search.pipeline import Searcher
    from search_core.search.work import search_work
    s = Searcher(demo_index)
    q = "GraphRAG와 RRF 점수"
    terms = list(dict.fromkeys(ngram_postings.terms_of(q)))
    postings = [len(ngram_postings.postings(s.conn, t)[0]) for t in terms]
    per_text = lambda text: sum(len(ngram_postings.postings(s.conn, t)[0])
                                for t in dict.fromkeys(ngram_postings.terms_of(text)))
    for index, fts, ngram in (("ngram", 0, 3), ("both", 3, 3), ("fts5", 3, 1)):
        cfg = SearchConfig(embedder=s.embedder_name, keyword_index=index)
        r = s.retrieve(q, cfg.depth, keyword_index=index, pair_terms=0)
        w = search_work(s, r, cfg, s.rank(r, cfg, snippets=False).fused)
        assert (len(w.fts_postings), len(w.ngram_postings)) == (fts, ngram), index
        if ngram:
            assert w.ngram_postings[0] == sum(postings) > 0 and w.ngram_terms[0] == len(terms)
            assert list(w.ngram_postings[1:]) == ([per_text(p) for p in r.subqueries] if index != "fts5" else [])
    # the fast path: a decided query ran both of its keyword queries ahead and embedded nothing
    cfg = SearchConfig(embedder=s.embedder_name, fast_path_margin=0.2)
    r = s.retrieve_for("김치찌개 레시피", cfg)
    w = search_work(s, r, cfg, s.rank(r, cfg, snippets=False).fused)
    assert r.fast and w.ahead_ngram and w.ahead_fts and w.embed_lengths == () and w.dense_rows == 0
    assert len(w.fts_postings) == len(w.ngram_postings) == 1
    s.close()


CLOCK_SPACE = """
[w_dense]
kind = "float"
low = 0.0
high = 1.0
step = 0.05

[rrf_k]
kind = "int"
low = 1
high = 120
step = 1

[depth]
kind = "int"
low = 10
high = 90
step = 20
"""


def _sweep(demo_index, root, ledger_name, rounds=6):
    from tuner.ledger.ledger import Ledger
    from tuner.sweep.loop import Sweep, SweepParams
    space = root / "space.toml"
    space.write_text(CLOCK_SPACE, encoding="utf-8")
    params = SweepParams(db=str(demo_index), gold=str(ROOT / "experiments/gold/demo-tune.yaml"), space=str(space),
                         rounds=rounds, seed=3, vault=str(DEMO_VAULT), index_dir=str(root / "indexes"))
    hand_set_calibrations(params.cost_folder())
    lg = Ledger(root / ledger_name)
    sw = Sweep(params, lg)
    sw.run()
    return sw, lg.rounds(sw.id)


def test_a_sweep_decides_alike_however_the_clock_runs(demo_index, tmp_path, monkeypatch):
    """The same sweep twice, one cost calibration: in the second every clock reading jumps by a random
    amount (a machine whose load comes and goes). Decisions and objectives must not move; the measured
    latency does."""
    first, a = _sweep(demo_index, tmp_path, "a.sqlite")
    real = time.perf_counter
    rng, jump = random.Random(7), [0.0]

    def jittery():
        jump[0] += rng.expovariate(1 / 0.02)         # 20 ms on average per reading, some far more
        return real() + jump[0]

    monkeypatch.setattr(time, "perf_counter", jittery)
    second, b = _sweep(demo_index, tmp_path, "b.sqlite")
    monkeypatch.undo()
    assert [(r.variable, r.new, r.decision, r.objective) for r in b] == \
           [(r.variable, r.new, r.decision, r.objective) for r in a]
    assert any(r.variable == "depth" and r.result for r in a)          # a round with new channel lists
    measured = lambda rows: [r.result.latency_charge.p95_measured for r in rows if r.result]
    assert measured(b) != measured(a)                                          # the stopwatch did differ
    assert any("stored calibration" in e for e in second.bench.cost_events)   # reused, not re-measured


def test_every_decision_is_recomputed_from_the_ledger_alone(demo_index, tmp_path):
    from tuner.sweep.rounds import replay_decisions
    from tuner.evaluation.score import ScoreConfig
    sw, rows = _sweep(demo_index, tmp_path, "l.sqlite")
    replay = replay_decisions(rows, sw.p.rule(), ScoreConfig())
    assert replay and all(x.agrees for x in replay), replay
    assert [x.objective for x in replay] == [r.objective for r in rows if r.round in {x.round for x in replay}]
    # the replay reads the recorded work: charge one round's questions with ten million more vector rows each
    # to scan (the dense search's cost per row is the median of measured searches: above 0 for any embedder)
    first = replay[0]
    row = next(r for r in rows if r.round == first.round)
    for q in row.result.per_query:
        q.work["dense_rows"] += 10_000_000
    again = next(x for x in replay_decisions(rows, sw.p.rule(), ScoreConfig()) if x.round == first.round)
    assert again.objective < first.objective - 10          # seconds more per search: the speed points go
    assert again.recomputed != "kept"


def test_a_resumed_sweep_keeps_its_calibration_and_refuses_a_new_one(demo_index, tmp_path):
    import dataclasses
    from tuner.ledger.ledger import Ledger
    from tuner.sweep.loop import Sweep
    sw, rows = _sweep(demo_index, tmp_path, "r.sqlite")
    key = rows[0].result.latency_charge.calibration["key"]
    (tmp_path / "cost-model" / f"{key}.json").unlink()          # the store is gone; the ledger has it
    lg = Ledger(tmp_path / "r.sqlite", create=False)
    again = Sweep(dataclasses.replace(sw.p, rounds=8), lg, sweep_id=sw.id)
    again.run()
    assert again.bench.cost_events == []                          # charged from the ledger: nothing calibrated
    assert {r.result.latency_charge.calibration["key"] for r in lg.rounds(sw.id) if r.result} == {key}
    with pytest.raises(SearchCoreError, match="keeps the cost calibration"):
        Sweep(dataclasses.replace(sw.p, recalibrate=True), lg, sweep_id=sw.id)


def test_the_retest_runs_a_round_as_the_sweep_did(demo_index, tmp_path, monkeypatch):
    """A rejected round after the sweep's last kept one has today's baseline as its baseline: re-tested,
    it must come out exactly as the sweep decided it (one round runner, one rule, one grid)."""
    from tuner.sweep import rejected_audit as audit_rejected
    from tuner.ledger.ledger import Ledger
    from tuner.sweep.loop import Sweep
    sw, rows = _sweep(demo_index, tmp_path, "t.sqlite", rounds=10)
    for more in (14, 18):        # a sweep whose last round was kept goes on until a round after it is rejected
        last_kept = max(r.round for r in rows if r.decision == "kept")
        target = next((r for r in rows if r.round > last_kept and r.result), None)
        if target is not None:
            break
        lg = Ledger(tmp_path / "t.sqlite", create=False)
        Sweep(dataclasses.replace(sw.p, rounds=more), lg, sweep_id=sw.id).run()
        rows = lg.rounds(sw.id)
    assert target is not None, "no rejected round shares the sweep's last baseline: this test would check nothing"
    real = audit_rejected.audit_data

    def marked(*a, **kw):
        d = real(*a, **kw)
        return dataclasses.replace(d, rejected=tuple(dataclasses.replace(x, worth_retest=x.round == target.round)
                                                     for x in d.rejected))

    monkeypatch.setattr(audit_rejected, "audit_data", marked)
    monkeypatch.setenv("AUTORESEARCH_RUNS", str(tmp_path / "no-runs"))
    out = audit_rejected.retest(tmp_path / "t.sqlite", sw.id, runs=tmp_path / "no-runs")
    assert out.tested == 1
    row = Ledger(tmp_path / "t.sqlite", create=False).rounds(out.sweep)[1]
    assert (row.decision, row.objective, row.config) == (target.decision, target.objective, target.config)


@pytest.mark.parametrize("damage", [
    {"units": {"dense_per_mrowdim": float("nan")}},      # json writes NaN, and reads it back
    {"units": {"embed_ms": -3.0}},
    {"units": {"rank_ms": "fast"}},
    {"rerank_per_pair": {"x": float("inf")}},
    {"drop": "search_ms"},
    {"questions": "many"},
])
def test_a_damaged_calibration_file_is_refused_by_name(tmp_path, damage):
    from tuner.evaluation.cost_model import DamagedCalibration
    store = CostStore(tmp_path / "cost-model")
    store.put(calibration(x=0.5))
    d = json.loads(store.path("k").read_text())
    for field, change in damage.items():
        if field == "drop":
            del d["units"][change]
        elif isinstance(change, dict):
            d[field].update(change)
        else:
            d[field] = change
    store.path("k").write_text(json.dumps(d))
    with pytest.raises(DamagedCalibration) as e:
        store.get("k")
    assert str(store.path("k")) in str(e.value) and "Traceback" not in str(e.value)
    with pytest.raises(SearchCoreError, match="--recalibrate"):          # a ledger row holding the same
        Calibration.from_json(json.loads(store.path("k").read_text()))
    bad = dataclasses.replace(calibration(), units={**UNIT_COSTS, "embed_ms": float("nan")})
    with pytest.raises(SearchCoreError, match="nothing was stored"):
        store.put(bad)                                                   # never written, never read back


def test_a_sweep_over_a_damaged_stored_calibration_retakes_it_with_a_warning(demo_index, tmp_path):
    # A stored file with NaN unit costs was charged from: every round's p95 NaN, and optuna died with
    # "values should not contain NaN".
    from tuner.ledger.ledger import Ledger
    from tuner.sweep.loop import Sweep, SweepParams
    space = tmp_path / "space.toml"
    space.write_text(CLOCK_SPACE, encoding="utf-8")
    params = SweepParams(db=str(demo_index), gold=str(ROOT / "experiments/gold/demo-tune.yaml"), space=str(space),
                         rounds=2, seed=3, vault=str(DEMO_VAULT), index_dir=str(tmp_path / "indexes"))
    from search_core.search.pipeline import Searcher
    from tuner.evaluation.cost_model import calibration_key, machine
    s = Searcher(demo_index)
    efp, name = s.fingerprint["embedder"], s.embedder_name
    s.close()
    store = CostStore(params.cost_folder())
    key = calibration_key(machine(), efp)
    damaged = {**Calibration(key, machine(), name, efp, "chars", dict(UNIT_COSTS), {}, {"solo": 1, "one": 1}, 0, 0,
                             "hand-set (tests)").to_json()}
    damaged["units"] = {**UNIT_COSTS, "dense_per_mrowdim": float("nan"), "rank_ms": -1.0}
    store.folder.mkdir(parents=True)
    store.path(key).write_text(json.dumps(damaged))
    lg = Ledger(tmp_path / "l.sqlite")
    sw = Sweep(params, lg)
    sw.run()
    assert any("warning" in e and "cannot be used" in e and "taking a new calibration" in e
               for e in sw.bench.cost_events), sw.bench.cost_events
    rows = [r for r in lg.rounds(sw.id) if r.result]
    assert rows and all(r.objective is not None and r.objective == r.objective for r in rows)
    used = rows[0].result.latency_charge.calibration
    assert used["key"] == key and used["taken_at"] != "hand-set (tests)"
    assert all(0 <= v < float("inf") for v in used["units"].values())
    assert store.get(used["key"]) == Calibration.from_json(used)          # the file was replaced by the new one


KEYWORD_SPACE = """
[keyword_index]
kind = "categorical"
choices = ["fts5", "ngram", "both"]
"""


def test_a_keyword_index_round_is_charged_the_ngram_work_it_ran(demo_index, tmp_path):
    """keyword_index rounds (the shipped space has them): the n-gram queries a candidate runs are in its
    questions' counted work and in their predicted latency, and the replay decides them alike."""
    from tests.helpers.sweeps import run_sweep
    from tuner.evaluation.cost_model import Calibration
    from tuner.evaluation.score import ScoreConfig
    from tuner.sweep.rounds import replay_decisions
    summary, rows = run_sweep(tmp_path, demo_index, KEYWORD_SPACE, 2)
    tried = [r for r in rows if r.variable == "keyword_index" and r.result is not None]
    assert {r.new for r in tried} == {"ngram", "both"}
    for r in tried:
        cal = Calibration.from_json(r.result.latency_charge.calibration)
        works = [SearchWork.from_json(q.work) for q in r.result.per_query]
        assert all(w.ngram_postings and w.ngram_terms for w in works)              # every question ran one
        assert all(bool(w.fts_postings) == (r.new == "both") for w in works)
        # charged beyond a constant: each posting read costs its unit (compared through a unit raised by 1 ms per
        # 1,000 postings, since a calibration on a busy machine may fit that unit at 0)
        more = dataclasses.replace(cal, units={**cal.units, "ngram_per_kposting": cal.units["ngram_per_kposting"] + 1})
        for w in works:
            assert predict(w, more)["sparse"] - predict(w, cal)["sparse"] == pytest.approx(sum(w.ngram_postings) / 1000)
    replay = replay_decisions(rows, _default_rule(), ScoreConfig())
    assert replay and all(x.agrees for x in replay), replay


def _default_rule():
    """The keep rule run_sweep's sweeps decide by (SweepParams' defaults)."""
    from tuner.sweep.loop import SweepParams
    return SweepParams(db="x", gold="x", space="x", rounds=1).rule()


def test_a_cost_calibration_asked_to_stop_ends_before_its_next_question_and_stores_nothing(demo_index, tmp_path):
    """The first night's calibration takes minutes on a busy machine; the daemon's stop must not wait for it."""
    from search_core import StopRequested
    from search_core.config import SearchConfig
    from tuner.evaluation.cost_model import calibrate
    from tuner.sweep.workbench import Workbench
    from tuner.data.gold import load_gold
    queries = [q.query for q in load_gold(ROOT / "experiments/gold/demo-tune.yaml").questions[:8]]
    bench = Workbench(str(demo_index), vault=str(DEMO_VAULT), index_dir=str(tmp_path / "indexes"),
                      cost_store=CostStore(tmp_path / "cost-model"), calibration_queries=queries)
    asked = []
    bench.stop = lambda: asked.append(1) or len(asked) > 3
    with pytest.raises(StopRequested, match="stopped before question 4 of 8"):
        bench.cost_for(SearchConfig(embedder=bench.base_embedder))
    assert not list((tmp_path / "cost-model").glob("*")), "a calibration cut short was stored"
    s, _ = bench.searcher_for(bench.base_embedder)
    asked.clear()
    with pytest.raises(StopRequested, match="stopped in pass 1 of 1"):
        calibrate(s, queries, passes=1, stop=lambda: asked.append(1) or len(asked) > len(queries) + 2)


def test_fitting_a_sweeps_gate_stops_before_its_next_question_when_asked(demo_index, tmp_path):
    """A sweep's start searches its whole tuning set once for the gate (a minute at load 20 on 295 questions):
    the daemon's stop is asked before each question."""
    from search_core import StopRequested
    from search_core.config import SearchConfig
    from tuner.sweep.workbench import Workbench
    from tuner.data.gold import load_gold
    gold = load_gold(ROOT / "experiments/gold/demo-tune.yaml")
    from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
    from tests.helpers.sweeps import HAND_SET_UNITS
    # the cost model is stored: no calibration runs first
    hand_set_calibrations(tmp_path / "cost-model", units_by_embedder={FAKE_EMBEDDER: HAND_SET_UNITS["e5-small"]})
    bench = Workbench(str(demo_index), vault=str(DEMO_VAULT), index_dir=str(tmp_path / "indexes"),
                      cost_store=CostStore(tmp_path / "cost-model"),
                      calibration_queries=[q.query for q in gold.questions])
    asked = []
    bench.stop = lambda: asked.append(1) or len(asked) > 3
    with pytest.raises(StopRequested, match=f"the evaluation stopped after 3 of {len(gold.questions)} questions"):
        bench.fit_gate_for(SearchConfig(embedder=bench.base_embedder), gold)
    assert bench.base_embedder not in {e for e, _ in bench.gate_models}, "a gate was chosen from a cut evaluation"


def test_a_search_answered_by_pgvector_is_charged_its_backends_cost_not_numpys():
    """numpy's unit is per row and dimension; a pgvector query is one round trip whatever the rows: a search whose
    dense channel went to the table is charged the backend's unit, sub-questions too, and a calibration that timed
    only numpy refuses it, naming the fix."""
    w = SearchWork(embed_lengths=(20, 10), solo=False, dense_rows=525_000, dim=384, dense_backend=True)
    cal = dataclasses.replace(calibration(), units={**UNIT_COSTS, "dense_backend_ms": 7.0},
                              dense_backend={"name": "pgvector", "search": "exact"})
    assert cal.problems() == []
    p = predict(w, cal)
    assert p["dense"] == 7.0 and p["parts"] == pytest.approx(2.0 + 1.5 * 10 + 7.0)
    numpy_w = dataclasses.replace(w, dense_backend=False)
    assert predict(numpy_w, cal)["dense"] == pytest.approx(2.0 * 525_000 * 384 / 1e6)
    with pytest.raises(SearchCoreError, match="timed numpy's dense search.*pgvector table.*--recalibrate"):
        predict(w, calibration())
    bad = dataclasses.replace(cal, units={**cal.units, "dense_backend_ms": -1.0})
    assert any("dense_backend_ms" in p for p in bad.problems())


def test_a_calibration_on_a_pgvector_index_times_the_backend_under_its_own_key(demo_index, pgvector_dsn, tmp_path):
    """The index's dense channel searches PostgreSQL: the calibration times that (its own unit, its own key, so a
    numpy calibration of the same embedder is never reused for it), and numpy's product still for the entity
    channel's unit; the work counted says where the dense search went."""
    from search_core.search.pipeline import Searcher
    from search_core.config import SearchConfig
    from search_core.search.work import search_work
    from tuner.data.gold import load_gold
    from tuner.evaluation.cost_model import calibrate, calibration_key, calibration_key_for, machine
    from tests.helpers.pgvector import DenseBackend
    backend = DenseBackend("pgvector", pgvector_dsn)
    try:
        db = backend.copy_of(demo_index, tmp_path, search="hnsw", m=8, ef_construction=32, ef_search=40)
        queries = [q.query for q in load_gold(ROOT / "experiments/gold/demo-tune.yaml").questions[:4]]
        s = Searcher(db)
        try:
            backend.check_used(s.view)
            cal = calibrate(s, queries, passes=1)
            fp, key = s.fingerprint["embedder"], calibration_key_for(s)
            r = s.retrieve(queries[0], SearchConfig().depth)
            cfg = SearchConfig(embedder=s.embedder_name)
            work = search_work(s, r, cfg, s.rank(r, cfg, snippets=False).fused)
        finally:
            s.close()
    finally:
        backend.drop_tables()
    assert cal.dense_backend == {"name": "pgvector", "search": "hnsw", "m": 8, "ef_construction": 32, "ef_search": 40,
                                 "read_rows": 0, "partitions": 4}
    assert cal.units["dense_backend_ms"] > 0 and cal.units["dense_per_mrowdim"] > 0
    assert cal.key == key != calibration_key(machine(), fp)
    assert work.dense_backend and predict(work, cal)["dense"] == cal.units["dense_backend_ms"]
    assert Calibration.from_json(json.loads(json.dumps(cal.to_json()))) == cal
