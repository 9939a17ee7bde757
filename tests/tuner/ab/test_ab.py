"""`autoresearch ab`: real models on the demo vault, each on its own index; bad input; a disk that fills;
Ctrl-C (a real SIGINT to a real subprocess); the HTML report in headless Chromium."""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.config import SearchConfig
from tuner.ab.records import ABError, ABParams
from tuner.ab.run import parse_candidates, run_ab
from tuner.cli import main
from tuner.data.gold import load_gold, split_gold
from tuner.reports.ab import ab_report
from tuner.reports import emit, render
from tuner.reports.browser import check_page
from tuner.stored_config import NO_CONFIG
from search_core.index.store import backup_copy

ROOT = Path(__file__).resolve().parents[3]
DEMO_VAULT = ROOT / "experiments" / "demo-vault"
TUNE = ROOT / "experiments" / "gold" / "demo-tune.yaml"


# -- names: checked before any work --------------------------------------------------------------------
def test_one_candidate_only_is_refused_with_the_fix():
    with pytest.raises(ABError, match=r"needs two candidates, got only 'e5-small'.*--embedders e5-small,minilm-l6"):
        parse_candidates("e5-small", None)


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(SearchCoreError, match=r"unknown embedder 'e5-smal'; known: e5-small, minilm-l6"):
        parse_candidates("e5-smal,minilm-l6", None)


def test_a_name_in_the_wrong_case_is_refused_with_the_name_meant():
    # the duplicate check folds case; the name itself is exact (configs and fingerprints record it)
    with pytest.raises(SearchCoreError, match=r"unknown embedder 'E5-SMALL'; did you mean 'e5-small'\?"):
        parse_candidates("E5-SMALL,minilm-l6", None)


def test_an_empty_vault_is_refused_before_any_model_loads(tmp_path):
    from tuner.ab.prepare import prepare
    (tmp_path / "vault" / "sub").mkdir(parents=True)
    (tmp_path / "vault" / "sub" / "image.png").write_bytes(b"not a note")
    with pytest.raises(ABError, match="has no notes"):
        prepare("e5-small,minilm-l6", None, TUNE, None, 0.5, str(tmp_path / "vault"), None, None, tmp_path / "work")


def test_an_ab_that_compared_nothing_says_so_and_fails():
    from tuner.ab.compare import PairComparison
    from tuner.ab.records import Candidate, CandidateResult
    from tuner.ab.run import ABRun, nothing_compared
    ok = CandidateResult(Candidate("e5-small"), "e5-small", "ok")
    gone = CandidateResult(Candidate("BAAI/bge-m3"), "BAAI/bge-m3", "unavailable")
    from tuner.evaluation.compare import PairedMetric
    same = PairedMetric(0.8, 0.8, 0.0, 0.0, 1.0, (-0.1, 0.1), True)
    pair = PairComparison("e5-small", "minilm-l6", 10, {"hit@5": same, "mrr": same}, (), (), 10)
    from search_core.config import ChunkConfig
    from tuner.ab.records import ABSetup
    setup = ABSetup(("e5-small",), ("none",), "v", "w", "t", 10, "t", 10, 0, 0, "", True, SearchConfig(), ChunkConfig())
    assert nothing_compared(ABRun(setup, (ok, ok), (pair,), False, 0.0)) is None
    why = nothing_compared(ABRun(setup, (ok, gone), (), False, 0.0))
    assert why.startswith("no comparison: 1 candidate(s) finished; not compared: BAAI/bge-m3 (unavailable): an A/B "
                          "needs two candidates that run")


def test_two_spellings_of_one_model_are_refused():
    with pytest.raises(ABError, match=r"'BAAI/bge-m3' and 'st:baai/bge-m3' are two spellings of the same embedder"):
        parse_candidates("BAAI/bge-m3,st:baai/bge-m3", None)
    with pytest.raises(ABError, match="two spellings of the same reranker"):
        parse_candidates("e5-small", "none,BAAI/bge-reranker-base,ce:BAAI/bge-reranker-base/")


def test_rerankers_are_compared_on_one_embedder():
    assert parse_candidates("e5-small", "none,BAAI/bge-reranker-base") == (("e5-small",), ("none", "BAAI/bge-reranker-base"))
    with pytest.raises(ABError, match="compare rerankers on one embedder's index"):
        parse_candidates("e5-small,minilm-l6", "none,BAAI/bge-reranker-base")


