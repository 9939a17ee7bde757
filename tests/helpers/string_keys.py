"""Where a dict with string keys crosses a module boundary inside a package, as far as ast can tell
(nothing is imported):

- `returns`: a public function or method annotated `-> dict` (or `dict[str, Any]`, `dict | None`, or a list,
  tuple or sequence of one: `list[dict]`), except the JSON edges (JSON_EDGES: a record's `to_json`, `to_ledger`, ...).
- `fields`: a field of a dataclass annotated so (`build: dict`, `result: dict | None`, `rows: list[dict]`): a
  record that carries a dict by string keys to whoever reads the record.
- `reads`: `x["key"]` in a module where x holds what a function of another of our modules returned: a name
  bound by `x = f(...)`, `for x in f(...)` or a comprehension over `f(...)`, with f imported from another
  module of the package (`from pkg.mod import f`, or `mod.f` after `import pkg.mod as mod`), or
  `f(...)["key"]` itself. What a method returns is not followed (ast cannot tell the object's class).

Each finding is "module:function: what", stable across edits that do not move it to another function.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.imports import _absolute, module_files

JSON_EDGES = frozenset({"to_json", "to_yaml", "to_ledger", "columns", "as_dict", "to_dict"})


LOOSE_VALUES = frozenset({"Any", "object", "dict"})
SEQUENCES = frozenset({"list", "tuple", "Sequence", "Iterable", "Iterator"})


def _dict_annotation(node: ast.expr | None) -> bool:
    """A dict whose values say nothing of their type (`dict`, `dict[str, Any]`, `dict | None`): a record
    by string keys. A mapping with typed values (`dict[str, PairedMetric]`, `dict[str, int]`) is not."""
    if node is None:
        return False
    if isinstance(node, ast.Name):
        return node.id == "dict"
    if isinstance(node, ast.Subscript):
        if isinstance(node.value, ast.Name) and node.value.id in SEQUENCES:      # list[dict], tuple[dict, ...]
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return any(_dict_annotation(e) for e in elts)
        if not (isinstance(node.value, ast.Name) and node.value.id == "dict"):
            return False
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        value = args[-1]
        return (isinstance(value, ast.Name) and value.id in LOOSE_VALUES) or \
            (isinstance(value, ast.Subscript) and _dict_annotation(value))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):     # dict | None
        return _dict_annotation(node.left) or _dict_annotation(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):     # a string annotation
        try:
            return _dict_annotation(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return False
    return False


def _is_dataclass(decorator: ast.expr) -> bool:
    """@dataclass, @dataclass(frozen=True), @dataclasses.dataclass(...)."""
    d = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(d, ast.Name) and d.id == "dataclass") or \
        (isinstance(d, ast.Attribute) and d.attr == "dataclass")


def _imported(module: str, tree: ast.Module, is_package: bool, package: str) -> tuple[set[str], set[str]]:
    """(names of functions imported from another module of the package, names bound to such modules)."""
    functions, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node.level, node.module)
            if source.split(".")[0] != package or source == module:
                continue
            for a in node.names:
                functions.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == package and a.name != module and a.asname:
                    modules.add(a.asname)
    return functions, modules


class _Finder(ast.NodeVisitor):
    def __init__(self, module: str, functions: set[str], modules: set[str]):
        self.module, self.functions, self.modules = module, functions, modules
        self.scope: list[str] = []
        self.bound: list[set[str]] = [set()]
        self.found: set[str] = set()

    def _where(self) -> str:
        return f"{self.module}:{'.'.join(self.scope) or '<module>'}"

    def _foreign_call(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Call):
            return False
        f = node.func
        if isinstance(f, ast.Name):
            return f.id in self.functions and f.id[:1].islower()      # a function, not a class
        return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.modules

    def _bind(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.bound[-1].add(target.id)

    def _function(self, node) -> None:
        if not node.name.startswith("_") and node.name not in JSON_EDGES and _dict_annotation(node.returns):
            self.found.add(f"{self.module}:{'.'.join(self.scope + [node.name])}: returns a dict")
        self.scope.append(node.name)
        self.bound.append(set())
        self.generic_visit(node)
        self.bound.pop()
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(_is_dataclass(d) for d in node.decorator_list):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                        and _dict_annotation(item.annotation):
                    self.found.add(f"{self.module}:{'.'.join(self.scope + [node.name, item.target.id])}: "
                                   "field is a dict")
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        if self._foreign_call(node.value):
            for t in node.targets:
                self._bind(t)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        if self._foreign_call(node.iter):
            self._bind(node.target)
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        if self._foreign_call(node.iter):
            self._bind(node.target)
        self.generic_visit(node)

    def _comprehension(self, node) -> None:
        for g in node.generators:          # the `for` binds before the element reads: visit it first
            self.visit(g)
        for field in ("elt", "key", "value"):
            if hasattr(node, field):
                self.visit(getattr(node, field))

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_Subscript(self, node: ast.Subscript) -> None:
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            v = node.value
            if (isinstance(v, ast.Name) and any(v.id in b for b in self.bound)) or self._foreign_call(v):
                self.found.add(f"{self._where()}: reads [{key.value!r}]")
        self.generic_visit(node)


def string_key_crossings(root: Path, package: str) -> set[str]:
    out: set[str] = set()
    for module, path in module_files(root, (package,)).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        functions, modules = _imported(module, tree, path.name == "__init__.py", package)
        finder = _Finder(module, functions, modules)
        finder.visit(tree)
        out |= finder.found
    return out
