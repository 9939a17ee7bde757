"""The natural question sets on the further real vaults (benchmarks/sets/): BAEKJungHo's wiki (a tune and
a holdout set), hoonti06's wiki (one final set, spent by the gate's final measurement) and Voyager003's wiki
(a tune and a holdout set, the holdout read once by the recovery benchmark), aegis1920's wiki (a tune set
and a final set, spent by the gate's final measurement), crackyachae's study wiki (a holdout set, read once by
the recovery benchmark, and a tune set written after it), syshin0116's Obsidian vault (a tune set and a final set, spent), sysmae's Obsidian vault
(a tune set and a final set, spent) and likejazz's wiki (a tune set and an unread final set). They load, keep their shape, no two sets of a vault share a gold note, and every gold id is a note of its vault. The vaults are not in
the repository: they sit in vaults/ beside a checkout (AUTORESEARCH_VAULTS points elsewhere); without them the id
check skips, and benchmarks/sets/README.md says how to lay them out."""

import itertools
import os
from collections import Counter
from pathlib import Path

import pytest

from search_core.ingest.vault import list_vault
from tuner.data.gold import load_gold

ROOT = Path(__file__).resolve().parents[3]
SETS = ROOT / "benchmarks" / "sets"
# where the vaults are looked for: $AUTORESEARCH_VAULTS alone when set, else beside the checkout (what the
# sets' `vault:` lines assume when run from the repo root), else the shared machine's /work/vaults
VAULT_DIRS = ([Path(os.environ["AUTORESEARCH_VAULTS"])] if os.environ.get("AUTORESEARCH_VAULTS")
              else [ROOT.parent / "vaults", Path("/work/vaults")])
