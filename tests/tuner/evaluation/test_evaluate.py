import json

from click.testing import CliRunner

from search_core.config import SearchConfig
from search_core.search.pipeline import Searcher
from tuner.cli import main
from tuner.evaluation.fake_miss import possible_gold_gaps
from tuner.evaluation.evaluate import QuestionResult, RetrievalCache, evaluate, run_queries, summarize
from tuner.data.gold import GoldSet, Question, load_gold
from tests.helpers import ROOT

TUNE = ROOT / "experiments/gold/demo-tune.yaml"


def test_eval_json_on_the_demo_tuning_set(demo_index, tmp_path):
    r = CliRunner().invoke(main, ["eval", "--db", str(demo_index), "--gold", str(TUNE), "--json",
                                  "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    for key in ("n", "hit@5", "mrr", "p@5", "recall@5", "ndcg@10", "coverage", "latency_ms", "score100",
                "by_level", "per_query", "gate", "possible_gold_gaps"):
        assert key in data
    assert data["n"] == 24 and set(data["latency_ms"]) == {"p50", "p95", "n"}
    # 24 answerable + 12 probes, timed over 3 passes so the p95 stands on >= 100 timings (--timing-samples)
    assert data["latency_ms"]["n"] == 108
    assert set(data["by_level"]) <= {"L0", "L1", "XL", "L2", "L3"} and data["by_level"]["L0"]["n"] == 6
    assert set(data["by_level"]["L0"]["latency_ms"]) == {"p50", "p95", "n"}
    assert all(q["latency_ms"] > 0 for q in data["per_query"])
    assert data["gate"]["probes"] == 12 and len(data["gate"]["probe_results"]) == 12
    assert data["hit@5"] >= 0.6                    # a working engine on its own demo vault
    assert len(list(tmp_path.glob("*-demo-tune-*.json"))) == 1
    table = CliRunner().invoke(main, ["eval", "--db", str(demo_index), "--gold", str(TUNE), "--out", str(tmp_path),
                                      "--timing-samples", "0"])
    assert "overall" in table.output and "L0" in table.output and "score" in table.output
    assert "over 36 timings" in table.output                  # --timing-samples 0: one pass
    # the score says its speed came from this run's stopwatch, which is why a sweep's score of it differs
    assert "from this run's measured p95; a sweep charges the cost model's prediction" in table.output
    # progress on stderr when it is not a terminal too: plain lines that finish (off with --json)
    assert "questions: 36/36 (100%) done" in table.stderr


def test_metrics_are_computed_from_ranks(demo_index):
    s = Searcher(demo_index)
    gold = GoldSet("g", "mem", (Question("a", "L0", "김치찌개 레시피", ("life/cooking/kimchi-jjigae",)),
                                Question("b", "L1", "김치찌개 레시피", ("no-such-note-here",))))
    rows = run_queries(s, gold, SearchConfig())
    m = summarize(rows)
    assert rows[0].first_rank == 1 and rows[1].first_rank is None
    assert m["hit@5"] == 0.5 and m["mrr"] == 0.5 and m["coverage"] == 1.0


def test_cached_reevaluation_does_not_search_again(demo_index):
    s = Searcher(demo_index)
    gold = load_gold(TUNE)
    cache = RetrievalCache()
    evaluate(s, gold, SearchConfig(), cache=cache, audit=False)
    assert cache.misses == len(gold.questions) and cache.hits == 0
    evaluate(s, gold, SearchConfig(w_sparse=0.1, rrf_k=20), cache=cache, audit=False)
    assert cache.hits == len(gold.questions)


def test_fake_miss_audit_finds_a_planted_near_duplicate(tmp_path, shared_cache):
    from search_core.index.indexer import index_vault
    from tests.helpers import write_vault
    body = ("## 설정\n\n리랭커는 bge-reranker-v2-m3를 쓰고, 상위 20개를 다시 매겨 5개만 남긴다. 점수 0.2 미만은 버린다. "
            "지연 시간은 CPU에서 420ms 정도였다.\n\n## 결과\n\nMRR이 0.68에서 0.72로 올랐다.\n")
    vault = write_vault(tmp_path / "v", {
        "reranker.md": "---\ntitle: 검색 결과 재정렬\n---\n" + body,
        "reranker-copy.md": "---\ntitle: 재정렬 메모 사본\n---\n" + body + "\n조금 덧붙인 문장.\n",
        "other.md": "# 김치찌개\n돼지고기 300g\n",
        "links-gold.md": "# 모음\n[[reranker]] 참고\n",
    })
    db = tmp_path / "i.sqlite"
    index_vault(vault, db, cache=shared_cache)
    s = Searcher(db)
    # a miss: the gold note is not in the top 5, its planted copy and a note linking to it are
    miss = QuestionResult.searched(Question("q", "L1", "리랭커 설정 420ms", ("reranker",)),
                                   ("reranker-copy", "links-gold", "other"))
    found = possible_gold_gaps(s, [miss], SearchConfig())
    gaps = {g.note_id: " ".join(g.reasons) for g in found}
    # an evaluation file keeps each as {question, query, gold, note_id, rank, reasons} and reads it back alike
    from tuner.evaluation.fake_miss import GoldGap
    assert [list(g.to_json()) for g in found] == [["question", "query", "gold", "note_id", "rank", "reasons"]] * 2
    assert [GoldGap.from_json(json.loads(json.dumps(g.to_json()))) for g in found] == found
    assert "near-duplicate of gold reranker" in gaps["reranker-copy"]
    assert "links to gold reranker" in gaps["links-gold"]
    assert "other" not in gaps
    hit = QuestionResult.searched(Question("q", "L1", "x", ("reranker",)), ("reranker", "reranker-copy"),
                                  inject=True, top_score=0.9)
    assert possible_gold_gaps(s, [hit], SearchConfig()) == []          # only misses are audited


def test_a_small_set_is_timed_over_repeated_passes_until_the_p95_stands_on_100_timings(demo_index):
    from tuner.evaluation.evaluate import TIMING_SAMPLES, timing_passes
    assert TIMING_SAMPLES == 100
    assert [timing_passes(n, 100) for n in (32, 36, 100, 120, 0)] == [4, 3, 1, 1, 1]
    assert timing_passes(32, 0) == 1
    s = Searcher(demo_index)
    gold = load_gold(ROOT / "experiments/gold/demo-tune.yaml")
    n = len(gold.questions)
    cache = RetrievalCache()
    one = evaluate(s, gold, SearchConfig(), cache=cache, audit=False)
    assert one.latency_ms["total"].n == n
    many = evaluate(s, gold, SearchConfig(), cache=cache, audit=False, min_timing_samples=100)
    passes = timing_passes(n, 100)
    assert passes >= 2 and many.latency_ms["total"].n == passes * n
    assert many.latency_ms["embed"].n == passes * n           # every stage stands on every pass
    assert many.to_json()["latency_ms"]["n"] == passes * n       # what the ledger and the reports read
    assert many.overall == one.overall                           # quality comes from one pass
    assert cache.hits == n                                       # the repeats searched for real, uncached


def test_an_evaluation_reads_back_from_its_json_as_the_same_typed_result(demo_index, tmp_path):
    """EvalResult.to_json is what `eval --out`, the sweep and the A/B keep; from_json gives back the same
    result, per-question rows typed (QuestionResult), with or without the cost model's latency."""
    from tuner.evaluation.cost_model import calibrate
    from tuner.evaluation.evaluate import EvalResult, QuestionResult
    s = Searcher(demo_index)
    gold = load_gold(ROOT / "experiments/gold/demo-tune.yaml")
    timed = evaluate(s, gold, SearchConfig(), audit=False)
    cost = calibrate(s, [q.query for q in gold.questions[:8]], passes=1)
    charged = evaluate(s, gold, SearchConfig(), cache=RetrievalCache(), audit=False, cost=cost)
    for res in (timed, charged):
        text = json.dumps(res.to_json(), ensure_ascii=False)
        back = EvalResult.from_json(json.loads(text))
        assert all(isinstance(q, QuestionResult) for q in back.per_query)
        assert back == res and json.dumps(back.to_json(), ensure_ascii=False) == text
    assert charged.to_json()["latency_ms"]["source"] == "cost model"
    for res in (timed, charged):      # the ledger's form: what a sweep row keeps, read back for the keep rule
        row = json.dumps(res.to_ledger(), ensure_ascii=False)
        back = EvalResult.from_ledger(json.loads(row))
        assert json.dumps(back.to_ledger(), ensure_ascii=False) == row
        assert (back.overall, back.score100, back.p95_ms) == (res.overall, res.score100, res.p95_ms)
        assert [(q.id, q.metrics.get("hit@5"), q.gate_probability, q.work) for q in back.per_query] == \
            [(q.id, q.metrics.get("hit@5"), q.gate_probability, q.work) for q in res.per_query]
    probe = next(q for q in timed.per_query if q.level == "probe")
    assert probe.metrics == {} and set(timed.per_query[0].metrics) >= {"hit@5", "mrr", "ndcg@10"}


def test_eval_warns_when_every_answerable_question_is_already_at_rank_1(demo_index, tmp_path):
    """A set whose questions all sit at rank 1 scores every config alike: a sweep over it keeps nothing, so
    eval says so (stderr, and --json's warnings) and what to add."""
    import yaml
    from tuner.evaluation.discrimination import CANNOT_DISCRIMINATE
    s = Searcher(demo_index)
    full = evaluate(s, load_gold(TUNE), SearchConfig(), audit=False)
    assert not any(CANNOT_DISCRIMINATE in w for w in full.warnings)     # 24 questions, not all at rank 1
    first = {q.id for q in full.per_query if q.first_rank == 1}
    doc = yaml.safe_load(TUNE.read_text(encoding="utf-8"))
    doc["questions"] = [q for q in doc["questions"] if q["id"] in first]          # no probes either
    easy = tmp_path / "easy.yaml"
    easy.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    res = evaluate(s, load_gold(easy), SearchConfig(), audit=False)
    [w] = [w for w in res.warnings if CANNOT_DISCRIMINATE in w]
    assert f"all {len(first)} answerable questions are at rank 1" in w
    assert "L1 paraphrase" in w and "XL cross-lingual" in w and "L2 multi-hop" in w and "probes make" in w

    r = CliRunner().invoke(main, ["eval", "--db", str(demo_index), "--gold", str(easy), "--json", "--out",
                                  str(tmp_path), "--timing-samples", "0", "--no-audit"])
    assert r.exit_code == 0, r.output
    assert [w for w in json.loads(r.stdout)["warnings"] if CANNOT_DISCRIMINATE in w] == [w]
    assert f"warning: {w}" in r.stderr
    r = CliRunner().invoke(main, ["eval", "--db", str(demo_index), "--gold", str(easy), "--out", str(tmp_path),
                                  "--timing-samples", "0", "--no-audit"])
    assert f"warning: {w}" in r.stderr and CANNOT_DISCRIMINATE not in r.stdout and "overall" in r.stdout


def test_a_question_is_scored_with_its_exclusions_held_out(demo_index):
    """The note a question was cut from, held out of its search (`exclude:`), is not in the scored list, and
    the notes below move up into its place: the question scores as a search without that note."""
    s = Searcher(demo_index)
    query = "김치찌개 레시피"
    ranked = run_queries(s, GoldSet("g", "mem", (Question("a", "L1", query, ("x",)),)), SearchConfig())[0].ranked
    third = ranked[2]
    plain = run_queries(s, GoldSet("g", "mem", (Question("a", "L1", query, (third,)),)), SearchConfig())[0]
    asked = GoldSet("g", "mem", (Question("a", "L1", query, (third,), exclude=(ranked[0],)),))
    row = run_queries(s, asked, SearchConfig())[0]
    assert plain.first_rank == 3 and row.first_rank == 2
    assert ranked[0] not in row.ranked and len(row.ranked) == len(ranked)
    assert row.ranked[:2] == ranked[1:3]


def test_one_question_record_is_searched_kept_and_written_in_either_form():
    """A question's record is one type from the search to the ledger: `searched` holds the top 10 and every
    stage's timing, `kept` what an evaluation keeps (top 5, the total, the prediction), and the one
    to_json/from_json pair writes and reads it as an evaluation keeps it and as a ledger row does."""
    from search_core.search.work import SearchWork
    from tuner.evaluation.evaluate import EVALUATION, LEDGER
    ranked = tuple(f"n{i}" for i in range(10))
    from search_core.gate.model import GateDecision
    from tuner.evaluation.evaluate import QuestionGate
    decision = GateDecision(True, 0.712345, "sure", "model", "g.gate.json", 0.5, "p >= 0.5")
    gate = QuestionGate.decided(decision)
    searched = QuestionResult.searched(Question("q", "L1", "질문", ("n6",), source="vault"), ranked, inject=True,
                                       top_score=0.812345, timings_ms={"embed": 1.234, "total": 5.6789},
                                       gate_features={"top": 0.81}, gate_probability=0.71, gate=gate,
                                       work=SearchWork(embed_lengths=(2,), dense_rows=40, dim=8))
    assert searched.first_rank == 7 and searched.metrics["hit@5"] == 0 and searched.metrics["mrr"] == 1 / 7
    kept = searched.kept(3.21049)
    assert (kept.ranked, kept.timings_ms, kept.top_score, kept.predicted_ms) == \
        (ranked[:5], {"total": 5.68}, 0.8123, 3.21)
    assert kept.metrics == searched.metrics and kept.search_work == SearchWork(embed_lengths=(2,), dense_rows=40, dim=8)
    assert QuestionResult.from_json(kept.to_json(EVALUATION)) == kept
    assert kept.to_json(EVALUATION)["gate"] == decision.to_json()       # as search_core writes a decision, key for key
    assert list(kept.to_json(EVALUATION)["gate"]) == list(decision.to_json())
    row = kept.to_json(LEDGER)
    assert row["gate"] == {"kind": "model", "source": "g.gate.json", "threshold": 0.5} and "query" not in row
    back = QuestionResult.from_json(row)
    assert back.to_json(LEDGER) == row and (back.query, back.ranked, back.gate_features) == ("", (), {})
    assert (back.metrics, back.source, back.latency_ms, back.search_work) == \
        ({m: kept.metrics[m] for m in ("hit@5", "mrr", "ndcg@10")}, "vault", 5.68, kept.search_work)
    probe = QuestionResult.searched(Question("p", "probe", "x", ()), ranked).kept()
    assert probe.metrics == {} and QuestionResult.from_json(probe.to_json(LEDGER)).metrics == {}