def test_the_readme_server_specs_parse():
    embs, rers = parse_candidates("http://127.0.0.1:8081/v1?model=minilm,http://127.0.0.1:8082/v1?model=bge-m3", None)
    assert embs == ("http://127.0.0.1:8081/v1?model=minilm", "http://127.0.0.1:8082/v1?model=bge-m3")
    _, rers = parse_candidates("e5-small", "none,rerank+http://127.0.0.1:8083/v1/rerank?model=bge-reranker-base,"
                                           "rerank+http://127.0.0.1:8084/v1/rerank?model=bge-reranker-v2-m3")
    assert len(rers) == 3


def _cand(label, ranks):
    """A finished candidate whose per-question gold ranks are `ranks` (None: not in the top 10)."""
    from tuner.ab.records import Candidate, CandidateResult
    pq = []
    for i, r in enumerate(ranks):
        pq.append({"id": f"q{i}", "level": "L1", "query": f"query {i}", "gold": ["g"], "first_rank": r,
                   "hit@1": float(r == 1), "hit@5": float(r is not None and r <= 5),
                   "mrr": 1 / r if r else 0.0, "p@5": 0.2 * (r is not None and r <= 5),
                   "recall@5": float(r is not None and r <= 5), "ndcg@10": 1 / r if r else 0.0})
    from tuner.evaluation.evaluate import EvalResult, GateMetrics, QuestionResult
    result = EvalResult("gold", NO_CONFIG, "", None, {}, {}, GateMetrics.from_json(None), {}, None,
                        [QuestionResult.from_json(q) for q in pq])
    return CandidateResult(Candidate(label), label, "ok", result=result)


def test_pairwise_counts_questions_and_ranks():
    from tuner.ab.compare import PairComparison, compare_pair
    a = _cand("A", [1, 2, None, 7, 1, 1])
    b = _cand("B", [1, 1, 3, None, 1, 2])
    pr = compare_pair(a, b)
    assert pr.metrics["hit@5"].delta_questions == 1        # q2 gained; q3 was already out of the top 5
    assert pr.metrics["hit@1"].delta_questions == 0        # q1 gained, q5 lost
    assert [(w.id, w.rank_a, w.rank_b) for w in pr.b_wins] == [("q1", 2, 1), ("q2", None, 3)]
    assert [(w.id, w.rank_a, w.rank_b) for w in pr.b_loses] == [("q3", 7, None), ("q5", 1, 2)]
    assert pr.ties == 2 and pr.metrics["hit@5"].within_noise
    # the A/B's JSON keeps it; read back, it writes the same text
    text = json.dumps(pr.to_json(), ensure_ascii=False)
    assert json.dumps(PairComparison.from_json(json.loads(text)).to_json(), ensure_ascii=False) == text


def test_the_example_reports_pairs_read_back_into_the_same_text():
    """docs/examples' A/B JSON holds pairs the A/B wrote; read as PairComparison, they write the same bytes."""
    from tuner.ab.compare import PairComparison
    pairs = [p for name in ("ab-demo.json", "ab-autorag.json")
             for p in json.loads((ROOT / "docs/examples" / name).read_text(encoding="utf-8"))["data"]["pairs"]]
    assert pairs and any(p["b_wins"] for p in pairs)
    for p in pairs:
        assert json.dumps(PairComparison.from_json(p).to_json(), ensure_ascii=False) == json.dumps(p, ensure_ascii=False)


def test_a_new_threshold_redecides_the_gate_without_searching():
    from search_core.config import SearchConfig
    from search_core.gate.model import COSINE
    from tuner.ab.run import _regate
    from tuner.data.gold import Question
    from tuner.evaluation.evaluate import QuestionResult
    rows = [QuestionResult.searched(Question("a", "L1", "q", ("g",)), ("g",), inject=True, top_score=0.80),
            QuestionResult.searched(Question("p", "probe", "q", ()), ("x",), inject=True, top_score=0.70),
            QuestionResult.searched(Question("e", "L1", "q", ("g",)), (), top_score=0.0)]
    assert [r.inject for r in _regate(rows, COSINE, SearchConfig(), 0.75)] == [True, False, False]
    again = _regate(rows, COSINE, SearchConfig(), 0.60)
    assert [r.inject for r in again] == [True, True, False]
    assert {(r.gate.kind, r.gate.threshold) for r in again} == {("cosine", 0.60)}


