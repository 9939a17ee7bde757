"""The data that ships with the package: the demo vault, its gold sets, the search spaces, daemon.toml.

They live in the repository's experiments/; tuner/experiments links to it, so a wheel carries them as
package data and importlib.resources finds them the same way in a checkout and in an installed wheel.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from search_core import SearchCoreError


def experiments_dir() -> Path:
    d = Path(str(files("tuner").joinpath("experiments"))).resolve()
    if not (d / "demo-vault").is_dir():
        raise SearchCoreError(f"the packaged experiments folder is missing at {d}; reinstall autoresearch "
                              "(pip install --force-reinstall autoresearch) or, in a checkout, restore the "
                              "tuner/experiments link to ../experiments")
    return d


def demo_vault() -> Path:
    return experiments_dir() / "demo-vault"


def demo_gold(name: str) -> Path:
    """name: e.g. demo-tune.yaml, demo-holdout.yaml."""
    return experiments_dir() / "gold" / name


def demo_start() -> Path:
    """The config `autoresearch demo` starts its sweep from (a hand-set start, not the shipped default)."""
    return experiments_dir() / "demo-start.toml"


def default_space() -> Path:
    return experiments_dir() / "spaces" / "default.toml"
