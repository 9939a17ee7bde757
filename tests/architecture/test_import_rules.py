"""The rules between packages, read from the source: no import cycle in either package, the engine never
imports the tuner, no library module imports the CLI, no private name is imported from another package,
and importing the engine and the index/search verbs loads none of the heavy optional libraries."""

import ast
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tests.helpers.imports import _absolute, cycles, import_graph, module_files

PACKAGES = ("search_core", "tuner")
HEAVY = ("optuna", "sklearn", "matplotlib", "starlette", "uvicorn", "mcp", "apscheduler", "scipy")


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT, PACKAGES)


def test_the_graph_is_read(graph):
    # guards the guard: an empty graph would pass every rule below
    assert "search_core.search.pipeline" in graph and "tuner.sweep.loop" in graph
    assert "search_core.index.indexer" in graph["search_core.search.pipeline"] or \
        "search_core.index.handle" in graph["search_core.search.pipeline"]


def test_no_import_cycle(graph):
    found = cycles(graph)
    assert not found, "import cycles (each a strongly connected set of modules):\n" + "\n".join(
        " <-> ".join(sorted(c)) for c in found)


def test_the_engine_never_imports_the_tuner(graph):
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("search_core")
                 for t in targets if t == "tuner" or t.startswith("tuner."))
    assert not bad, "search_core must not import tuner:\n" + "\n".join(bad)


def test_no_library_module_imports_the_cli(graph):
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items() if not m.startswith("tuner.cli")
                 for t in targets if t == "tuner.cli" or t.startswith("tuner.cli."))
    assert not bad, "only tuner.cli may import tuner.cli:\n" + "\n".join(bad)


def test_no_module_imports_a_module_that_is_not_there(graph):
    known = set(graph)
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets if t not in known)
    assert not bad, "imports of modules that do not exist:\n" + "\n".join(bad)


def test_importing_the_engine_and_the_cli_loads_no_heavy_library():
    code = ("import sys\n"
            "import search_core, search_core.index, search_core.search, search_core.gate, search_core.recall\n"
            "import search_core.index.indexer, search_core.search.pipeline\n"
            "from tuner.cli import main\n"
            f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "", f"loaded at import time: {out.stdout.strip()}"


def test_no_test_module_imports_another():
    # shared test code lives in tests/helpers/; a test module imported by another runs its tests twice
    # under two module names and ties unrelated tests together
    graph = import_graph(ROOT, ("tests",))
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                 if t.rsplit(".", 1)[-1].startswith("test_") or t == "tests.conftest")
    assert not bad, "test modules importing test modules (move what they share to tests/helpers/):\n" + "\n".join(bad)


def private_imports(root, packages) -> list[str]:
    """`from M import _name` by a module outside M's package: a private name used as an interface (the
    model registry's factories were, to check a name; `check_model_name` is the interface)."""
    files = module_files(root, packages)
    bad = []
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _absolute(module, is_package, node.level, node.module)
            if source.split(".")[0] not in packages or source not in files:
                continue
            home = source if files[source].name == "__init__.py" else source.rpartition(".")[0]
            if module == home or module.startswith(home + "."):
                continue
            bad += [f"{module} imports {a.name} from {source}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    return bad


def test_no_private_name_is_imported_from_another_package():
    bad = private_imports(ROOT, PACKAGES)
    assert not bad, "private names imported across packages (make a public function for what they need):\n" \
        + "\n".join(sorted(bad))
