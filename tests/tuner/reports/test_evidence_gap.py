"""A night that keeps nothing says why, with numbers from the ledger, and what evidence to add: from a real
sweep on the demo vault over a gold set whose every question sits at rank 1 under the starting config."""

import json

import numpy as np
import pytest
import yaml

from tuner.evaluation.stats import paired_randomization
from tuner.reports import render
from tuner.reports.evidence_gap import NOT_FOUND_RANK, detectable_gain
from tuner.reports.sweep import night_facts, sweep_data, sweep_report
from tests.helpers.sweeps import DEMO_TUNE, FUSION_SPACE, run_sweep


@pytest.fixture(scope="module")
def saturated_night(demo_db, tmp_path_factory):
    """Round 0 on the demo tuning set picks the questions at rank 1 under the start config (probes dropped);
    then a real 8-round fusion sweep over those alone."""
    root = tmp_path_factory.mktemp("saturated")
    _, start = run_sweep(root, demo_db, FUSION_SPACE, 0, ledger="start.sqlite")
    first = {q.id for q in start[0].result.per_query if q.level != "probe" and q.first_rank == 1}
    doc = yaml.safe_load(DEMO_TUNE.read_text(encoding="utf-8"))
    doc["questions"] = [q for q in doc["questions"] if q["id"] in first]
    doc["name"] = "demo-tune-at-rank-1"
    gold = root / "at-rank-1.yaml"
    gold.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    progress = []
    summary, rows = run_sweep(root, demo_db, FUSION_SPACE, 8, gold=gold, ledger="night.sqlite",
                              progress=progress.append)
    return {"ledger": root / "night.sqlite", "rows": rows, "summary": summary, "progress": progress,
            "gold": {q["id"]: q for q in doc["questions"]}}


def _ranks(rows) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in rows:
        for q in (r.result.per_query if r.result is not None else ()):
            if q.level != "probe":
                rank = q.first_rank if q.first_rank is not None else NOT_FOUND_RANK
                out.setdefault(q.id, []).append(min(rank, NOT_FOUND_RANK))
    return out


def test_an_empty_night_says_how_many_questions_are_saturated_and_where_configs_disagreed(saturated_night):
    rows, gold = saturated_night["rows"], saturated_night["gold"]
    assert not saturated_night["summary"].path, "the fixture night must keep nothing, or this checks nothing"
    ranks = _ranks(rows)
    n = len(ranks)
    saturated = sorted(i for i, rs in ranks.items() if max(rs) == 1)
    spread = sorted(((max(rs) - min(rs), i) for i, rs in ranks.items() if max(rs) > min(rs)),
                    key=lambda t: (-t[0], t[1]))
    assert spread, "some config must move a question off rank 1, or the disagreement list checks nothing"

    rep = sweep_report(saturated_night["ledger"])
    assert rep.verdict.startswith(f"Nothing kept: {len(saturated)} of {n} tuning questions are at rank 1 "
                                  "under every config tried")
    assert "add harder questions (" in rep.verdict and "probes)" in rep.verdict     # the set has no probes
    assert "a proposal, not decided yet" not in rep.verdict

    md = render(rep, "md")
    assert md.splitlines()[2].startswith("**Nothing kept:")
    assert "## Why nothing was kept, and what evidence would decide" in md
    assert f"| all | {n} | {len(saturated)} |" in md
    for _, qid in spread[:10]:       # each disagreement with the note it points at, read from the pinned gold file
        line = next(x for x in md.splitlines() if x.startswith(f"| {qid} |"))
        assert all(g in line for g in gold[qid]["gold"]) and gold[qid]["query"] in line
    assert "docs/first-gold-set.md" in md

    gap = json.loads(render(rep, "json"))["data"]["evidence_gap"]
    assert sorted(gap["saturated"]) == saturated and gap["answerable"] == n and gap["probes"] == 0
    assert [(d["spread"], d["id"]) for d in gap["disagreements"]] == spread[:10]
    assert gap["configs"] == len({r.config_hash for r in rows if r.result is not None})
    # the best gains seen carry the keep rule's paired p-value, and what the set could have detected
    assert gap["gains"] and all(0 < g["p_value"] <= 1 for g in gap["gains"])
    assert [g["delta"] for g in gap["gains"]] == sorted((g["delta"] for g in gap["gains"]), reverse=True)
    assert gap["detectable"]["n"] == n and gap["detectable"]["min_rising"] == 6
    # the headline is the reason's message and fix, a value of the sweep's table of empty-night reasons
    from tuner.sweep.reasons import EMPTY_NIGHT
    facts = night_facts(sweep_data(saturated_night["ledger"]))
    why = facts.gap.reason
    assert why.kind in EMPTY_NIGHT and gap["headline"] == f"{why.message()}; {why.fix()}"
    assert rep.verdict.startswith(why.message()) and why.fix().startswith("add harder questions (")


