"""The move to the shipped default: with `default_round`, a sweep's first round moves every fusion and retrieval
variable of its space that differs from the shipped default to it, judged by the same rule as any round; its ledger
row names the fields and keeps their old and new values, and every reader takes it."""

import pytest

from search_core.config import SearchConfig
from tests.helpers import DEMO_VAULT
from tests.helpers.sweeps import DEMO_TUNE, NGRAM_K_DECOMPOSED_SPACE, hand_set_calibrations, run_sweep, small_gold
from tuner.ledger.ledger import Ledger
from tuner.sweep.loop import Sweep, SweepParams, replay_sweep
from tuner.sweep.space import Space, Variable
from tuner.sweep.variables import (FUSION, RETRIEVAL, default_move, describe_change, is_default_move, is_pair,
                                   kind_of, moved_variables, value_in, with_change)

SHIPPED = SearchConfig()

# two fusion variables, one retrieval variable, a gate variable, and a fusion variable whose range leaves out the
# shipped value (w_decomposed 0.15)
SPACE = Space("test", (Variable("w_ngram", "float", 0.0, 0.6, 0.05), Variable("rrf_k", "int", 1, 120),
               Variable("pair_terms", "categorical", choices=(0, 1, 2, 4)),
               Variable("threshold", "float", 0.4, 0.95, 0.005),
               Variable("w_decomposed", "float", 0.2, 0.6, 0.05)))


def test_the_move_names_what_differs_from_the_shipped_default_and_the_space_holds():
    start = SHIPPED.replace(w_ngram=0.0, rrf_k=60, pair_terms=0, threshold=0.9, w_decomposed=0.3)
    # the shipped values as search_core/config.py declares them: w_ngram 0.10, rrf_k 2, pair_terms 2; the gate's
    # threshold is no search variable, and w_decomposed's shipped 0.15 is outside this space's 0.2..0.6
    assert (SHIPPED.w_ngram, SHIPPED.rrf_k, SHIPPED.pair_terms, SHIPPED.w_decomposed) == (0.10, 2, 2, 0.15)
    assert default_move(SPACE, start) == ("default:w_ngram+rrf_k+pair_terms", [0.10, 2, 2])
    assert default_move(SPACE, SHIPPED.replace(rrf_k=60)) == ("default:rrf_k", [2])
    assert default_move(SPACE, SHIPPED) is None
    assert default_move(SPACE, SHIPPED.replace(threshold=0.9, w_decomposed=0.3)) is None


def test_every_reader_takes_the_move():
    name = "default:w_ngram+rrf_k+pair_terms"
    assert is_default_move(name) and not is_pair(name) and is_pair("w_ngram+rrf_k")
    assert moved_variables(name) == ("w_ngram", "rrf_k", "pair_terms")
    assert kind_of(name) is RETRIEVAL and kind_of("default:w_ngram+rrf_k") is FUSION
    start = SHIPPED.replace(w_ngram=0.0, rrf_k=60, pair_terms=0)
    moved = with_change(start, name, [0.1, 2, 2])
    assert moved == SHIPPED and value_in(start, name) == [0.0, 60, 0]
    # one field moved is still a list: the ledger keeps the move's values alike whatever their number
    assert value_in(start, "default:rrf_k") == [60] and with_change(start, "default:rrf_k", [2]).rrf_k == 2
    with pytest.raises(ValueError, match="list of 3 values"):
        with_change(start, name, 2)
    assert describe_change(name, [0.0, 60, 0], [0.1, 2, 2]) == \
        "the shipped default: w_ngram 0.0 -> 0.1, rrf_k 60 -> 2, pair_terms 0 -> 2"
    assert describe_change("default:rrf_k", [60], [2]) == "the shipped default: rrf_k 60 -> 2"


FUSION_ONLY = NGRAM_K_DECOMPOSED_SPACE


@pytest.fixture(scope="module")
def small_demo_gold(tmp_path_factory):
    return small_gold(DEMO_TUNE, tmp_path_factory.mktemp("default-round") / "small.yaml", 2)


def test_round_one_moves_to_the_shipped_default_once(demo_index, tmp_path, small_demo_gold):
    start = SHIPPED.replace(w_ngram=0.0, rrf_k=60, w_decomposed=0.0)
    _, rows = run_sweep(tmp_path, demo_index, FUSION_ONLY, 5, gold=small_demo_gold, start=start, default_round=True)
    first = rows[1]
    assert first.variable == "default:w_ngram+rrf_k+w_decomposed"
    assert first.old == [0.0, 60, 0.0] and first.new == [0.1, 2, 0.15]
    cfg = first.search_config
    assert (cfg.w_ngram, cfg.rrf_k, cfg.w_decomposed) == (0.1, 2, 0.15)
    assert first.decision.evaluated and first.result is not None and first.reason
    assert not any(is_default_move(r.variable) for r in rows[2:])     # once a sweep
    lg = Ledger(tmp_path / "l.sqlite", create=False)
    try:
        info = lg.sweeps()[-1]
        replayed = {x.round: x for x in replay_sweep(info, lg.rounds(info.id))}
    finally:
        lg.close()
    assert replayed[1].agrees and replayed[1].variable == first.variable


