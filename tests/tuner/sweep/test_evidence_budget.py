"""A sweep with a time budget spends it on evidence first: when its made questions cannot detect the gains the
rounds will see, it makes more from the vault before round 1, pins the grown set, and the morning report says
how the night was spent."""

import pytest

from search_core import StopRequested
from search_core.hashing import hash_tree
from tests.helpers import DEMO_VAULT
from tests.helpers.sweeps import FUSION_SPACE, hand_set_calibrations
from tuner.data.gold import load_gold
from tuner.data.vault_questions import write_vault_questions
from tuner.ledger.ledger import Ledger
from tuner.sweep.evidence_budget import SMALLEST_GAIN, Pilot, night_size, night_target, pilot_value
from tuner.sweep.loop import Sweep, SweepParams
from tuner.sweep.space import Variable

MADE = 12       # from the shipped default the demo's pilot changes gain 1-2 score100 points: 12 cannot tell them


def budgeted(tmp_path, db, budget, rounds=2):
    gold = tmp_path / "made.yaml"
    write_vault_questions(DEMO_VAULT, gold, n=MADE, seed=0)
    space = tmp_path / "space.toml"
    space.write_text(FUSION_SPACE)
    p = SweepParams(db=str(db), gold=str(gold), space=str(space), rounds=rounds, vault=str(DEMO_VAULT),
                    index_dir=str(tmp_path / "runs" / "indexes"), time_budget_s=budget)
    hand_set_calibrations(p.cost_folder())
    return p


def test_a_budgeted_sweep_grows_a_made_set_that_cannot_detect_its_gains(tmp_path, demo_index):
    from tuner.reports.render import to_markdown
    from tuner.reports.sweep import sweep_report
    p = budgeted(tmp_path, demo_index, 1e6)        # a budget no pace of this machine uses up: the size decides
    lg = Ledger(tmp_path / "l.sqlite")
    sw = Sweep(p, lg)
    step = sw.evidence_step
    assert step is not None and step.outcome == "grown", step
    assert step.questions_before == MADE and step.questions_after > MADE
    assert step.needed is not None and step.questions_after == min(step.needed, MADE + 10_000)
    assert step.detectable_after < step.detectable_before
    assert step.anchors_added > 0
    # the rounds stand on the grown set, pinned; the file it grew from is only read
    assert sw.p.gold == step.gold_after != str(p.gold)
    assert len(sw.gold.answerable()) == step.questions_after
    assert len(load_gold(p.gold).questions) == MADE
    summary = sw.run()
    info = lg.sweep(sw.id)
    assert info.params.sweep.gold == step.gold_after
    assert info.params.pins["gold"] == hash_tree(step.gold_after)
    assert info.params.evidence_step == step
    start_row = lg.rounds(sw.id)[0]
    assert sum(q.level != "probe" for q in start_row.result.per_query) == step.questions_after
    assert summary.rounds == 2
    # the morning report says how the night was spent
    text = to_markdown(sweep_report(tmp_path / "l.sqlite", sw.id))
    assert f"{MADE} -> {step.questions_after} tuning questions" in text
    assert "s making questions from the vault" in text
    # a resumed sweep stands on the grown set it was decided on, and does not grow it again
    again = Sweep(info.params.sweep, lg, sweep_id=sw.id)
    assert again.evidence_step is None and again.p.gold == step.gold_after
    lg.close()


def test_without_a_budget_or_room_in_it_the_set_is_left_as_it_is(tmp_path, demo_index):
    lg = Ledger(tmp_path / "l.sqlite")
    p = budgeted(tmp_path, demo_index, None)
    sw = Sweep(p, lg)
    assert sw.evidence_step is None and sw.p.gold == p.gold
    p = budgeted(tmp_path, demo_index, 1e-3)     # spent before the step can make anything
    sw = Sweep(p, lg)
    step = sw.evidence_step
    assert step.outcome == "no room" and step.allowed == 0, step
    assert sw.p.gold == p.gold and step.questions_after == MADE
    assert "the budget left" in step.describe()
    p = budgeted(tmp_path, demo_index, 1e6)      # the daemon stopped during the step: no question is made
    sets_before = set(tmp_path.rglob("*.yaml"))
    with pytest.raises(StopRequested):         # the step makes nothing; the start-up after it stops too
        Sweep(p, lg, stop_flag=lambda: True).run()
    assert set(tmp_path.rglob("*.yaml")) == sets_before, "a set was made after the stop"
    lg.close()


def test_a_hand_written_set_is_not_grown(tmp_path, demo_index):
    from tests.helpers.sweeps import DEMO_TUNE
    p = budgeted(tmp_path, demo_index, 1e6)
    import dataclasses
    sw = Sweep(dataclasses.replace(p, gold=str(DEMO_TUNE)), Ledger(tmp_path / "l.sqlite"))
    assert sw.evidence_step is None and sw.p.gold == str(DEMO_TUNE)


def test_how_many_questions_a_night_adds():
    # up to the size that detects the gain, to what half the remaining budget buys, to what the vault has
    assert night_size(100, 300, 0.01, 1000.0, 10_000) == (200, 50_000)
    assert night_size(100, 300, 1.0, 400.0, 10_000) == (100, 200)
    assert night_size(100, 300, 0.01, 1000.0, 40) == (40, 50_000)
    assert night_size(100, 80, 0.01, 1000.0, 500) == (0, 50_000)      # already large enough
    assert night_size(100, None, 0.01, 1000.0, 500) == (0, 50_000)    # nothing to size for
    assert night_size(100, 300, 0.01, -5.0, 500) == (0, 0)            # the budget is spent


def test_pilot_values_go_half_way_to_the_far_end():
    w = Variable("w_sparse", "float", 0.0, 1.0, 0.05)
    assert pilot_value(w, 0.0) == 0.5 and pilot_value(w, 0.8) == 0.4 and pilot_value(w, 0.3) == 0.65
    k = Variable("rrf_k", "int", 1, 120)
    assert pilot_value(k, 60) == 90 and pilot_value(k, 2) == 61


def test_the_gain_a_night_sizes_for():
    up = [Pilot("w_sparse", 0.5, 2.0, 9.0, 8, 2), Pilot("w_entity", 0.3, 0.5, 4.0, 3, 1),
          Pilot("rrf_k", 90, 1.2, 5.0, 4, 2), Pilot("w_dense", 0.5, -0.3, 3.0, 1, 2)]
    assert night_target(up, "score100") == up[2]            # the median of those that gained (lower of an even count)
    assert night_target(up[:2], "score100") == up[1]
    # none gained, but questions moved both ways (johngrib: w_sparse 0.5 moved 14 up, 9 down, -0.04 points):
    # the smallest gain worth finding at the widest spread
    flat = [Pilot("w_sparse", 0.5, -0.04, 9.74, 14, 9), Pilot("w_entity", 0.3, -0.44, 4.76, 2, 6),
            Pilot("rrf_k", 90, 0.0, 0.0, 0, 0)]
    t = night_target(flat, "score100")
    assert (t.variable, t.gain, t.spread) == ("w_sparse", SMALLEST_GAIN["score100"], 9.74)
    assert night_target(flat, "mrr").gain == SMALLEST_GAIN["other"]
    assert night_target([Pilot("rrf_k", 90, 0.0, 0.0, 0, 0)], "score100") is None   # nothing moved
