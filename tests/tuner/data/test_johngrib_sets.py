"""The natural question sets on the johngrib wiki (benchmarks/sets/): they load, keep their shape, and every
gold id is a note of the wiki. The wiki itself is not in the repository: it sits in ../shared/data beside
a checkout (AUTORESEARCH_DATA points elsewhere, e.g. from a git worktree); without it the id check skips."""

import itertools
import os
from pathlib import Path

import pytest

from search_core.ingest.vault import list_vault
from tuner.data.gold import load_gold

ROOT = Path(__file__).resolve().parents[3]
SETS = ROOT / "benchmarks" / "sets"
DATA = Path(os.environ.get("AUTORESEARCH_DATA", ROOT.parent / "shared" / "data"))
VAULT = DATA / "johngrib-wiki" / "_wiki"
# answerable and probe counts of each set
SHAPES = {"johngrib-tune": (40, 20), "johngrib-holdout": (40, 20), "johngrib-blind": (48, 24),
          "johngrib-week": (80, 40), "johngrib-final": (80, 40), "johngrib-last": (80, 40),
          "johngrib-next": (80, 40)}
NAMES = tuple(SHAPES)
no_wiki = pytest.mark.skipif(
    not VAULT.is_dir(), reason=f"the johngrib wiki is not at {VAULT}: it is measuring data kept beside the "
    "repository, not in it (set AUTORESEARCH_DATA to the folder that holds johngrib-wiki/ to run this)")


@pytest.mark.parametrize("name", NAMES)
def test_set_loads_with_its_shape(name):
    g = load_gold(SETS / f"{name}.yaml")
    assert g.name == name and g.vault == "../shared/data/johngrib-wiki/_wiki"
    assert (len(g.answerable()), len(g.probes())) == SHAPES[name]
    assert {q.level for q in g.answerable()} == {"L0", "L1", "L2", "XL"}
    assert all(len(q.gold) >= 2 for q in g.questions if q.level == "L2"), "an L2 question needs two notes"
    assert all(q.why.startswith("grep ") for q in g.probes()), "a probe's why says what the grep found"
    assert all(q.why for q in g.questions)


@pytest.mark.parametrize("a, b", list(itertools.combinations(NAMES, 2)))
def test_no_two_sets_share_a_gold_note(a, b):
    assert not load_gold(SETS / f"{a}.yaml").gold_ids() & load_gold(SETS / f"{b}.yaml").gold_ids()


@no_wiki
@pytest.mark.parametrize("name", NAMES)
def test_every_gold_id_is_a_note_of_the_wiki(name):
    g = load_gold(SETS / f"{name}.yaml")
    assert g.check_against(note.note_id for note in list_vault(VAULT)) == []
    assert all((VAULT / f"{gid}.md").is_file() for gid in g.gold_ids())
    if "AUTORESEARCH_DATA" not in os.environ:   # the vault: line resolves from the repo root as written
        assert (ROOT / g.vault).resolve() == VAULT.resolve()