# -- the real A/B --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mini(tmp_path_factory, demo_index_e5, shared_cache):
    """The demo tuning questions and only the 35 notes they point at (a fifth of the demo vault, so two
    real models embed it in seconds), split 50/50 into tuning and evaluation questions. The A/B's embedding
    cache starts as a copy of the session's, which holds e5-small's vectors of these notes (demo_index_e5
    embedded them): e5-small's build reads them, minilm-l6 embeds for real."""
    root = tmp_path_factory.mktemp("mini")
    (root / "work").mkdir()
    backup_copy(shared_cache, root / "cache" / "embed-cache.sqlite")
    gold = load_gold(TUNE)
    for nid in sorted(gold.gold_ids()):
        dst = root / "vault" / f"{nid}.md"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEMO_VAULT / f"{nid}.md", dst)
    tune, ev = split_gold(gold, 0.5)
    return SimpleNamespace(vault=root / "vault", gold=TUNE, tune=tune, eval=ev, work=root / "work",
                           cache=root / "cache")


# an index's build facts as the A/B's JSON keeps them: built now, then (an index built before) its first build's
BUILT = ["db", "reused", "seconds", "embedded_now", "vectors", "chunks", "notes", "size_mb"]
BUILT_BEFORE = ["first_build_seconds", "first_build_embedded"]


@pytest.fixture(scope="module")
def demo_ab(mini):
    """e5-small vs minilm-l6 vs bge-m3 (not on this machine) vs a server that is down."""
    from tests.helpers import free_port
    down = f"http://127.0.0.1:{free_port()}/v1?model=bge-m3"      # nothing listens there
    p = ABParams(("e5-small", "minilm-l6", "BAAI/bge-m3", down), tune=mini.tune, eval=mini.eval,
                 vault=str(mini.vault), work=str(mini.work))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTORESEARCH_CACHE_DIR", str(mini.cache))    # the user's cache, a copy of the session's
        return run_ab(p).to_json()


@pytest.mark.slow
def test_ab_compares_available_models_and_reports_the_missing_one(demo_ab, mini):
    by = {c["label"]: c for c in demo_ab["candidates"]}
    assert [by[k]["status"] for k in ("e5-small", "minilm-l6", "BAAI/bge-m3")] == ["ok", "ok", "unavailable"]
    msg = by["BAAI/bge-m3"]["message"]
    assert "looked in the Hugging Face cache" in msg and "huggingface-cli download BAAI/bge-m3" in msg
    (down,) = [c for c in demo_ab["candidates"] if c["label"].startswith("http://")]
    assert down["status"] == "unavailable" and "is not answering" in down["message"]
    assert "llama-server --embedding" in down["message"]
    # the JSON the A/B report reads, key for key as before its records were typed (docs/examples/ab-*.json)
    assert list(demo_ab["params"]) == ["embedders", "rerankers", "vault", "work", "tune", "tune_n", "eval", "eval_n",
                                       "eval_probes", "tune_probes", "split", "same_questions", "config", "chunking"]
    assert demo_ab["params"]["config"] == SearchConfig().as_dict() and by["BAAI/bge-m3"]["build"] == {}
    assert list(by["e5-small"]["build"]) == BUILT
    # each embedder on its own index, built by it alone
    dbs = {by[k]["build"]["db"] for k in ("e5-small", "minilm-l6")}
    assert len(dbs) == 2 and all(Path(d).parent == mini.work / "indexes" for d in dbs)
    # e5-small's vectors came from the cache copied from the session's (keyed by model and text); minilm-l6's
    # were all embedded now: a cache never hands one model's vectors to another
    assert by["e5-small"]["build"]["embedded_now"] == 0 and by["e5-small"]["build"]["vectors"] > 0
    assert by["minilm-l6"]["build"]["embedded_now"] == by["minilm-l6"]["build"]["vectors"] > 0
    for k in ("e5-small", "minilm-l6"):
        c = by[k]
        assert c["result"]["index"]["fingerprint"]["embedder"]["name"] == k
        assert c["build"]["vectors"] > 0 and c["build"]["size_mb"] > 0
        assert c["latency"]["samples"] == 16 and c["latency"]["total"]["p95"] >= c["latency"]["total"]["p50"] > 0
        assert c["latency"]["embed"]["p50"] > 0
        assert c["result"]["gate"]["probes"] == 6
    # each candidate gated as `search` would: e5-small by the shipped default, minilm-l6 (no gate file fits
    # it) by a model fitted on the tuning questions, never by another candidate's cut
    from search_core.gate.model import DEFAULT_GATE_FILE, DEFAULT_GATE_SOURCE, load_gate
    gates = {k: {(q["gate"]["kind"], q["gate"]["source"]) for q in by[k]["result"]["per_query"]}
             for k in ("e5-small", "minilm-l6")}
    assert gates["e5-small"] == {("model", DEFAULT_GATE_SOURCE)} and not by["e5-small"]["threshold_fitted"]
    assert by["e5-small"]["threshold"] == pytest.approx(load_gate(DEFAULT_GATE_FILE).threshold)
    assert gates["minilm-l6"] == {("model", "fitted by the A/B on the tuning questions")}
    assert by["minilm-l6"]["threshold_fitted"]
    for k in ("e5-small", "minilm-l6"):
        assert set(by[k]["result"]["by_level"]) >= {"L0", "L1", "XL", "L2", "L3"}
    (pair,) = demo_ab["pairs"]
    assert (pair["a"], pair["b"], pair["n"]) == ("e5-small", "minilm-l6", 10)
    h = pair["metrics"]["hit@5"]
    assert h["delta_questions"] == round((h["b"] - h["a"]) * 10)
    # wins and losses carry the gold's rank on each side, and agree with the per-question results
    qa = {q["id"]: q for q in by["e5-small"]["result"]["per_query"]}
    for w in pair["b_wins"]:
        assert (w["rank_b"] or 99) < (w["rank_a"] or 99) and qa[w["id"]]["first_rank"] == w["rank_a"]
    for lost in pair["b_loses"]:
        assert (lost["rank_b"] or 99) > (lost["rank_a"] or 99)
    assert len(pair["b_wins"]) + len(pair["b_loses"]) + pair["ties"] == 10