# set name -> (vault folder under the vaults dir, answerable count per level, probe count)
SHAPES = {
    "baekjungho-tune": ("baekjungho-wiki/_wiki", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "baekjungho-holdout": ("baekjungho-wiki/_wiki", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "hoonti06-final": ("hoonti06-wiki/_wiki", {"L0": 12, "L1": 12, "L2": 8, "XL": 8}, 20),
    "voyager003-tune": ("voyager003-wiki/_wiki", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "voyager003-holdout": ("voyager003-wiki/_wiki", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "aegis1920-tune": ("aegis1920-aegis1920.github.io/_wiki", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "aegis1920-final": ("aegis1920-aegis1920.github.io/_wiki", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "crackyachae-holdout": ("crackyachae-crackyachae.github.io/_study", {"L0": 9, "L1": 15, "L2": 6, "XL": 6}, 10),
    "crackyachae-tune": ("crackyachae-crackyachae.github.io/_study", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "syshin0116-tune": ("syshin0116-syshin0116.github.io/content", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "syshin0116-final": ("syshin0116-syshin0116.github.io/content", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "sysmae-tune": ("sysmae-obsidian-digital-garden/content", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "sysmae-final": ("sysmae-obsidian-digital-garden/content", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "likejazz-tune": ("likejazz-likejazz.github.io/_wiki", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
    "likejazz-final": ("likejazz-likejazz.github.io/_wiki", {"L0": 9, "L1": 9, "L2": 6, "XL": 6}, 16),
}
NAMES = tuple(SHAPES)
HOW_TO_GET = {
    "baekjungho-wiki/_wiki": "fetch github:BAEKJungHo/BAEKJungHo.github.io, then git --git-dir=MIRROR archive "
                             "93123068bac2aadb9ef46bfed984f4a18ac2902c _wiki | tar -x -C VAULTS/baekjungho-wiki",
    "hoonti06-wiki/_wiki": "fetch github:hoonti06/hoonti06.gitlab.io, then git --git-dir=MIRROR archive "
                           "e5b5eb7034a774f02693e146cd89397ef6d63e96 _wiki | tar -x -C VAULTS/hoonti06-wiki",
    "voyager003-wiki/_wiki": "fetch github:Voyager003/Voyager003.github.io, then git --git-dir=MIRROR archive "
                             "289cb30f48cde5bf5fa3b1ba096adac823129c86 _wiki | tar -x -C VAULTS/voyager003-wiki",
    "aegis1920-aegis1920.github.io/_wiki": "fetch github:aegis1920/aegis1920.github.io, then git --git-dir=MIRROR "
                                           "archive ae8297a10a72f84911e1cfe8287149e5d6d683bb _wiki | tar -x -C "
                                           "VAULTS/aegis1920-aegis1920.github.io",
    "crackyachae-crackyachae.github.io/_study": "fetch github:crackyachae/crackyachae.github.io, then git "
        "--git-dir=MIRROR archive 55b14b524ffba3e8dd0c50f66aef6f70a9442b86 _study | tar -x -C "
        "VAULTS/crackyachae-crackyachae.github.io",
    "syshin0116-syshin0116.github.io/content": "fetch github:syshin0116/syshin0116.github.io, then git "
        "--git-dir=MIRROR archive a03f3d1966c38442edb21373f3aa3aa1a9594bcf content | tar -x -C "
        "VAULTS/syshin0116-syshin0116.github.io",
    "sysmae-obsidian-digital-garden/content": "fetch github:sysmae/obsidian-digital-garden, then git "
        "--git-dir=MIRROR archive 7d48552d5074bd661359125b9ddef862580ec19b content | tar -x -C "
        "VAULTS/sysmae-obsidian-digital-garden",
    "likejazz-likejazz.github.io/_wiki": "fetch github:likejazz/likejazz.github.io, then git --git-dir=MIRROR "
        "archive fe3b1d8fabf77372bbabc966c17df39d2c54f3bb _wiki | tar -x -C VAULTS/likejazz-likejazz.github.io",
}


def find_vault(folder: str) -> Path | None:
    return next((d / folder for d in VAULT_DIRS if (d / folder).is_dir()), None)


@pytest.mark.parametrize("name", NAMES)
def test_set_loads_with_its_shape(name):
    folder, levels, probes = SHAPES[name]
    g = load_gold(SETS / f"{name}.yaml")
    assert g.name == name and g.vault == f"../vaults/{folder}"
    assert Counter(q.level for q in g.answerable()) == Counter(levels)
    assert len(g.probes()) == probes
    assert all(len(q.gold) >= 2 for q in g.questions if q.level == "L2"), "an L2 question needs two notes"
    assert all(q.why.startswith("grep ") for q in g.probes()), "a probe's why says what the grep found"
    assert all(q.why for q in g.questions)
    assert len({q.query for q in g.questions}) == len(g.questions), "a question is asked once"


@pytest.mark.parametrize("a, b", [(a, b) for a, b in itertools.combinations(NAMES, 2)
                                  if SHAPES[a][0] == SHAPES[b][0]])
def test_no_two_sets_of_a_vault_share_a_gold_note(a, b):
    assert not load_gold(SETS / f"{a}.yaml").gold_ids() & load_gold(SETS / f"{b}.yaml").gold_ids()


@pytest.mark.parametrize("name", NAMES)
def test_every_gold_id_is_a_note_of_its_vault(name):
    folder = SHAPES[name][0]
    vault = find_vault(folder)
    if vault is None:
        pytest.skip(f"the vault {folder} is in none of {', '.join(map(str, VAULT_DIRS))}: it is measuring data "
                    f"kept beside the repository, not in it. Lay it out with: {HOW_TO_GET[folder]} "
                    "(or set AUTORESEARCH_VAULTS to the folder that holds it)")
    g = load_gold(SETS / f"{name}.yaml")
    assert g.check_against(note.note_id for note in list_vault(vault)) == []
    assert all((vault / f"{gid}.md").is_file() for gid in g.gold_ids())
    if vault.parent.parent == ROOT.parent / "vaults":   # the vault: line resolves from the repo root as written
        assert (ROOT / g.vault).resolve() == vault.resolve()
