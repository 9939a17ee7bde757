import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from search_core.index.store import connect, get_meta
from tuner.cli import main
from tuner.ledger.ledger import Ledger
from tuner.sweep.loop import Sweep, SweepParams
from tuner.sweep.summary import HoldoutCheck, SweepSummary
from tuner.sweep.evidence import left_top5
from tuner.sweep.variables import moved_variables
from tuner.sweep.workbench import IndexVerificationError, Workbench, verify_index
from tests.helpers import DEMO_VAULT, ROOT, decisions
from tests.helpers.sweeps import FUSION_SPACE

TUNE = str(ROOT / "experiments/gold/demo-tune.yaml")
HOLD = str(ROOT / "experiments/gold/demo-holdout.yaml")

MODEL_SPACE = """
[embedder]
kind = "categorical"
choices = ["e5-small", "minilm-l6", "BAAI/bge-m3"]
[reranker]
kind = "categorical"
choices = ["none", "BAAI/bge-reranker-base"]
"""


def space(tmp_path, text, name="space.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def run_sweep(tmp_path, demo_index, space_text, rounds, seed=0, holdout=None, ledger="ledger.sqlite"):
    lg = Ledger(tmp_path / ledger)
    # one timed pass: these sweeps are about fusion decisions; repeated timing is tested where it decides
    p = SweepParams(db=str(demo_index), gold=TUNE, space=space(tmp_path, space_text), rounds=rounds, seed=seed,
                    holdout=holdout, vault=str(DEMO_VAULT), index_dir=str(demo_index.parent / "indexes"),
                    timing_samples=0)
    sw = Sweep(p, lg)
    summary = sw.run()
    return sw, summary, lg.rounds(sw.id)


def test_sweep_keeps_and_rejects_with_reasons_and_reports_holdout(demo_index, tmp_path):
    sw, summary, rounds = run_sweep(tmp_path, demo_index, FUSION_SPACE, 25, holdout=HOLD)
    assert [r.round for r in rounds] == list(range(26))
    assert rounds[0].variable == "(start)" and rounds[0].decision == "kept"
    decisions = {r.decision for r in rounds[1:]}
    assert decisions & {"rejected:no_gain", "rejected:hit5_regressed"}
    assert all(r.reason for r in rounds)
    # each candidate differs from its baseline in exactly the named variable, or the two a pair round names
    by_hash = {r.config_hash: r.config.to_json() for r in rounds}
    for r in rounds[1:]:
        if r.decision == "unavailable":      # the cosine threshold while a gate model decides: nothing moved
            continue
        base = by_hash[r.baseline_hash]
        diff = {k for k in base if base[k] != r.config.to_json()[k]}
        assert diff == set(moved_variables(r.variable)), (r.variable, diff)
    # no candidate evaluated twice against the same baseline
    seen = [(r.baseline_hash, r.variable, json.dumps(r.new)) for r in rounds[1:]]
    assert len(seen) == len(set(seen))
    # kept rounds never lost a question from the top 5 against their baseline; hit@5 rejections did
    kept = {r.config_hash: r.result for r in rounds if r.decision == "kept"}
    for r in rounds[1:]:
        if r.decision == "kept":
            assert not left_top5(kept[r.baseline_hash], r.result), r.reason
            assert r.result.overall["hit@5"] >= kept[r.baseline_hash].overall["hit@5"]
        if r.decision == "rejected:hit5_regressed":
            assert left_top5(kept[r.baseline_hash], r.result), r.reason
    h = summary.holdout
    assert h.gold == "demo-holdout" and 0 <= h.compare.metrics["hit@5"].p_value <= 1
    assert isinstance(h.holdout_regressed, bool)
    # the ledger keeps both as JSON text (the holdout's under the hash chain): they read back into records that
    # write the same text
    conn = connect(tmp_path / "ledger.sqlite", readonly=True)
    (held,) = conn.execute("SELECT result FROM holdout").fetchone()
    (kept,) = conn.execute("SELECT summary FROM sweeps").fetchone()
    conn.close()
    assert json.dumps(HoldoutCheck.from_json(json.loads(held)).to_json(), ensure_ascii=False) == held
    assert json.dumps(SweepSummary.from_json(json.loads(kept)).to_json(), ensure_ascii=False) == kept
    assert kept == json.dumps(dataclasses.replace(summary, status=None).to_json(), ensure_ascii=False)


@pytest.mark.slow
def test_model_rounds_build_their_own_index_log_unavailable_and_decide_alike_twice(demo_mini_index, tmp_path,
                                                                                   monkeypatch):
    """On the demo tuning set's own notes (a quarter of the vault: minilm-l6 indexes it in seconds). The
    second run with the same seed finds the minilm index built and must make the same decisions, though
    its embedder round is timed again."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    vault = demo_mini_index.parent / "vault"
    index_dir = demo_mini_index.parent / "indexes"
    runs = []
    for name in ("a", "b"):
        lg = Ledger(tmp_path / f"{name}.sqlite")
        p = SweepParams(db=str(demo_mini_index), gold=TUNE, space=space(tmp_path, MODEL_SPACE), rounds=4, seed=0,
                        vault=str(vault), index_dir=str(index_dir))
        sw = Sweep(p, lg)
        sw.run()
        runs.append(lg.rounds(sw.id))
    rounds = runs[0]
    by_new = {r.new: r for r in rounds[1:]}
    minilm = by_new["minilm-l6"]
    assert minilm.decision in {"kept", "rejected:hit5_regressed", "rejected:no_gain"}
    assert minilm.search_config.threshold != rounds[0].search_config.threshold    # the gate was re-fitted
    # charged with minilm's own unit costs (calibrated when its index was built), not e5's
    charge, start_charge = minilm.result.latency_charge, rounds[0].result.latency_charge
    assert charge.by_cost_model and charge.calibration["embedder"] == "minilm-l6"
    assert start_charge.calibration["embedder"] == "e5-small"
    assert charge.calibration["key"] != start_charge.calibration["key"]
    # ...and the gate model too, for minilm's own scores: the round is judged with it
    model = sw.bench.gate_models[("minilm-l6", "none")]
    assert model is not None and model.fingerprint["embedder"]["name"] == "minilm-l6"
    assert minilm.search_config.gate_threshold is not None
    assert all(q.gate_probability is not None for q in minilm.result.per_query)
    # models this machine cannot run are named before round 1 and never spend a round
    assert "BAAI/bge-m3" not in by_new and "BAAI/bge-reranker-base" not in by_new
    assert "huggingface-cli download BAAI/bge-m3" in sw.not_here["BAAI/bge-m3"]
    assert "BAAI/bge-reranker-base" in sw.not_here
    key = lambda rows: [(r.variable, r.new, r.decision) for r in rows]
    assert key(runs[0]) == key(runs[1])
    # the minilm index is its own file, built by minilm alone; the e5 index was never touched
    minilm_db = next(index_dir.glob("minilm-l6-*.sqlite"))
    verify_index(minilm_db, "minilm-l6")                 # built by minilm alone: no IndexVerificationError
    assert get_meta(connect(minilm_db), "fingerprint")["embedder"]["name"] == "minilm-l6"
    assert get_meta(connect(demo_mini_index), "fingerprint")["embedder"]["name"] == "e5-small"
    # swapping back to a model costs a fraction of the first time: cache + incremental index
    wb = Workbench(demo_mini_index, vault=str(vault), index_dir=str(index_dir))
    _, again = wb.searcher_for("minilm-l6")
    assert again < max(minilm.reindex_s, 1.0)


def test_verify_index_catches_a_mixed_index(small_index_e5):
    c = connect(small_index_e5)
    c.execute("INSERT INTO chunk_vec(rowid, embedding) VALUES (99999, ?)", (bytes(384 * 4),))
    c.close()
    with pytest.raises(IndexVerificationError, match="orphaned"):
        verify_index(small_index_e5, "e5-small")
    with pytest.raises(IndexVerificationError, match="built by e5-small, not minilm-l6"):
        verify_index(small_index_e5, "minilm-l6")


@pytest.mark.slow
def test_kill_9_mid_sweep_then_resume_loses_nothing(demo_index_e5, tmp_path, timed_sweep):
    """Variables with a latency cost included: depth (new channel lists), rerank_depth and the reranker with
    a real HTTP reranker on (charged per pair). Killed after the first of two cycles over the demo space's
    variables (round 10), so such rounds run before the kill and after the resume; the resumed sweep must
    decide exactly as the uninterrupted one (conftest.timed_sweep), whose cost calibration it finds under
    its runs folder, as a second night of the daemon would."""
    p = timed_sweep.params
    ledger = tmp_path / "kill.sqlite"
    shutil.copytree(Path(p.index_dir).parent / "cost-model", tmp_path / "cost-model")
    args = [sys.executable, "-m", "tuner.cli", "sweep", "--db", str(demo_index_e5), "--gold", p.gold, "--space", p.space,
            "--rounds", str(p.rounds), "--seed", str(p.seed), "--ledger", str(ledger), "--vault", str(DEMO_VAULT),
            "--config", str(timed_sweep.start)]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 900      # a bound for a very busy machine, not a timing assumption
    n = 0
    while time.time() < deadline:
        time.sleep(0.2)
        if ledger.exists():
            try:
                n = connect(ledger).execute("SELECT count(*) FROM rounds").fetchone()[0]
            except Exception:
                n = 0
            if n >= 11:
                break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 11 <= n < p.rounds + 1, "the sweep should have been killed mid-way"
    lg = Ledger(ledger)
    sid = lg.sweep().id
    before = lg.rounds(sid)
    assert [r.round for r in before] == list(range(len(before)))        # no gap, no half row
    r = subprocess.run(args[:4] + ["--db", str(demo_index_e5), "--gold", p.gold, "--ledger", str(ledger), "--resume", sid],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    after = Ledger(ledger).rounds(sid)
    assert [x.round for x in after] == list(range(p.rounds + 1))
    assert decisions(after[:len(before)]) == decisions(before)
    resumed_timed = {x.variable for x in after[len(before):]
                     if _measured(x) is not None}
    assert resumed_timed >= {"depth"}, decisions(after)          # the resumed process timed rounds itself
    killed_timed = {x.variable for x in before
                     if _measured(x) is not None}
    assert killed_timed >= {"depth"}, decisions(before)           # and so did the killed one
    timed = {x.variable for x in after if _measured(x) is not None}
    assert timed >= {"depth", "rerank_depth"}, decisions(after)
    # charged with one calibration throughout, the one the uninterrupted sweep took
    keys = {x.result.latency_charge.calibration["key"] for x in after if x.result}
    assert keys == {x.result.latency_charge.calibration["key"] for x in timed_sweep.rounds if x.result}
    # the resumed sweep made the same decisions an uninterrupted one makes
    assert decisions(after) == decisions(timed_sweep.rounds)


def _measured(r) -> float | None:
    """The stopwatch's p95 of a round charged by the cost model (None: not timed)."""
    charge = r.result.latency_charge if r.result is not None else None
    return charge.p95_measured if charge is not None else None


def test_ledger_best_cli_and_config_round_trip(demo_index, tmp_path):
    run_sweep(tmp_path, demo_index, FUSION_SPACE, 8)
    led = str(tmp_path / "ledger.sqlite")
    r = CliRunner().invoke(main, ["ledger", "--ledger", led, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert len(data["rounds"]) == 9
    assert set(data["rounds"][1]) >= {"sweep", "round", "variable", "old", "new", "decision", "reason", "metrics"}
    best = tmp_path / "best.toml"
    r = CliRunner().invoke(main, ["best", "--ledger", led, "--out", str(best)])
    assert r.exit_code == 0 and best.exists()
    r = CliRunner().invoke(main, ["search", "GraphRAG", "--db", str(demo_index), "--config", str(best), "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["eval", "--db", str(demo_index), "--gold", TUNE, "--config", str(best),
                                  "--json", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    lg = Ledger(led)
    last_kept = [x for x in lg.rounds(lg.sweep().id) if x.decision == "kept"][-1]
    assert json.loads(r.output)["config_hash"] == last_kept.config_hash


def test_a_verb_on_a_full_disk_says_so_and_keeps_the_file_it_would_replace(demo_index, tmp_path):
    """The kernel's file-size limit answers EFBIG as a full disk answers ENOSPC; SQLite then cannot grow the
    ledger's shared-memory file and says "disk I/O error". The user gets the fix, not a traceback, and the
    file `best --out` would have replaced is whole."""
    import resource
    run_sweep(tmp_path, demo_index, FUSION_SPACE, 2)
    best = tmp_path / "best.toml"
    best.write_text("# the config I use\n", encoding="utf-8")
    (tmp_path / "ledger.sqlite-shm").unlink(missing_ok=True)

    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    proc = subprocess.run([sys.executable, "-m", "tuner.cli", "best", "--ledger", str(tmp_path / "ledger.sqlite"),
                           "--out", str(best)], cwd=ROOT, preexec_fn=cap, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "Error: the disk refused a read or write" in proc.stderr and "free space" in proc.stderr
    assert best.read_text(encoding="utf-8") == "# the config I use\n"


def test_a_set_with_no_hand_written_question_never_moves_the_entity_channel(demo_index, tmp_path):
    """Questions made from the vault name notes, which the entity channel matches by name: a night on them alone
    leaves w_entity out of its space (and says so); a set with hand-written questions turns it as before."""
    from tests.helpers.sweeps import DEMO_TUNE, run_sweep, small_gold
    from tuner.data.vault_questions import write_vault_questions
    space = ('[w_entity]\nkind = "float"\nlow = 0.0\nhigh = 0.6\nstep = 0.05\n'
             '[w_sparse]\nkind = "float"\nlow = 0.0\nhigh = 1.0\nstep = 0.05\n')
    made = tmp_path / "made.yaml"
    write_vault_questions(DEMO_VAULT, made, n=20, seed=0, anchor_share=1.0, mask_link=True)
    said = []
    _, rounds = run_sweep(tmp_path, demo_index, space, 2, gold=made, ledger="made.sqlite", progress=said.append)
    assert len(rounds) > 1 and {r.variable for r in rounds[1:]} == {"w_sparse"}
    assert any(line.startswith("w_entity left out: the tuning set has no hand-written") for line in said)
    hand = small_gold(DEMO_TUNE, tmp_path / "hand.yaml", 3)
    said.clear()
    _, rounds = run_sweep(tmp_path, demo_index, space, 2, gold=hand, ledger="hand.sqlite", progress=said.append)
    assert rounds[1].variable == "w_entity" and not any("w_entity left out" in line for line in said)