def test_no_round_when_off_or_when_the_start_is_the_shipped_default(demo_index, tmp_path, small_demo_gold):
    start = SHIPPED.replace(w_ngram=0.0, rrf_k=60)
    _, off = run_sweep(tmp_path, demo_index, FUSION_ONLY, 2, gold=small_demo_gold, start=start, ledger="off.sqlite")
    _, shipped = run_sweep(tmp_path, demo_index, FUSION_ONLY, 2, gold=small_demo_gold, start=SHIPPED,
                           ledger="shipped.sqlite", default_round=True)
    assert not any(is_default_move(r.variable) for r in off + shipped)
    assert [r.variable for r in shipped[1:]] == ["w_ngram", "rrf_k"]


def test_a_rejected_move_is_not_tried_again(demo_index, tmp_path, small_demo_gold):
    """With a latency budget no search meets, the move is rejected and the baseline stays the start: the sweep goes on with
    single-variable rounds, and never proposes the move again."""
    sp = tmp_path / "space.toml"
    sp.write_text(FUSION_ONLY)
    p = SweepParams(db=str(demo_index), gold=str(small_demo_gold), space=str(sp), rounds=4, seed=0,
                    vault=str(DEMO_VAULT), index_dir=str(tmp_path / "indexes"), timing_samples=0, pairs=False,
                    default_round=True, latency_budget_ms=0.001)
    hand_set_calibrations(p.cost_folder())
    lg = Ledger(tmp_path / "rejected.sqlite")
    try:
        sw = Sweep(p, lg, start=SHIPPED.replace(w_ngram=0.0, rrf_k=60))
        sw.run()
        rows = lg.rounds(sw.id)
    finally:
        lg.close()
    assert rows[1].variable == "default:w_ngram+rrf_k" and not rows[1].kept
    assert [r.variable for r in rows[2:]] == ["rrf_k", "w_decomposed", "w_ngram"]


def test_once_a_ledger(demo_index, tmp_path, small_demo_gold):
    """A later sweep in the same ledger (the daemon's next night, from the config the first one tuned) has no
    round to the shipped default, and records that it had none, so its resume proposes alike."""
    start = SHIPPED.replace(w_ngram=0.0, rrf_k=60)
    sp = tmp_path / "space.toml"
    sp.write_text(FUSION_ONLY)
    p = SweepParams(db=str(demo_index), gold=str(small_demo_gold), space=str(sp), rounds=2, seed=0,
                    vault=str(DEMO_VAULT), index_dir=str(tmp_path / "indexes"), timing_samples=0, pairs=False,
                    default_round=True)
    hand_set_calibrations(p.cost_folder())
    said = []
    lg = Ledger(tmp_path / "nights.sqlite")
    try:
        first = Sweep(p, lg, start=start)
        first.run()
        second = Sweep(p, lg, start=start, progress=said.append)
        second.run()
        rows = lg.rounds(second.id)
        recorded = lg.sweep(second.id).params.sweep.default_round
    finally:
        lg.close()
    assert not any(is_default_move(r.variable) for r in rows[1:])
    assert recorded is False
    assert any(f"sweep {first.id} tried it (round 1" in line for line in said), said


def test_the_move_takes_the_entity_channel_a_made_set_leaves_out(demo_index, tmp_path):
    """A set of made questions alone leaves w_entity out of the single rounds; the move to the shipped default still
    sets it to the shipped 0.15 (the value the default was chosen with), and the later rounds leave it there."""
    from tuner.data.vault_questions import write_vault_questions
    space = ('[w_entity]\nkind = "float"\nlow = 0.0\nhigh = 0.6\nstep = 0.05\n'
             '[w_sparse]\nkind = "float"\nlow = 0.0\nhigh = 1.0\nstep = 0.05\n')
    made = tmp_path / "made.yaml"
    write_vault_questions(DEMO_VAULT, made, n=20, seed=0, anchor_share=1.0, mask_link=True)
    _, rows = run_sweep(tmp_path, demo_index, space, 3, gold=made, start=SHIPPED.replace(w_entity=0.0, w_sparse=0.0),
                        default_round=True)
    assert rows[1].variable == "default:w_entity+w_sparse" and rows[1].new == [0.15, 0.4]
    assert {r.variable for r in rows[2:]} == {"w_sparse"}
