"""A search is configured by what it is given, read from the source. A Searcher gets its gate request, its
rerank scorer and its query-vector cache through its constructor (or a search's own arguments): no code
outside search_core/search/ assigns one of its attributes, so how a search is timed, cached or gated does
not depend on who touched the shared object last. And no module writes an object's `__dict__`: the
caches a view keeps for the channels, the gate and the cost model are one typed field (`IndexView.caches`)."""

import ast

from tests.helpers import ROOT

SCANNED = ("search_core", "tuner", "benchmarks", "tests")
SEARCHER_HOME = "search_core/search/"
SEARCHER_FILE = ROOT / "search_core/search/pipeline.py"
DICT_WRITES = {"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"}


def searcher_attributes(tree: ast.AST) -> set[str]:
    """The state a Searcher holds: every attribute its methods assign on `self`. (Its method names are left
    out: `search` or `close` assigned on another object, a test's stand-in for one method, is that object's.)"""
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Searcher")
    return {t.attr for n in ast.walk(cls) for t in _targets(n)
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def _targets(n: ast.AST) -> list[ast.AST]:
    if isinstance(n, ast.Assign):
        out = []
        for t in n.targets:
            out += list(t.elts) if isinstance(t, (ast.Tuple, ast.List)) else [t]
        return out
    if isinstance(n, (ast.AugAssign, ast.AnnAssign)):
        return [n.target]
    return []


def attribute_writes(tree: ast.AST, names: set[str]) -> list[tuple[str, int]]:
    """(attribute, line) for each `x.NAME = ...` (x anything but a bare `self`: another class's own
    attribute of the same name is its business) and each `setattr(x, "NAME", ...)`, NAME a Searcher's."""
    found = []
    for n in ast.walk(tree):
        for t in _targets(n):
            if isinstance(t, ast.Attribute) and t.attr in names and \
                    not (isinstance(t.value, ast.Name) and t.value.id == "self"):
                found.append((t.attr, n.lineno))
        if isinstance(n, ast.Call) and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and \
                n.args[1].value in names and not isinstance(n.args[0], ast.Constant):
            f = n.func
            if (isinstance(f, ast.Name) and f.id == "setattr") or (isinstance(f, ast.Attribute) and f.attr == "setattr"):
                if not (isinstance(n.args[0], ast.Name) and n.args[0].id == "self"):
                    found.append((n.args[1].value, n.lineno))
    return sorted(found, key=lambda f: f[1])


def _is_dict_of(n: ast.AST) -> bool:
    """`x.__dict__` or `vars(x)`."""
    return (isinstance(n, ast.Attribute) and n.attr == "__dict__") or \
        (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "vars" and n.args)


def dict_writes(tree: ast.AST) -> list[int]:
    """Lines that write an object's `__dict__`: `x.__dict__[k] = v` (or `del`), `x.__dict__.setdefault(...)`
    and the other mutating methods, the same through `vars(x)`. Reading one (`dict(self.__dict__)`) is fine."""
    found = []
    for n in ast.walk(tree):
        for t in _targets(n) + (n.targets if isinstance(n, ast.Delete) else []):
            if isinstance(t, ast.Subscript) and _is_dict_of(t.value):
                found.append(n.lineno)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in DICT_WRITES \
                and _is_dict_of(n.func.value):
            found.append(n.lineno)
    return sorted(found)


def _sources():
    for pkg in SCANNED:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            yield p.relative_to(ROOT).as_posix(), ast.parse(p.read_text(encoding="utf-8"))


def test_no_searcher_attribute_is_assigned_from_outside_its_package():
    names = searcher_attributes(ast.parse(SEARCHER_FILE.read_text(encoding="utf-8")))
    assert {"index", "embedder", "query_cache"} <= names, f"the guard reads no Searcher: {sorted(names)}"
    bad = [f"{rel}:{line}: .{attr} = ..." for rel, tree in _sources() if not rel.startswith(SEARCHER_HOME)
           for attr, line in attribute_writes(tree, names)]
    assert not bad, ("a Searcher's attribute assigned from outside search_core/search/: pass it to the constructor "
                     "(gate=GateRequest(...), reranking=RerankScorer(...), query_cache=...) or to the search "
                     "itself (rank(..., gate=...)) instead:\n" + "\n".join(bad))


def test_no_module_writes_an_objects_dict():
    bad = [f"{rel}:{line}" for rel, tree in _sources() for line in dict_writes(tree)]
    assert not bad, ("an object's __dict__ written: a cache on the index view belongs in its typed field "
                     "`view.caches` (search_core.search.view.ViewCaches):\n" + "\n".join(bad))


def test_the_scans_see_each_form():
    src = ("s.rerank_cache = {}\nsearcher.query_cache, x = c, 1\nself.query_cache = c\nsetattr(s, 'gate_choice', g)\n"
           "monkeypatch.setattr(s, 'query_cache', c)\nr.other = 1\nself.searcher.query_cache += 1\n")
    assert attribute_writes(ast.parse(src), {"rerank_cache", "query_cache", "gate_choice"}) == [
        ("rerank_cache", 1), ("query_cache", 2), ("gate_choice", 4), ("query_cache", 5), ("query_cache", 7)]
    src = ("view.__dict__.setdefault('_x', {})\nview.__dict__['_y'] = 1\nvars(v)['z'] = 2\n"
           "d = dict(self.__dict__)\nv = view.__dict__.get('_x')\ndel view.__dict__['_y']\n")
    assert dict_writes(ast.parse(src)) == [1, 2, 3, 6]
