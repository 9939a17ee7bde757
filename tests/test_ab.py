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

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from tuner.ab import ABError, ABParams, parse_candidates, run_ab
from tuner.cli import main
from tuner.gold import load_gold
from tuner.report_ab import ab_report
from tuner.reports import emit, render
from tuner.reports.browser import check_page

ROOT = Path(__file__).resolve().parent.parent
DEMO_VAULT = ROOT / "experiments" / "demo-vault"
TUNE = ROOT / "experiments" / "gold" / "demo-tune.yaml"
HOLDOUT = ROOT / "experiments" / "gold" / "demo-holdout.yaml"


# -- names: checked before any work --------------------------------------------------------------------
def test_one_candidate_only_is_refused_with_the_fix():
    with pytest.raises(ABError, match=r"needs two candidates, got only 'e5-small'.*--embedders e5-small,minilm-l6"):
        parse_candidates("e5-small", None)


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(SearchCoreError, match=r"unknown embedder 'e5-smal'; known: e5-small, minilm-l6"):
        parse_candidates("e5-smal,minilm-l6", None)


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
    from tuner.ab import Candidate, CandidateResult
    pq = []
    for i, r in enumerate(ranks):
        pq.append({"id": f"q{i}", "level": "L1", "query": f"query {i}", "gold": ["g"], "first_rank": r,
                   "hit@1": float(r == 1), "hit@5": float(r is not None and r <= 5),
                   "mrr": 1 / r if r else 0.0, "p@5": 0.2 * (r is not None and r <= 5),
                   "recall@5": float(r is not None and r <= 5), "ndcg@10": 1 / r if r else 0.0})
    return CandidateResult(Candidate(label), label, "ok", result={"per_query": pq})


def test_pairwise_counts_questions_and_ranks():
    from tuner.ab import compare_pair
    a = _cand("A", [1, 2, None, 7, 1, 1])
    b = _cand("B", [1, 1, 3, None, 1, 2])
    pr = compare_pair(a, b)
    assert pr["metrics"]["hit@5"]["delta_questions"] == 1        # q2 gained; q3 was already out of the top 5
    assert pr["metrics"]["hit@1"]["delta_questions"] == 0        # q1 gained, q5 lost
    assert [(w["id"], w["rank_a"], w["rank_b"]) for w in pr["b_wins"]] == [("q1", 2, 1), ("q2", None, 3)]
    assert [(w["id"], w["rank_a"], w["rank_b"]) for w in pr["b_loses"]] == [("q3", 7, None), ("q5", 1, 2)]
    assert pr["ties"] == 2 and pr["metrics"]["hit@5"]["within_noise"]


def test_a_new_threshold_redecides_the_gate_without_searching():
    from tuner.ab import _with_threshold
    from tuner.evaluate import QueryRow
    rows = [QueryRow("a", "L1", "q", ("g",), ("g",), 1, True, 0.80, {}),
            QueryRow("p", "probe", "q", (), ("x",), None, True, 0.70, {}),
            QueryRow("e", "L1", "q", ("g",), (), None, False, 0.0, {})]
    assert [r.inject for r in _with_threshold(rows, 0.75)] == [True, False, False]
    assert [r.inject for r in _with_threshold(rows, 0.60)] == [True, True, False]


# -- the real A/B --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ab_work(tmp_path_factory):
    return tmp_path_factory.mktemp("ab-work")


@pytest.fixture(scope="module")
def demo_ab(ab_work, demo_index):
    """e5-small vs minilm-l6 vs bge-m3 (not on this machine) on the demo sets. The demo fixture's sweep
    embedded the vault with both models, so its embedding cache (reused through base_db) makes the builds cheap."""
    from conftest import free_port
    down = f"http://127.0.0.1:{free_port()}/v1?model=bge-m3"      # nothing listens there
    p = ABParams(("e5-small", "minilm-l6", "BAAI/bge-m3", down), tune=load_gold(TUNE), eval=load_gold(HOLDOUT),
                 vault=str(DEMO_VAULT), work=str(ab_work), base_db=str(demo_index))
    return run_ab(p)