def test_the_sweep_itself_warns_at_round_0_and_points_an_empty_night_at_the_report(saturated_night):
    from tuner.demo import format_summary
    from tuner.evaluation.discrimination import CANNOT_DISCRIMINATE
    s = saturated_night["summary"]
    assert [p for p in saturated_night["progress"] if p.startswith(f"warning: {CANNOT_DISCRIMINATE}: all ")]
    assert ("nothing kept; why, and which questions would decide: autoresearch report sweep "
            f"--sweep {s.sweep} --ledger {saturated_night['ledger']}") in format_summary(s, saturated_night["ledger"])


def test_the_no_probes_fix_stands_in_a_set_without_probes(saturated_night):
    d = sweep_report(saturated_night["ledger"]).data
    [threshold] = [f for f in d["failed"] if f["variable"] == "threshold"]
    assert threshold["fix"].startswith("add probes")


def test_detectable_gain_is_what_the_paired_test_says():
    # 18 of 20 at the ceiling and nothing moved: only 2 can rise, the test needs 6 (2 x 0.5^6 < 0.05)
    d = detectable_gain([1.0] * 18 + [0.5, 0.3], [1.0] * 18 + [0.5, 0.3])
    assert (d.n, d.headroom, d.min_rising, d.smallest_gain, d.questions_needed) == (20, 2, 6, None, None)
    assert paired_randomization(np.zeros(6), np.ones(6)) < 0.05 <= paired_randomization(np.zeros(5), np.ones(5))
    # 3 questions up, 1 down on 24: within noise here; the smallest detectable shift is one the test passes
    base = np.full(24, 0.5)
    cand = base.copy()
    cand[:3] += 0.2
    cand[3] -= 0.1
    d = detectable_gain(base, cand)
    assert paired_randomization(base, cand) >= 0.05
    assert d.smallest_gain > d.observed_gain > 0
    shift = d.smallest_gain - d.observed_gain        # no question reaches the ceiling here, so gain = observed + shift
    assert paired_randomization(base, cand + 1.05 * shift) < 0.05 <= paired_randomization(base, cand + 0.9 * shift)
    assert 24 < d.questions_needed <= d.searched_up_to and not d.out_of_reach
    # the size it names is right to within a simulation's spread: the same pattern drawn at twice that size
    # is beyond noise in most draws, at a third of it in few
    rng = np.random.default_rng(1)

    def median_p(m):
        return sorted(paired_randomization(np.zeros(m), rng.choice(cand - base, m), n_resamples=2000)
                      for _ in range(31))[15]
    assert median_p(2 * d.questions_needed) < 0.05 < median_p(d.questions_needed // 3)
    # a gain of 0.000004 per question on 24: more questions of the same kind will not find it
    tiny = base.copy()
    tiny[0] += 0.001
    tiny[1] -= 0.0009
    assert detectable_gain(base, tiny).out_of_reach


def test_a_ledger_whose_rows_predate_ndcg_is_reported_without_testing_its_gains():
    """schema 2 rows keep no per-question nDCG@10, which score100's share reads: the report says the gains
    were not tested instead of failing on the missing metric (KeyError 'ndcg@10' before)."""
    from pathlib import Path
    from click.testing import CliRunner
    from tuner.cli import main
    old = Path(__file__).parents[1] / "ledger" / "data" / "schema2-demo-sweep.sqlite"
    r = CliRunner().invoke(main, ["report", "sweep", "--ledger", str(old)])
    assert r.exit_code == 0, r.output
    assert "gain(s) could not be tested: the ledger's rows predate" in r.output


def _gain(delta, moved=3, p=0.2):
    from tuner.reports.evidence_gap import GainSeen
    return GainSeen(1, "rrf_k", "30", "rejected:no_gain", delta, moved, moved, 0, p)


@pytest.mark.parametrize("kind, facts", [
    ("too_few_can_rise", dict(gains=[_gain(0.5)], headroom=2, min_rising=6, smallest=None)),
    ("untested_gains", dict(gains=[], untested=3)),
    ("nothing_moved", dict(gains=[_gain(0.0, moved=0)])),
    ("below_detectable", dict(gains=[_gain(0.5)], headroom=12, min_rising=6, smallest=0.02)),
    ("within_noise", dict(gains=[_gain(0.5, p=0.0004)], headroom=12, min_rising=6, smallest=None)),
])
def test_each_reason_a_night_kept_nothing_renders_its_message_and_its_fix(kind, facts):
    """Every kind of the empty-night table is reachable from the evidence and renders from its own fields:
    the message says what the rows show, the fix names the harder questions (and probes: this set has none)."""
    from tuner.reports.evidence_gap import DetectableGain, LevelCount, empty_night_reason
    detect = None
    if "headroom" in facts:
        detect = DetectableGain(20, 0.05, facts["min_rising"], facts["headroom"], 0.01, facts["smallest"], None)
    why = empty_night_reason(20, ("q1", "q2"), 0, (LevelCount("L1", 20, 2, 0),), facts["gains"], detect, 60.0,
                             "score100", facts.get("untested", 0))
    assert why.kind == kind
    assert why.message().startswith("Nothing kept: 2 of 20 tuning questions are at rank 1 under every config tried; ")
    assert why.fix() == "add harder questions (XL cross-lingual, L2 multi-hop, probes)"
    assert "{" not in why.message() + why.fix()


def test_a_gain_below_the_detectable_size_never_reads_as_equal_to_it():
    """Both rounded to two decimals, a gain of 0.036 "was below the +0.04 this set can detect" while reading
    +0.04 itself: the two get the digits that tell them apart."""
    from tuner.reports.evidence_gap import DetectableGain, LevelCount, empty_night_reason
    detect = DetectableGain(20, 0.05, 6, 12, 0.01, 0.044 / 60.0, None)     # the detectable share, in score100
    why = empty_night_reason(20, ("q1", "q2"), 0, (LevelCount("L1", 20, 2, 0),), [_gain(0.036)], detect, 60.0,
                             "score100", 0)
    assert why.kind == "below_detectable"
    assert "+0.036 score100" in why.message() and "below the +0.044 this set of 20 can detect" in why.message()


def test_the_advice_is_a_value_of_the_advice_table_that_renders_each_paragraph():
    """Each paragraph of a night's advice is a NIGHT_ADVICE value (kind and fields): its finding, then what to add,
    worded by the table alone."""
    from tuner.reports.evidence_gap import DetectableGain, GainSeen, LevelCount, QuestionSpread, night_advice
    from tuner.sweep.reasons import NIGHT_ADVICE, advice_paragraph
    levels = (LevelCount("L0", 10, 2, 0), LevelCount("L2", 3, 3, 0))
    spreads = (QuestionSpread("q1", "L1", 1, 5, 4, "", ("n/a", "n/b")), QuestionSpread("q2", "L2", None, None, 0))
    gains = (GainSeen(1, "k", "60", "rejected:no_gain", 0.034, 3, 2, 1, 0.3),)
    far = DetectableGain(20, 0.05, 5, 4, 0.01, 0.02, 2500, 2000)
    advice = night_advice(20, ("a", "b"), levels, 0, spreads, far, gains, "score100")
    assert all(a.table is NIGHT_ADVICE for a in advice)
    assert [a.kind for a in advice] == ["saturated_questions", "add_level", "add_level", "add_level", "add_probes",
                                        "where_configs_disagreed", "min_rising", "gain_out_of_reach", "how_to_write"]
    assert [advice_paragraph(a) for a in advice] == [
        "2 of 20 tuning questions are at rank 1 under every config tried: no config can improve them, so they only "
        "dilute a gain. Keep a few as a guard; the others are better spent on harder questions.",
        "Add L1 questions (paraphrase: the question in other words than the note's): none in the set.",
        "Add XL questions (cross-lingual: an English term for a Korean note, or the other way round): none in the set.",
        "Add L2 questions (multi-hop: the answer needs two linked notes): 3 in the set, 3 of them saturated.",
        "Add probes, questions whose answer is not in the vault: write a few, or let `autoresearch probes make VAULT "
        "--gold TUNE.yaml --out FOLDER` hold out whole notes so the questions about them become probes. Without "
        "probes the gate's thresholds are never tuned.",
        "Write questions about where the configs disagreed: q1, q2 (notes n/a, n/b).",
        "At 20 questions the paired test needs at least 5 questions to rise, none falling, for p < 0.05; 4 have room "
        "to rise in score100 and could.",
        "The best gain seen (+0.03 score100) would need more than 2000 questions like these to be told from noise: it "
        "is too small to chase with more of the same questions.",
        "How to write them: docs/first-gold-set.md."]
    near = DetectableGain(20, 0.05, 5, 4, 0.01, 0.02, 80, 2000)
    assert advice_paragraph(night_advice(20, (), levels, 6, (), near, gains, "mrr")[-2]) == \
        "The best gain seen (+0.03 mrr) would be told from noise at about 80 questions like these (now 20)."
