"""One gate everywhere: the same questions (answerable and probes, demo index) decided through the
library search, `search --json`, `eval --json`, the sweep's evaluation, the A/B's evaluation, the recall
engine, `serve` /search over HTTP and `mcp` search_notes give the same decision, probability and gate."""

import asyncio
import json
import sys

import pytest
import yaml
from click.testing import CliRunner

from search_core.config import SearchConfig
from search_core.gate.model import DEFAULT_GATE_FILE, DEFAULT_GATE_SOURCE, load_gate
from search_core.search.pipeline import Searcher
from tests.helpers import ROOT
from tests.helpers.http import post, running
from tests.helpers.sweeps import DEMO_TUNE
from tuner.cli import main
from tuner.data.gold import load_gold


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
    """Six answerable questions (one per level where there is one) and six probes of the demo tuning set
    (every gold note of it is in demo_mini_index)."""
    data = yaml.safe_load(DEMO_TUNE.read_text(encoding="utf-8"))
    answerable, probes, levels = [], [], set()
    for q in data["questions"]:
        if q["level"] == "probe":
            if len(probes) < 6:
                probes.append(q)
        elif len(answerable) < 6 and (q["level"] not in levels or len(levels) >= 4):
            levels.add(q["level"])
            answerable.append(q)
    out = tmp_path_factory.mktemp("one-gate") / "questions.yaml"
    out.write_text(yaml.safe_dump({"name": "one-gate", "vault": data["vault"], "questions": answerable + probes},
                                  allow_unicode=True), encoding="utf-8")
    return out


def _decision(gate: dict) -> tuple:
    """What every path must agree on: inject, the probability (4 places), and which gate decided."""
    d = gate["decided_by"] if "decided_by" in gate else gate
    p = d["probability"]
    return bool(d["inject"]), None if p is None else round(p, 4), d["kind"], d["source"], round(d["threshold"], 4)


def _library(db, gold):
    s = Searcher(db)
    cfg = SearchConfig(embedder=s.embedder_name)
    return {q.id: _decision(s.search(q.query, cfg).gate.decision.to_json()) for q in gold.questions}


def _search_cli(db, gold):
    out = {}
    for q in gold.questions:
        r = CliRunner().invoke(main, ["search", q.query, "--db", str(db), "--json"])
        assert r.exit_code == 0, r.output
        out[q.id] = _decision(json.loads(r.output)["gate"])
    return out


def _eval_cli(db, gold_path, tmp_path):
    r = CliRunner().invoke(main, ["eval", "--db", str(db), "--gold", str(gold_path), "--json", "--no-audit",
                                  "--timing-samples", "0", "--out", str(tmp_path / "evals")])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["per_query"]
    assert all(q["gate_probability"] is None if q["gate"]["probability"] is None
               else round(q["gate_probability"], 4) == q["gate"]["probability"] for q in rows)
    return {q["id"]: _decision(q["gate"]) for q in rows}


def _sweep_eval(db, gold, tmp_path):
    from tuner.evaluation.cost_model import CostStore
    from tuner.sweep.workbench import Workbench
    bench = Workbench(db, index_dir=tmp_path / "indexes", cost_store=CostStore(tmp_path / "costs"),
                      calibration_queries=[q.query for q in gold.questions[:4]])
    cfg = SearchConfig(embedder=bench.base_embedder)
    model = bench.fit_gate_for(cfg, gold)          # what the sweep does before its first round
    assert model is not None and not bench.gate_fitted     # the shipped default fits: nothing fitted here
    return {q.id: _decision(q.gate.to_json()) for q in bench.evaluate(cfg, gold).per_query}


def _ab_eval(db, gold):
    from tuner.ab.run import _regate, candidate_gate
    from tuner.evaluation.evaluate import run_queries
    s = Searcher(db)
    cfg = SearchConfig(embedder=s.embedder_name, threshold=None)
    rows = run_queries(s, gold, cfg)
    choice, cos_t, fitted = candidate_gate(s, cfg, rows, gold.name)
    assert cos_t is None and not fitted
    rows = _regate(rows, choice, cfg, s.embedder.default_threshold)
    return {r.id: _decision(r.gate.to_json()) for r in rows}


def _engine(db, tmp_path, name):
    from search_core.recall.backend import SearchBackend
    from search_core.recall.config import RecallConfig
    from search_core.recall.engine import RecallEngine
    from search_core.recall.log import RecallLog
    return RecallEngine(SearchBackend(db), RecallLog(tmp_path / f"{name}.sqlite"), RecallConfig(timeout_s=120.0))


def _recall(db, gold, tmp_path):
    """The recall engine's own decision (recall_now: the pre-search gates, the search, the log)."""
    from search_core.recall.log import read_calls
    eng = _engine(db, tmp_path, "recall-log")
    try:
        out = {}
        for q in gold.questions:
            blk = eng.recall_now(q.query, f"s-{q.id}")
            assert blk.stopped_by in (None, "threshold"), (q.id, blk.stopped_by)
            g = blk.gate
            out[q.id] = (blk.injected, None if g["probability"] is None else round(g["probability"], 4),
                         g["gate"]["kind"], g["gate"]["source"], round(g["gate"]["threshold"], 4))
    finally:
        eng.close()
    logged = read_calls(tmp_path / "recall-log.sqlite")
    assert [(bool(r["injected"]), r["features"]["gate"]["source"]) for r in logged] == \
        [(v[0], v[3]) for v in out.values()]          # the log row says which gate decided
    return out


def _serve(db, gold, tmp_path):
    out = {}
    with running(_engine(db, tmp_path, "serve-log")) as url:
        for q in gold.questions:
            status, body = post(url + "/search", {"query": q.query})
            assert status == 200, body
            out[q.id] = _decision(body["gate"])
    return out


def _mcp(db, gold, tmp_path):
    from mcp import Client, StdioServerParameters
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from tuner.cli import main; main()", "mcp", "--db", str(db), "--log", str(tmp_path / "mcp.sqlite"),
              "--timeout", "120"], env={"PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}, cwd=str(tmp_path))

    async def session():
        async with Client(params, read_timeout_seconds=300) as c:
            return {q.id: (await c.call_tool("search_notes", {"query": q.query})).structured_content
                    for q in gold.questions}

    return {qid: _decision(res["gate"]) for qid, res in asyncio.run(session()).items()}


def test_every_path_decides_with_the_same_gate(demo_mini_index, questions, tmp_path):
    # e5-small: the shipped default gate decides only for it, and serve and mcp run in processes of their own;
    # the tuning set's gold notes are enough for its questions
    demo_index = demo_mini_index
    gold = load_gold(questions)
    assert {q.level == "probe" for q in gold.questions} == {True, False}
    paths = {"library": _library(demo_index, gold), "search --json": _search_cli(demo_index, gold),
             "eval --json": _eval_cli(demo_index, questions, tmp_path),
             "sweep evaluation": _sweep_eval(demo_index, gold, tmp_path), "ab evaluation": _ab_eval(demo_index, gold),
             "recall engine": _recall(demo_index, gold, tmp_path), "serve /search": _serve(demo_index, gold, tmp_path),
             "mcp search_notes": _mcp(demo_index, gold, tmp_path)}
    want = paths["library"]
    default = DEFAULT_GATE_SOURCE
    assert {v[2:] for v in want.values()} == {("model", default, round(load_gate(DEFAULT_GATE_FILE).threshold, 4))}
    assert len({v[0] for v in want.values()}) == 2          # the set has both decisions, so agreement means something
    for name, got in paths.items():
        assert got == want, (name, {k: (want[k], got.get(k)) for k in want if got.get(k) != want[k]})