@pytest.mark.slow
def test_ab_compares_available_models_and_reports_the_missing_one(demo_ab, ab_work):
    by = {c["label"]: c for c in demo_ab["candidates"]}
    assert [by[k]["status"] for k in ("e5-small", "minilm-l6", "BAAI/bge-m3")] == ["ok", "ok", "unavailable"]
    msg = by["BAAI/bge-m3"]["message"]
    assert "looked in the Hugging Face cache" in msg and "huggingface-cli download BAAI/bge-m3" in msg
    (down,) = [c for c in demo_ab["candidates"] if c["label"].startswith("http://")]
    assert down["status"] == "unavailable" and "is not answering" in down["message"]
    assert "llama-server --embedding" in down["message"]
    # each embedder on its own index, built by it alone
    dbs = {by[k]["build"]["db"] for k in ("e5-small", "minilm-l6")}
    assert len(dbs) == 2 and all(Path(d).parent == ab_work / "indexes" for d in dbs)
    for k in ("e5-small", "minilm-l6"):
        c = by[k]
        assert c["result"]["index"]["fingerprint"]["embedder"]["name"] == k
        assert c["build"]["vectors"] > 0 and c["build"]["size_mb"] > 0
        assert c["latency"]["samples"] == 60 and c["latency"]["total"]["p95"] >= c["latency"]["total"]["p50"] > 0
        assert c["latency"]["embed"]["p50"] > 0
        assert c["threshold_fitted"] and c["result"]["config"]["threshold"] == c["threshold"]
        assert c["result"]["gate"]["probes"] == 12
        assert set(c["result"]["by_level"]) >= {"L0", "L1", "XL", "L2", "L3"}
    (pair,) = demo_ab["pairs"]
    assert (pair["a"], pair["b"], pair["n"]) == ("e5-small", "minilm-l6", 48)
    h = pair["metrics"]["hit@5"]
    assert h["delta_questions"] == round((h["b"] - h["a"]) * 48)
    # wins and losses carry the gold's rank on each side, and agree with the per-question results
    qa = {q["id"]: q for q in by["e5-small"]["result"]["per_query"]}
    for w in pair["b_wins"]:
        assert (w["rank_b"] or 99) < (w["rank_a"] or 99) and qa[w["id"]]["first_rank"] == w["rank_a"]
    for lost in pair["b_loses"]:
        assert (lost["rank_b"] or 99) > (lost["rank_a"] or 99)
    assert len(pair["b_wins"]) + len(pair["b_loses"]) + pair["ties"] == 48


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
    assert doc["kind"] == "ab" and doc["data"]["pairs"][0]["n"] == 48
    page = tmp_path / "ab.html"
    emit(rep, "html", page)
    check = check_page(page, tmp_path / "ab.png", height=6000)
    # two score histograms (one per finished candidate) and the cost-quality plot
    assert check.svg_count == 3 and check.rendered_svgs == 3
    assert check.requests == ()


@pytest.mark.slow
def test_gold_ids_missing_from_the_index_fail_that_candidate_and_keep_the_report(demo_ab, ab_work, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nquestions:\n  - {id: B1, level: L0, query: 김치찌개, gold: [life/cooking/kimchi-jjigae]}\n"
                   "  - {id: B2, level: L0, query: 없는 노트, gold: [no/such-note]}\n", encoding="utf-8")
    p = ABParams(("e5-small", "minilm-l6"), tune=load_gold(bad), eval=load_gold(bad), vault=str(DEMO_VAULT),
                 work=str(ab_work))
    d = run_ab(p)
    assert [c["status"] for c in d["candidates"]] == ["failed", "failed"]
    assert "gold ids missing" in d["candidates"][0]["message"] and "no/such-note" in d["candidates"][0]["message"]
    assert d["candidates"][0]["build"]["reused"] is True       # the finished indexes stay where they were
    assert ab_report(d).verdict.startswith("no comparison: 0 candidate(s) finished")


def _ab_cmd(work: Path, out: Path, embedders="e5-small,minilm-l6") -> list:
    return [sys.executable, "-c", "from tuner.cli import main; main()", "ab", "--embedders", embedders,
            "--gold", str(TUNE), "--holdout", str(HOLDOUT), "--vault", str(DEMO_VAULT), "--work", str(work),
            "--format", "json", "--out", str(out), "--progress"]


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
def test_a_disk_that_fills_fails_that_build_and_leaves_no_half_index(demo_ab, ab_work, tmp_path):
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
    proc = subprocess.run(_ab_cmd(work, out), preexec_fn=cap, env=_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads(out.read_text(encoding="utf-8"))["data"]
    by = {c["label"]: c for c in d["candidates"]}
    assert by["e5-small"]["status"] == "ok"
    assert by["minilm-l6"]["status"] == "failed" and "the disk filled while building" in by["minilm-l6"]["message"]
    assert "minilm-l6: failed: the disk filled" in proc.stderr
    left = sorted(p.name for p in (work / "indexes").iterdir())
    assert left == [Path(e5).name, Path(e5).name + ".build.json"] or \
        [n for n in left if "minilm" in n and not n.endswith(".lock")] == []


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_candidate_and_names_the_cut_one(demo_ab, tmp_path):
    """A real SIGINT while minilm-l6's index is being built (its embedding cache is empty here)."""
    work = tmp_path / "work"
    out = tmp_path / "r.json"
    proc = subprocess.Popen(_ab_cmd(work, out), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    deadline = time.time() + 600
    while "build minilm-l6" not in seen:
        line = proc.stderr.readline()
        assert line or proc.poll() is None, seen[-2000:]
        seen += line
        assert time.time() < deadline
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=300)[1]
    assert proc.returncode == 130, (seen + rest)[-2000:]
    d = json.loads(out.read_text(encoding="utf-8"))
    by = {c["label"]: c["status"] for c in d["data"]["candidates"]}
    assert by == {"e5-small": "ok", "minilm-l6": "cut"}
    assert d["data"]["cut"] == ["minilm-l6"] and "cut before finishing: minilm-l6" in json.dumps(d, ensure_ascii=False)
    assert not [p for p in (work / "indexes").iterdir() if "minilm" in p.name and not p.name.endswith(".lock")]
