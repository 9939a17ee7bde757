"""`ab` says up front which candidates cannot run here and skips them; it never says "wrote" before a failure."""

import pytest
from click.testing import CliRunner

from search_core.models import register_embedder
from tests.helpers import DEMO_VAULT, ROOT
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER, HashedNgramEmbedder
from tuner.ab.prepare import prepare
from tuner.ab.records import ABError
from tuner.cli import main

TUNE = ROOT / "experiments" / "gold" / "demo-tune.yaml"
ABSENT = "BAAI/bge-m3"        # hub weights this machine (and CI) does not have


def test_an_ab_with_one_candidate_that_runs_here_is_refused_before_anything(tmp_path):
    with pytest.raises(ABError, match=rf"two candidates that can run here; 1 can \(e5-small\)\. {ABSENT}: "
                                      "weights for 'BAAI/bge-m3' are not on this machine"):
        prepare(f"e5-small,{ABSENT}", None, TUNE, None, 0.5, str(DEMO_VAULT), None, None, tmp_path / "work")
    out = tmp_path / "ab.md"
    r = CliRunner().invoke(main, ["ab", "--embedders", f"e5-small,{ABSENT}", "--gold", str(TUNE), "--split", "0.5",
                                  "--vault", str(DEMO_VAULT), "--work", str(tmp_path / "work"), "--out", str(out)])
    assert r.exit_code == 1 and "two candidates that can run here" in r.stderr
    assert "wrote" not in r.output and not out.exists() and not (tmp_path / "work" / "indexes").exists()


def test_candidates_that_cannot_run_are_named_first_and_a_failed_ab_never_says_wrote(tmp_path):
    twin = FAKE_EMBEDDER + "-twin"     # the test model under a second name: its index records the first, so it fails
    register_embedder(twin, HashedNgramEmbedder)
    out = tmp_path / "ab.md"
    r = CliRunner().invoke(main, ["ab", "--embedders", f"{FAKE_EMBEDDER},{twin},{ABSENT}", "--gold", str(TUNE),
                                  "--split", "0.5", "--vault", str(DEMO_VAULT), "--work", str(tmp_path / "work"),
                                  "--out", str(out), "--no-progress"])
    err = r.stderr.splitlines()
    assert err[0].startswith(f"skipped, cannot run here: {ABSENT}: weights for"), err
    assert not list((tmp_path / "work" / "indexes").glob("*bge*")), "an index was built for a model that cannot run"
    assert r.exit_code == 1, r.output
    assert "wrote" not in r.stderr and f"(the report of what ran: {out})" in err[-1], err
    assert "| BAAI/bge-m3 | unavailable |" in out.read_text(encoding="utf-8")