@pytest.mark.slow
def test_a_second_ab_reuses_the_indexes_and_measurements_unless_fresh(demo_ab, mini):
    import dataclasses
    p = ABParams(("e5-small", "minilm-l6"), tune=mini.tune, eval=mini.eval, vault=str(mini.vault), work=str(mini.work))
    again = {c["label"]: c for c in run_ab(p).to_json()["candidates"]}
    first = {c["label"]: c for c in demo_ab["candidates"]}
    for k in ("e5-small", "minilm-l6"):
        assert list(again[k]["build"]) == BUILT[:4] + ["model_loaded"] + BUILT[4:] + BUILT_BEFORE
        assert again[k]["build"]["reused"] and again[k]["build"]["embedded_now"] == 0
        assert again[k]["build"]["first_build_embedded"] == first[k]["build"]["embedded_now"]
        assert again[k]["reused_from"] and again[k]["result"]["per_query"] == first[k]["result"]["per_query"]
    fresh = {c["label"]: c for c in run_ab(dataclasses.replace(p, fresh=True)).to_json()["candidates"]}
    for k in ("e5-small", "minilm-l6"):
        assert list(fresh[k]["build"]) == BUILT + BUILT_BEFORE
        assert fresh[k]["reused_from"] == "" and fresh[k]["latency"]["samples"] == 16
        assert [q["first_rank"] for q in fresh[k]["result"]["per_query"]] == \
            [q["first_rank"] for q in first[k]["result"]["per_query"]]


@pytest.mark.slow
def test_report_in_every_format_and_the_html_in_chromium(demo_ab, tmp_path):
    rep = ab_report(demo_ab)
    md = render(rep, "md")
    assert "minilm-l6 vs e5-small: hit@5" in rep.verdict and "questions" in rep.verdict
    assert ("within noise" in rep.verdict)
    assert "| XL (cross-lingual) | e5-small |" in md and "| XL (cross-lingual) | minilm-l6 |" in md
    assert "| BAAI/bge-m3 | unavailable |" in md
    assert "questions where minilm-l6 ranks the gold higher" in md or "No question where minilm-l6" in md
    doc = json.loads(render(rep, "json"))
    assert doc["kind"] == "ab" and doc["data"]["pairs"][0]["n"] == 10
    page = tmp_path / "ab.html"
    emit(rep, "html", page)
    check = check_page(page, tmp_path / "ab.png", height=6000)
    # two score histograms (one per finished candidate) and the cost-quality plot
    assert check.svg_count == 3 and check.rendered_svgs == 3
    assert check.requests == ()
    # a saved JSON report renders again in another format without running anything
    saved = tmp_path / "ab.json"
    emit(rep, "json", saved)
    r = CliRunner().invoke(main, ["ab", "--from-json", str(saved), "--format", "md"])
    assert r.exit_code == 0, r.output
    assert r.output == md


