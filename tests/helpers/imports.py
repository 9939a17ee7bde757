"""The import graph of our packages, read with ast (nothing is imported): module -> modules it imports.

Imports inside functions count too (a lazy import is still a dependency); `if TYPE_CHECKING:` blocks do
not exist in the tree, so nothing is skipped. A `from pkg import name` counts as an import of pkg.name
when that is a module, else of pkg.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_files(root: Path, packages) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if not level:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph(root: Path, packages) -> dict[str, set[str]]:
    files = module_files(root, packages)
    ours = tuple(packages)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node.level, node.module)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            targets |= {n for n in names if n.split(".")[0] in ours and n != module}
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected sets of two or more modules (Tarjan), restricted to modules in the graph.
    A package's __init__ importing its own submodules is not a cycle with them: the submodule does not
    need the package's names, only its path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    counter = [0]

    def edges(m):
        return [t for t in graph.get(m, ()) if t in graph and not m.startswith(t + ".")]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    import sys
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out
