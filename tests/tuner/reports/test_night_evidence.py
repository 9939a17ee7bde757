"""Which evidence decided a kept change, from two real evaluations of the demo vault (e5-small): the hand-written
tuning questions plus the questions `gold make` cuts from the vault, from the demo's hand-set start (vector
search alone) to the keyword channel switched on."""

import dataclasses

import pytest

from search_core.config import load_config
from search_core.search.pipeline import Searcher
from tests.helpers import DEMO_VAULT
from tests.helpers.sweeps import DEMO_TUNE
from tuner.data.bundled import demo_start
from tuner.data.gold import load_gold
from tuner.data.night_gold import refresh_vault_questions, write_night_gold
from tuner.evaluation.evaluate import evaluate
from tuner.evaluation.score import ScoreConfig
from tuner.ledger.round import Round
from tuner.ledger.schema import RoundDecision
from tuner.reports.night_evidence import kept_evidence
from tuner.sweep.evidence import ranking_evidence
from tuner.stored_config import StoredConfig


@pytest.mark.slow
def test_the_keyword_channel_is_decided_by_the_vaults_questions_where_the_hand_written_alone_cannot(tmp_path,
                                                                                                    demo_index_e5):
    s = Searcher(demo_index_e5)
    made = refresh_vault_questions(DEMO_VAULT, tmp_path, n=200, seed=0)
    gold = load_gold(write_night_gold([DEMO_TUNE, made.path], tmp_path, known_ids=s.view.notes.keys()).path)
    start = load_config(demo_start()).replace(embedder=s.embedder_name)
    base = evaluate(s, gold, start, audit=False)
    cand = evaluate(s, gold, start.replace(w_sparse=0.3), audit=False)
    weights = ScoreConfig().quality_weights
    cfg = start.replace(w_sparse=0.3)
    row = Round("demo", 2, "w_sparse", 0.0, 0.3, StoredConfig(cfg), cfg.config_hash(), start.config_hash(), None, cand,
                None, RoundDecision.KEPT, "")
    ev = kept_evidence(row, base, cand, "score100", weights, 0.05)
    pooled = ranking_evidence(base, cand, "score100", weights)
    assert [k.source for k in ev.by_kind] == ["hand", "vault"]
    assert (sum(k.up for k in ev.by_kind), sum(k.down for k in ev.by_kind)) == (pooled.better, pooled.worse)
    hand = next(k for k in ev.by_kind if k.source == "hand")
    vault = next(k for k in ev.by_kind if k.source == "vault")
    # the 24 hand-written questions alone cannot tell this gain from noise; the vault's 200 can
    assert hand.n == 24 and hand.p_value >= 0.05 and vault.p_value < 0.05 and pooled.p_value < 0.05
    assert ev.decided_by == ("vault",) and ev.p_value == pooled.p_value
    assert ev.why.startswith("the questions from the vault's text (the hand-written alone: p = ")
    assert ev.guard.startswith(f"24 hand-written or labelled questions ({vault.n} from the vault's text set aside)")
    # a change that moved no rank is decided on its objective alone, whatever the kinds
    same = kept_evidence(dataclasses.replace(row, variable="gate_threshold"), base, base, "score100", weights, 0.05)
    assert same.decided_by == ("objective",) and same.p_value is None
    assert same.why == ("the gate's decisions on the questions and probes (the round's reason says how many flipped): "
                        "no question's rank moved")
    # with the hand-written questions alone, they decide
    hand_only = [q for q in base.per_query if q.source == "hand"]
    b1, c1 = (dataclasses.replace(r, per_query=[q for q in r.per_query if q.source == "hand"]) for r in (base, cand))
    assert len(hand_only) == len(b1.per_query)
    alone = kept_evidence(row, b1, c1, "score100", weights, 0.05)
    assert alone.decided_by == ("hand",) and alone.why.startswith("the hand-written questions (all kinds together: ")
    # the move to the shipped default is kept unless shown worse: no question set decided it
    moved = dataclasses.replace(row, variable="default:w_sparse", old=[0.0], new=[0.3])
    default = kept_evidence(moved, base, cand, "score100", weights, 0.05)
    assert default.decided_by == ("default",) and default.p_value == pooled.p_value
    # this gain is beyond noise (pooled p < 0.05), so the report says better, not merely "not worse"
    assert default.why.startswith("the shipped default, which the tuning questions show better (all kinds ")
    within = kept_evidence(moved, base, cand, "score100", weights, pooled.p_value / 2)
    assert within.why.startswith("the shipped default, which the tuning questions did not show worse (all kinds ")


@pytest.mark.slow
def test_the_morning_report_says_when_the_vault_gave_no_anchor_question_and_what_that_means(tmp_path, demo_db):
    """A night on the demo vault's lookups alone (headings and aliases, no anchor: what a vault whose links sit
    only in lists gives), from the hand-set start: the report's evidence section says the set held no anchor,
    which kinds it held, and which kept changes those lookups alone decided."""
    from search_core.config import load_config
    from tests.helpers.sweeps import FUSION_SPACE, run_sweep
    from tuner.data.vault_questions import write_vault_questions
    from tuner.reports import render
    from tuner.reports.night_evidence import night_evidence
    from tuner.reports.sweep import sweep_report
    gold = tmp_path / "lookups.yaml"
    vq = write_vault_questions(DEMO_VAULT, gold, n=60, seed=0, kinds=("heading", "alias"))
    assert vq.lookups_only() and "anchor" not in vq.by_kind()
    summary, rounds = run_sweep(tmp_path, demo_db, FUSION_SPACE, 4, gold=gold, start=load_config(demo_start()))
    lg_path = tmp_path / "l.sqlite"
    from tuner.ledger.ledger import Ledger
    lg = Ledger(lg_path)
    try:
        ev = night_evidence(lg.sweep(summary.sweep), lg.rounds(summary.sweep))
    finally:
        lg.close()
    assert ev.made_kinds == vq.by_kind()
    said = ev.lookups_only()
    counts = ", ".join(f"{k} {n}" for k, n in vq.by_kind().items())
    assert said.startswith(f"The vault gave no anchor question ({counts}): no note of the vault refers to another ")
    by_lookups = [k for k in ev.kept if k.decided_by == ("vault",)]
    if by_lookups:
        assert f"{len(by_lookups)} of the {len(ev.kept)} changes kept (" in said and "check them on questions" in said
    else:
        assert said.endswith("no change the night kept was decided by them alone.")
    md = render(sweep_report(lg_path, summary.sweep, tmp_path / "runs"), "md")
    section = md.split("## The evidence the night stood on", 1)[1].split("\n## ", 1)[0]
    assert said in section
    # a set with anchors in it says nothing of the kind; nor does a night without the vault's questions
    assert dataclasses.replace(ev, made_kinds={**ev.made_kinds, "anchor": 1}).lookups_only() is None
    assert dataclasses.replace(ev, made_kinds={**ev.made_kinds, "cloze": 30}).lookups_only() is None   # sentences
    assert dataclasses.replace(ev, made_kinds={}).lookups_only() is None