@pytest.mark.slow
def test_gold_ids_missing_from_the_index_fail_that_candidate_and_keep_the_report(demo_ab, mini, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nquestions:\n  - {id: B1, level: L0, query: 김치찌개, gold: [life/cooking/kimchi-jjigae]}\n"
                   "  - {id: B2, level: L0, query: 없는 노트, gold: [no/such-note]}\n", encoding="utf-8")
    p = ABParams(("e5-small", "minilm-l6"), tune=load_gold(bad), eval=load_gold(bad), vault=str(mini.vault),
                 work=str(mini.work))
    d = run_ab(p).to_json()
    assert [c["status"] for c in d["candidates"]] == ["failed", "failed"]
    assert "gold ids missing" in d["candidates"][0]["message"] and "no/such-note" in d["candidates"][0]["message"]
    assert d["candidates"][0]["build"]["reused"] is True       # the finished indexes stay where they were
    assert ab_report(d).verdict.startswith("no comparison: 0 candidate(s) finished")


@pytest.mark.slow
def test_a_reranker_ab_scores_with_a_real_cross_encoder(demo_ab, mini, tiny_cross_encoder):
    """none vs a real CrossEncoder (a 2-layer BERT built in conftest, random weights): both on the e5 index
    the embedder A/B built, the reranker paid per question (never served from a cache), its order scored."""
    ce = f"ce:{tiny_cross_encoder}"
    p = ABParams(("e5-small",), rerankers=("none", ce), tune=mini.tune, eval=mini.eval, vault=str(mini.vault),
                 work=str(mini.work))
    d = run_ab(p).to_json()
    plain, reranked = d["candidates"]
    assert (plain["status"], reranked["status"]) == ("ok", "ok"), reranked.get("message")
    assert plain["label"] == "e5-small, no reranker" and reranked["label"] == f"e5-small + {ce}"
    assert plain["build"]["db"] == reranked["build"]["db"]             # one embedder's index
    assert reranked["result"]["config"]["reranker"] == ce
    assert reranked["latency"]["rerank"]["p50"] > 0 and plain["latency"].get("rerank", {"p95": 0})["p95"] == 0
    assert reranked["latency"]["samples"] == plain["latency"]["samples"] == 16
    # a random cross-encoder reorders the fused list: the scored lists differ, the question set does not
    ranks = lambda c: [q["first_rank"] for q in c["result"]["per_query"]]
    assert [q["id"] for q in plain["result"]["per_query"]] == [q["id"] for q in reranked["result"]["per_query"]]
    assert ranks(plain) != ranks(reranked)
    (pair,) = d["pairs"]
    assert pair["b"] == reranked["label"] and pair["n"] == 10


