"""Promotion only when the holdout held; every decision recorded; rollback restores the previous pair;
`search` and `eval` read runs/active.toml when no --config is given."""

import json

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.config import ADDED_LATER, SearchConfig
from tuner.cli import main
from tuner.evaluation.compare import Comparison, PairedMetric
from tuner.sweep.summary import Figures, HoldoutCheck
from tuner.promotion.promote import History, decide_promotion, holdout_verdict, read_active, resolve_search_config, rollback

START = SearchConfig(threshold=0.8)
WIN = SearchConfig(threshold=0.8, w_sparse=0.9)


def _holdout(a_hit, b_hit, n=20, verdicts=None, score100=None):
    """A holdout check with these hit@5 rates; verdicts: metric -> "A better" for the significant ones;
    score100: (start, final) when the sweep's objective was the score (else MRR)."""
    verdicts = verdicts or {}
    metrics = {m: PairedMetric(0.5, 0.5, 0.0, 0.0, 0.9 if m not in verdicts else 0.01, (-0.1, 0.1), m not in verdicts)
               for m in ("hit@5", "mrr", "ndcg@10", "p@5", "recall@5")}
    obj, (a_obj, b_obj) = ("score100", score100) if score100 else ("mrr", (0.5, 0.5))
    return HoldoutCheck("hold", Figures(a_hit, obj, a_obj, 0.5, True), Figures(b_hit, obj, b_obj, 0.5, True),
                        0.0, 0.0, False, not verdicts, Comparison("hold", n, "a", "b", metrics, 0, n, 0, (), 1 / n))


def test_rule_promotes_only_a_change_that_held():
    assert holdout_verdict(START, WIN, _holdout(0.80, 0.80)).promote
    assert holdout_verdict(START, WIN, _holdout(0.80, 0.85)).promote
    v = holdout_verdict(START, WIN, _holdout(0.80, 0.75))
    assert not v.promote and "1 of 20 questions lost" in v.reason.text()
    v = holdout_verdict(START, WIN, _holdout(0.80, 0.80, verdicts={"mrr": "A better"}))
    assert not v.promote and "significantly worse on mrr" in v.reason.text()
    assert "no holdout" in holdout_verdict(START, WIN, None).reason.text()
    assert "starting config" in holdout_verdict(START, START.replace(), _holdout(0.8, 0.9)).reason.text()


def test_a_holdout_objective_that_fell_within_noise_still_promotes_but_says_so():
    v = holdout_verdict(START, WIN, _holdout(0.80, 0.80, score100=(57.90, 57.19)))
    assert v.promote and "holdout score100 fell 57.90 -> 57.19, within noise" in v.reason.text()
    assert "fell" not in holdout_verdict(START, WIN, _holdout(0.80, 0.80, score100=(57.90, 58.40))).reason.text()


def test_promote_decline_history_and_rollback(demo_db, tmp_path):
    runs = tmp_path / "runs"
    d = decide_promotion("s1", START, WIN, _holdout(0.8, 0.75), demo_db, runs)
    assert not d.promoted and read_active(runs) is None          # declined: nothing active
    p1 = decide_promotion("s2", START, WIN, _holdout(0.8, 0.85), demo_db, runs)
    act = read_active(runs)
    assert p1.promoted and act.config.w_sparse == 0.9 and act.source == "sweep s2"
    assert act.index.parent == runs / "active-indexes" and act.index.exists()
    third = SearchConfig(threshold=0.8, w_sparse=0.9, rrf_k=10)
    p2 = decide_promotion("s3", WIN, third, _holdout(0.8, 0.8), demo_db, runs)
    assert read_active(runs).config.rrf_k == 10
    kinds = [(e.id, e.kind, e.sweep) for e in History(runs).events()]
    assert kinds == [(d.event, "declined", "s1"), (p1.event, "promoted", "s2"), (p2.event, "promoted", "s3")]
    r = rollback(None, runs)                                        # undo the latest: back to WIN
    assert r.undid == p2.event and read_active(runs).config.rrf_k == SearchConfig().rrf_k
    with pytest.raises(SearchCoreError, match="already rolled back"):
        rollback(p2.event, runs)
    with pytest.raises(SearchCoreError, match=r"is not a promotion; promotions that can be rolled back: #2, #3"):
        rollback(d.event, runs)
    rollback(p1.event, runs)                                     # undo the first: no active config at all
    assert read_active(runs) is None
    with pytest.raises(SearchCoreError, match="nothing to roll back"):
        rollback(None, runs)


