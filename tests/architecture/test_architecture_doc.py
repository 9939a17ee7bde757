"""docs/architecture.md matches the tree: every package and module it names exists, and every package in
the tree has a row in its table."""

import importlib.util
import re

from tests.helpers import ROOT

DOC = ROOT / "docs" / "architecture.md"


def _named():
    return set(re.findall(r"`((?:search_core|tuner)(?:\.[a-z_]+)*)`", DOC.read_text(encoding="utf-8")))


def _packages():
    return {".".join(p.relative_to(ROOT).parent.parts) for root in ("search_core", "tuner")
            for p in (ROOT / root).rglob("__init__.py")}


def test_the_page_names_packages():
    assert {"search_core.index", "tuner.sweep", "tuner.cli"} <= _named()


def test_every_name_on_the_page_exists():
    missing = sorted(n for n in _named() if importlib.util.find_spec(n) is None)
    assert not missing, f"docs/architecture.md names what is not in the tree: {missing}"


def test_every_package_has_a_row():
    rows = set(re.findall(r"^\| `([a-z_.]+)` \|", DOC.read_text(encoding="utf-8"), re.M))
    missing = sorted(p for p in _packages() if "." in p and p not in rows)
    assert not missing, f"packages without a row in docs/architecture.md: {missing}"
