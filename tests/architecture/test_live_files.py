"""The rule for live SQLite files (docs/architecture.md), read from the source: every SQLite file is opened
with one SQLite library, so that SQLite's own bookkeeping keeps a process's POSIX locks when one of its
connections closes. The engine's library is sqlean (store.connect, store.peek); the standard library's
sqlite3 opens only the recall log, which nothing else opens. A second library's connection to an index,
cache or ledger would drop, at its close, every lock the process holds on that file."""

import ast

from tests.helpers import ROOT

PACKAGES = ("search_core", "tuner")
# the recall log: written with no extension, so with the standard library, and opened by nothing else
STDLIB_SQLITE_ALLOWED = {"search_core/recall/log.py"}


def _stdlib_sqlite_connects(tree: ast.AST) -> list[int]:
    """Lines that call connect() on the standard library's sqlite3 (not on `import sqlean as sqlite3`)."""
    names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names if a.name == "sqlite3"}
    direct = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "sqlite3"
              for a in n.names if a.name == "connect"}
    lines = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        on_module = isinstance(f, ast.Attribute) and f.attr == "connect" and isinstance(f.value, ast.Name) \
            and f.value.id in names
        if on_module or (isinstance(f, ast.Name) and f.id in direct):
            lines.append(n.lineno)
    return lines


def test_only_the_recall_log_is_opened_with_the_standard_library_sqlite3():
    found = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            lines = _stdlib_sqlite_connects(ast.parse(p.read_text(encoding="utf-8")))
            if lines:
                found[rel] = lines
    assert set(found) >= STDLIB_SQLITE_ALLOWED, f"the guard reads nothing: {found}"   # guards the guard
    bad = {f: lines for f, lines in found.items() if f not in STDLIB_SQLITE_ALLOWED}
    assert not bad, ("these open a SQLite file with the standard library's sqlite3; use "
                     f"search_core.index.store.connect (or peek for a read-only look): {bad}")
