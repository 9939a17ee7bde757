"""A watcher killed with SIGKILL in the middle of an update loses nothing: `autoresearch check` then finds
the index sound, a plain `autoresearch index` brings it up to date, and it then holds exactly what a
fresh build of the vault holds.

The watcher is a real process running the watcher's update (VaultWatcher.update, what `serve --watch`
runs on each save) with one function of the update path wrapped to say where it is and then wait: the
test kills it there, so the kill lands at a known point every time (no sleep, no timing). The points:
while embedding (a batch committed to the embedding cache, nothing written to the index), inside the
update's transaction (rows deleted and inserted, nothing committed), and after the commit (the update
only in the -wal, not yet checkpointed)."""

import subprocess
import sys
import textwrap

import pytest

from search_core.index.indexer import index_vault
from search_core.paths import embed_cache_file
from search_core.index.store import connect
from tests.helpers import SMALL_VAULT, child_env, kill_at_marker, write_vault
from tests.helpers.index_state import derived_state
from tests.helpers.live_file import wal_of

DEADLINE_S = 180

# where the watcher is held until it is killed: (module, object, attribute) of the wrapped function, and
# whether it holds only on a call made outside a transaction (is_built is also called inside the update's)
HOLD_POINTS = {
    "while embedding": ("search_core.index.embed_cache", "EmbeddingCache", "put_many", False),
    "inside the update's transaction": ("search_core.index.indexer", None, "bump_generation", False),
    "after the commit": ("search_core.index.short_tokens", None, "is_built", True),
}

WATCHER = textwrap.dedent("""
    import importlib, os, sys, threading
    from pathlib import Path
    vault, db, marker, module, owner, attr, committed_only = sys.argv[1:8]
    target = importlib.import_module(module)
    if owner != "-":
        target = getattr(target, owner)
    real = getattr(target, attr)

    def held(*args, **kw):
        out = real(*args, **kw)
        if committed_only == "1" and args[0].in_transaction:
            return out
        Path(marker).write_text(str(os.getpid()))
        threading.Event().wait()          # until killed
        return out

    setattr(target, attr, held)
    from search_core.index.watch import VaultWatcher
    w = VaultWatcher(vault, db)
    w.update()
    print("update returned:", w.status())
""")


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tuner.cli", *map(str, args)], env=child_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def note_text(db, note_id) -> str:
    c = connect(db, readonly=True)
    try:
        return "\n".join(r[0] for r in c.execute("SELECT text FROM chunks WHERE note_id = ? ORDER BY ord", (note_id,)))
    finally:
        c.close()


@pytest.mark.slow
@pytest.mark.parametrize("point", sorted(HOLD_POINTS))
def test_a_watcher_killed_mid_update_loses_nothing(point, tmp_path):
    vault = write_vault(tmp_path / "vault", SMALL_VAULT)
    db = tmp_path / "idx" / "w.sqlite"
    index_vault(vault, db)                          # e5-small, the watcher's default cache beside it
    with (vault / "ai" / "rrf.md").open("a", encoding="utf-8") as f:
        f.write("\n\nQuimbleflax 갱신 중에 죽은 감시자.\n")
    (vault / "life" / "kimchi.md").unlink()           # an update that also deletes
    marker = tmp_path / "held"
    module, owner, attr, committed_only = HOLD_POINTS[point]
    proc = subprocess.Popen([sys.executable, "-c", WATCHER, vault, db, marker, module, owner or "-", attr,
                             str(int(committed_only))],
                            env=child_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    kill_at_marker(proc, marker, DEADLINE_S, point)

    if point == "after the commit":
        assert wal_of(db).stat().st_size > 0, "the commit is still only in the -wal when the watcher dies"
    checked = run_cli("check", "--db", db, cwd=tmp_path)
    assert checked.returncode == 0 and "ok" in checked.stdout, checked.stdout + checked.stderr
    committed = point == "after the commit"
    assert ("Quimbleflax" in note_text(db, "ai/rrf")) == committed, "an update is all there or not there at all"
    assert (note_text(db, "life/kimchi") == "") == committed

    indexed = run_cli("index", vault, "--db", db, "--no-progress", cwd=tmp_path)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    assert "Quimbleflax" in note_text(db, "ai/rrf") and note_text(db, "life/kimchi") == ""

    fresh = tmp_path / "fresh" / "w.sqlite"
    index_vault(vault, fresh, cache=embed_cache_file())
    got, want = derived_state(db), derived_state(fresh)
    assert set(got["communities"]) == set(want["communities"])
    for name in want:
        if name != "communities":             # recomputed on a budget after updates, not by every update
            assert got[name] == want[name], f"killed {point}: {name} differs from a fresh build of the vault"
