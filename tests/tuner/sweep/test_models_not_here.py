"""A sweep says before round 1 which models of its space cannot run here, and never spends a round on one."""

from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tests.helpers.sweeps import run_sweep
from tuner.sweep.space import load_space

SPACE = f"""
[w_dense]
kind = "float"
low = 0.0
high = 1.0
step = 0.05
[embedder]
kind = "categorical"
choices = ["{FAKE_EMBEDDER}", "BAAI/bge-m3"]
[reranker]
kind = "categorical"
choices = ["none", "BAAI/bge-reranker-base"]
"""
ABSENT = {"BAAI/bge-m3", "BAAI/bge-reranker-base"}     # hub weights this machine (and CI) does not have


def test_models_that_cannot_run_here_are_named_up_front_and_never_tried(tmp_path, demo_db):
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    assert set(load_space(space).not_runnable_here()) == ABSENT
    lines = []
    summary, rows = run_sweep(tmp_path, demo_db, SPACE, 6, progress=lines.append)
    said = [x for x in lines if x.startswith("skipped, cannot run here: ")]
    assert {x.split(": ")[1] for x in said} == ABSENT
    assert lines.index(said[-1]) < next(i for i, x in enumerate(lines) if x.startswith("round ")), \
        "said after a round had run"
    assert not [r for r in rows if r.new in ABSENT], "a round was spent on a model that cannot run here"
    assert set(summary.not_here) == ABSENT
    assert "not on this machine" in summary.not_here["BAAI/bge-m3"]