def _ab_cmd(mini, work: Path, out: Path, embedders="e5-small,minilm-l6") -> list:
    return [sys.executable, "-c", "from tuner.cli import main; main()", "ab", "--embedders", embedders,
            "--gold", str(mini.gold), "--split", "0.5", "--vault", str(mini.vault), "--work", str(work),
            "--format", "json", "--out", str(out), "--progress"]


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
def test_a_disk_that_fills_fails_that_build_and_leaves_no_half_index(demo_ab, mini, tmp_path):
    """The second candidate's build cannot grow its file past 60% of the first one's index (RLIMIT_FSIZE:
    the kernel answers EFBIG, as a full disk answers ENOSPC); the first candidate, already built, is kept."""
    work = tmp_path / "work"
    (work / "indexes").mkdir(parents=True)
    e5 = next(c for c in demo_ab["candidates"] if c["label"] == "e5-small")["build"]["db"]
    shutil.copy(e5, work / "indexes" / Path(e5).name)
    limit = int(0.6 * Path(e5).stat().st_size)     # minilm-l6's index has as many 384-d vectors

    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "r.json"
    proc = subprocess.run(_ab_cmd(mini, work, out), preexec_fn=cap, env=_env(), capture_output=True, text=True, timeout=900)
    # the report is written, and the exit says that one candidate alone compared nothing
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Error: no comparison: 1 candidate(s) finished; not compared: minilm-l6 (failed): an A/B needs two " \
        "candidates that run" in proc.stderr
    d = json.loads(out.read_text(encoding="utf-8"))["data"]
    by = {c["label"]: c for c in d["candidates"]}
    assert by["e5-small"]["status"] == "ok"
    assert by["minilm-l6"]["status"] == "failed" and "the disk filled (or refused a write) while building" in by["minilm-l6"]["message"]
    assert "minilm-l6: failed: the disk filled" in proc.stderr
    assert not [p.name for p in (work / "indexes").iterdir() if "minilm" in p.name and not p.name.endswith(".lock")]
    assert (work / "indexes" / Path(e5).name).exists()


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_candidate_and_names_the_cut_one(demo_ab, mini, tmp_path):
    """A real SIGINT once minilm-l6's index build has started (its embedding cache is empty here)."""
    work = tmp_path / "work"
    out = tmp_path / "r.json"
    (work / "indexes").mkdir(parents=True)
    e5 = next(c for c in demo_ab["candidates"] if c["label"] == "e5-small")["build"]["db"]
    shutil.copy(e5, work / "indexes" / Path(e5).name)      # e5-small finishes quickly; minilm-l6 starts cold
    # a child of a background job inherits SIGINT ignored; a terminal's Ctrl-C reaches a default handler
    proc = subprocess.Popen(_ab_cmd(mini, work, out), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = b""
    deadline = time.time() + 600
    while b"build minilm-l6" not in seen:       # tqdm redraws with \r: read bytes, not lines
        chunk = os.read(proc.stderr.fileno(), 4096)
        assert chunk or proc.poll() is None, seen[-2000:]
        seen += chunk
        assert time.time() < deadline
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=300)[1]
    assert proc.returncode == 130, (seen + rest)[-2000:]
    assert b"interrupted: cut minilm-l6" in rest
    d = json.loads(out.read_text(encoding="utf-8"))
    by = {c["label"]: c["status"] for c in d["data"]["candidates"]}
    assert by == {"e5-small": "ok", "minilm-l6": "cut"}
    assert d["data"]["cut"] == ["minilm-l6"] and "cut before finishing: minilm-l6" in json.dumps(d, ensure_ascii=False)
    # cut while building: nothing of minilm-l6's index is left; cut while evaluating: its finished index stays
    assert not [p for p in (work / "indexes").iterdir() if ".building-" in p.name]


def test_two_spellings_that_slug_alike_get_two_index_files(tmp_path):
    """`st:/models/bge-m3` and `st:models/bge-m3` are two models; a slug alone gave them one file."""
    from search_core.config import ChunkConfig
    from tuner.ab.run import index_path
    a = index_path(tmp_path, "experiments/demo-vault", "st:/models/bge-m3", ChunkConfig())
    b = index_path(tmp_path, "experiments/demo-vault", "st:models/bge-m3", ChunkConfig())
    other_vault = index_path(tmp_path, "experiments", "st:/models/bge-m3", ChunkConfig())
    assert len({a, b, other_vault}) == 3 and a.parent == tmp_path / "indexes"


def test_gate_accuracy_without_probes_is_not_printed_as_perfect():
    from tuner.reports.ab import _gate_accuracy
    assert _gate_accuracy({"probes": 0, "gate_accuracy": 1.0}) == "n/a: no probes"
    assert _gate_accuracy({"probes": 6, "gate_accuracy": 0.75}) == 0.75


def test_a_candidates_latency_is_written_and_read_back_as_the_ab_json_keeps_it():
    from tuner.ab.records import Candidate, CandidateLatency, CandidateResult
    from tuner.evaluation.evaluate import Percentiles
    lat = CandidateLatency(16, 5, {"embed": Percentiles(1.5, 2.25), "total": Percentiles(10.0, 12.5)})
    d = lat.to_json()
    assert d == {"samples": 16, "warmup": 5, "embed": {"p50": 1.5, "p95": 2.25}, "total": {"p50": 10.0, "p95": 12.5}}
    assert list(d) == ["samples", "warmup", "embed", "total"]
    assert CandidateLatency.from_json(json.loads(json.dumps(d))) == lat and CandidateLatency.from_json({}) is None
    assert CandidateResult(Candidate("e5-small"), "e5-small", "unavailable").to_json()["latency"] == {}
