"""One lock and one atomic replace, read from the source: every flock and every rename into place is in
search_core/files.py (PidLock, FolderLock, atomic_write_text, atomic_replace), so a fix to how a lock is
taken or a file is swapped lands once. The few renames that must stay elsewhere are listed below, each
with the reason, and the list only shrinks."""

import ast

from tests.helpers import ROOT

PACKAGES = ("search_core", "tuner")
HOME = "search_core/files.py"
# (file, call): why it stays outside files.py
ALLOWED = {
    ("search_core/index/indexer.py", "os.replace"):
        "_swap_in: an index built by SQLite, synced when it left WAL mode, renamed after the old WAL is removed",
    ("search_core/recall/hermes/__init__.py", "os.replace"):
        "the recall log's trim: this file runs inside Hermes and imports nothing of ours",
    ("search_core/index/embed_cache.py", "Path.replace"):
        "_set_aside: a damaged cache and its WAL moved aside under a new name, nothing written into place",
}
LOCKS = {"flock", "lockf"}
RENAMES = {"replace", "rename"}


def mechanism_calls(tree: ast.AST) -> list[tuple[str, int]]:
    """(call, line) for each flock/lockf, os.replace/os.rename, and Path.replace/rename (one argument:
    str.replace takes two)."""
    imported = {a.asname or a.name: f"{n.module}.{a.name}" for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module in ("fcntl", "os") for a in n.names}
    found = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Name) and f.id in imported and imported[f.id].split(".")[-1] in LOCKS | RENAMES:
            found.append((imported[f.id], n.lineno))
        elif isinstance(f, ast.Attribute) and f.attr in LOCKS:
            found.append((f"fcntl.{f.attr}", n.lineno))
        elif isinstance(f, ast.Attribute) and f.attr in RENAMES:
            if isinstance(f.value, ast.Name) and f.value.id == "os":
                found.append((f"os.{f.attr}", n.lineno))
            elif len(n.args) == 1 and not n.keywords:
                found.append((f"Path.{f.attr}", n.lineno))
    return found


def _scan() -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            for call, line in mechanism_calls(ast.parse(p.read_text(encoding="utf-8"))):
                out.setdefault((rel, call), []).append(line)
    return out


def test_flock_and_rename_into_place_live_in_files_py():
    found = _scan()
    home = {call for (f, call) in found if f == HOME}
    assert {"fcntl.flock", "os.replace"} <= home, f"the guard reads nothing in {HOME}: {home}"   # guards the guard
    outside = {k: v for k, v in found.items() if k[0] != HOME}
    bad = {f"{f}: {call} at line {', '.join(map(str, lines))}" for (f, call), lines in outside.items()
           if (f, call) not in ALLOWED}
    assert not bad, ("a lock or a rename into place outside search_core/files.py; use PidLock or FolderLock, "
                     "atomic_write_text or atomic_replace (or, if it must stay, add it to ALLOWED with why):\n"
                     + "\n".join(sorted(bad)))
    stale = set(ALLOWED) - set(outside)
    assert not stale, f"ALLOWED names calls that are gone; remove them (the list only shrinks): {sorted(stale)}"


def test_the_scan_sees_each_form():
    src = ("import os, fcntl\nfrom fcntl import flock as fl\nfrom pathlib import Path\n"
           "fcntl.flock(1, 2)\nfl(1, 2)\nos.replace('a', 'b')\nPath('a').replace('b')\n'ab'.replace('a', 'b')\n")
    assert mechanism_calls(ast.parse(src)) == [("fcntl.flock", 4), ("fcntl.flock", 5), ("os.replace", 6),
                                                ("Path.replace", 7)]