def test_search_and_eval_read_the_active_config(demo_db, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("AUTORESEARCH_RUNS", str(runs))
    cli = CliRunner()
    with pytest.raises(SearchCoreError, match="pass --db FILE, or set AUTORESEARCH_DB"):
        resolve_search_config(None, None)
    decide_promotion("s2", START, SearchConfig(threshold=0.99, top_k=3), _holdout(0.8, 0.85), demo_db)
    # no --db, no --config: the active index and config (top_k 3, threshold 0.99)
    r = cli.invoke(main, ["search", "GraphRAG 커뮤니티 요약", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert len(out["results"]) == 3 and out["gate"]["threshold"] == 0.99
    # --config wins over the active one
    cfgf = tmp_path / "c.toml"
    cfgf.write_text("[search]\ntop_k = 2\n")
    out = json.loads(cli.invoke(main, ["search", "GraphRAG", "--db", str(demo_db), "--config", str(cfgf),
                                       "--json"]).output)
    assert len(out["results"]) == 2
    r = cli.invoke(main, ["eval", "--gold", str(tmp_path.parent / "x.yaml")])
    assert "does not exist" in r.output
    # an index built by another embedder than the active config's is refused, naming the fix
    monkeypatch.setattr("tuner.promotion.promote.read_active",
                        lambda runs=None: __import__("tuner.promotion.promote").promotion.promote.Active(
                            SearchConfig(embedder="minilm-l6"), None, "sweep x"))
    r = cli.invoke(main, ["search", "GraphRAG", "--db", str(demo_db)])
    assert r.exit_code != 0 and "uses embedder minilm-l6 but" in r.output and "drop --db" in r.output


def test_a_probability_threshold_is_promoted_only_with_the_gate_model_it_was_tuned_on(demo_db, tmp_path):
    from search_core.gate.model import DEFAULT_GATE_FILE, choose_gate, load_gate, sidecar_path
    from search_core.search.pipeline import Searcher
    win = SearchConfig(threshold=0.8, w_sparse=0.9, gate_threshold=0.7)
    # no model: the threshold would be read against whatever gate the index has, so it stays behind
    d = decide_promotion("s1", START, win, _holdout(0.8, 0.85), demo_db, tmp_path / "a")
    assert d.promoted and "gate_threshold was not promoted" in d.reason
    assert read_active(tmp_path / "a").config.gate_threshold is None
    # with the sweep's model: installed beside the promoted index, where search finds it (the shipped model's
    # coefficients, fitted for this index's embedder: which file search picks is what is tested here)
    import dataclasses
    model = dataclasses.replace(load_gate(DEFAULT_GATE_FILE), fingerprint=Searcher(demo_db).fingerprint["embedder"])
    d = decide_promotion("s2", START, win, _holdout(0.8, 0.85), demo_db, tmp_path / "b", gate_model=model)
    active = read_active(tmp_path / "b")
    assert active.config.gate_threshold == 0.7 and "not promoted" not in d.reason
    side = sidecar_path(d.index)
    assert load_gate(side).as_json() == model.as_json()
    choice = choose_gate(Searcher(d.index).fingerprint, db=d.index)
    assert choice.source == str(side)


def test_rollback_puts_back_the_gate_model_the_undone_promotion_replaced(demo_db, tmp_path):
    """Two promotions of one embedder install the same index file name, each with its own gate model; undoing
    the second must leave the first's model beside the first's config, and undoing the first removes it."""
    import dataclasses
    from search_core.gate.model import DEFAULT_GATE_FILE, load_gate, sidecar_path
    runs = tmp_path / "runs"
    first_model = load_gate(DEFAULT_GATE_FILE)
    second_model = dataclasses.replace(first_model, threshold=0.123)
    win1 = SearchConfig(threshold=0.8, w_sparse=0.9, gate_threshold=0.7)
    win2 = SearchConfig(threshold=0.8, w_sparse=0.7, gate_threshold=0.5)
    d1 = decide_promotion("s1", START, win1, _holdout(0.8, 0.85), demo_db, runs, gate_model=first_model)
    d2 = decide_promotion("s2", win1, win2, _holdout(0.8, 0.85), demo_db, runs, gate_model=second_model)
    side = sidecar_path(d2.index)
    assert d1.index == d2.index and load_gate(side).threshold == 0.123
    rollback(runs=runs)
    assert read_active(runs).config.gate_threshold == 0.7
    assert load_gate(side).as_json() == first_model.as_json()
    rollback(runs=runs)
    assert read_active(runs) is None and not side.exists()


def test_a_history_written_before_the_sidecar_column_still_rolls_back(demo_db, tmp_path):
    import sqlean
    runs = tmp_path / "runs"
    runs.mkdir()
    old = sqlean.connect(str(runs / "promotions.sqlite"))
    old.execute("""CREATE TABLE events (
        id INTEGER PRIMARY KEY, created TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('promoted', 'declined', 'rollback')),
        sweep TEXT, config TEXT, index_path TEXT, previous_config TEXT, previous_index TEXT,
        reason TEXT NOT NULL, undoes INTEGER)""")
    recorded = {k: v for k, v in WIN.as_dict().items() if k not in ADDED_LATER}     # before the later keys
    old.execute("INSERT INTO events(created, kind, sweep, config, index_path, reason) VALUES "
                "('2026-11-01T00:00:00', 'promoted', 's0', ?, ?, 'held')", (json.dumps(recorded), str(demo_db)))
    old.commit()
    old.close()
    first = History(runs).events()[0]
    assert first.config.search == SearchConfig.from_stored(recorded) and first.config.search.w_ngram == 0.0
    assert first.sidecar_before is None and first.to_json()["config"] == recorded     # printed as stored
    r = CliRunner().invoke(main, ["config", "history", "--runs", str(runs), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["events"][0]["config"] == recorded, r.output
    out = rollback(runs=runs)
    assert out.undid == 1 and read_active(runs) is None and out.active is None
    assert [e.kind for e in History(runs).events()] == ["promoted", "rollback"]


def test_the_gate_the_sweep_decided_with_is_installed_with_the_promoted_index(demo_db, tmp_path):
    """A winner measured with a gate the sweep fitted (no gate file fits its index) is gated by that model after
    promotion, gate_threshold or not: the copy in active-indexes/ has no sidecar of its own, and without the file
    `search` would gate it with the cosine gate. The shipped default is not pinned: the index follows it."""
    import dataclasses
    from search_core.gate.model import DEFAULT_GATE_FILE, choose_gate, load_gate, sidecar_path
    from search_core.search.pipeline import Searcher
    win = SearchConfig(threshold=0.8, w_sparse=0.9)            # no gate_threshold
    s = Searcher(demo_db)
    fp = s.fingerprint
    s.close()
    fitted = dataclasses.replace(load_gate(DEFAULT_GATE_FILE), fingerprint=fp["embedder"], threshold=0.3,
                                 fitted_on={"gold": "demo-tune", "note": "fitted by the sweep"})
    d = decide_promotion("s1", START, win, _holdout(0.8, 0.85), demo_db, tmp_path / "a", gate_model=fitted)
    side = sidecar_path(d.index)
    assert d.promoted and load_gate(side).as_json() == fitted.as_json()
    assert choose_gate(fp, db=d.index).source == str(side)
    d = decide_promotion("s2", START, win, _holdout(0.8, 0.85), demo_db, tmp_path / "b",
                         gate_model=load_gate(DEFAULT_GATE_FILE))
    assert d.promoted and not sidecar_path(d.index).exists()


def test_a_promotion_over_an_installed_index_that_a_server_writes_is_what_a_fresh_process_reads(tmp_path):
    """A server (here: a connection that holds the installed copy and has written to it, as a watcher does)
    keeps its -wal and -shm beside the file. The next promotion of the same embedder's index lands in that
    same file: a fresh process must then read the new index, not the old one through the old -wal."""
    import os
    import subprocess
    import sys

    from search_core.index.store import connect
    from tests.helpers import ROOT

    def scratch(folder, rows, extra_table):
        p = tmp_path / folder / "e5-small-abc.sqlite"
        p.parent.mkdir()
        c = connect(p)
        c.execute("CREATE TABLE t (x)")
        c.executemany("INSERT INTO t VALUES (?)", [(f"{folder}{i}",) for i in range(rows)])
        if extra_table:
            c.execute("CREATE TABLE u (y)")
        c.close()
        return p

    runs = tmp_path / "runs"
    first, second = scratch("sweep1", 50, False), scratch("sweep2", 200, True)
    installed = decide_promotion("s1", START, WIN, _holdout(0.8, 0.85), first, runs).index
    server = connect(installed)
    try:
        server.execute("PRAGMA wal_autocheckpoint = 0")       # the watcher's last update still in the -wal
        server.execute("INSERT INTO t VALUES ('saved while serving')")
        assert decide_promotion("s2", START, WIN, _holdout(0.8, 0.85), second, runs).index == installed
        read = ("import sys; from search_core.index.store import connect; c = connect(sys.argv[1]); "
                "print(c.execute('SELECT count(*) FROM t').fetchone()[0], "
                "','.join(sorted(r[0] for r in c.execute('SELECT name FROM sqlite_master'))))")
        fresh = subprocess.run([sys.executable, "-c", read, installed], cwd=ROOT, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert (fresh.returncode, fresh.stdout) == (0, "200 t,u\n"), \
            f"a fresh process does not read the promoted index: {fresh.stdout}{fresh.stderr[-300:]}"
        assert server.execute("SELECT count(*) FROM t").fetchone()[0] == 200   # the server sees it as a commit
    finally:
        server.close()


def test_an_active_config_written_before_a_setting_existed_runs_as_it_was_promoted(tmp_path):
    # a promoted config lacks the keys added since: it ran without the n-gram list and the query expansion,
    # and keeps doing so (a hand-written --config, with no [active] table, gets today's defaults)
    from search_core.config import SearchConfig, load_config
    from tuner.promotion.promote import read_active
    (tmp_path / "active.toml").write_text('[search]\nrrf_k = 60\n\n[active]\nsource = "sweep s1"\n', encoding="utf-8")
    cfg = read_active(tmp_path).config
    assert (cfg.w_ngram, cfg.pair_terms, cfg.rrf_k) == (0.0, 0, 60)
    (tmp_path / "mine.toml").write_text("rrf_k = 60\n", encoding="utf-8")
    mine = load_config(tmp_path / "mine.toml")
    assert (mine.w_ngram, mine.pair_terms) == (SearchConfig().w_ngram, SearchConfig().pair_terms)


def test_every_promotion_verdict_is_a_value_of_the_table_and_each_kind_is_reached():
    """The rule's reasons come from PROMOTION_VERDICTS (its wording and the history row's text from one place);
    every kind but the gate clause is the verdict of some holdout below."""
    from tuner.promotion.verdicts import GATE_NOT_PROMOTED, PROMOTION_VERDICTS
    cases = [(START, START.replace(), _holdout(0.8, 0.9)), (START, WIN, None), (START, WIN, _holdout(0.80, 0.75)),
             (START, WIN, _holdout(0.80, 0.80, verdicts={"mrr": "A better"})), (START, WIN, _holdout(0.80, 0.85)),
             (START, WIN, _holdout(0.80, 0.80, score100=(57.90, 57.19)))]
    kinds = set()
    for start, final, holdout in cases:
        v = holdout_verdict(start, final, holdout)
        assert v.reason.table is PROMOTION_VERDICTS, v
        kinds.add(v.reason.kind)
    assert kinds | {GATE_NOT_PROMOTED} == set(PROMOTION_VERDICTS)
