"""The data that ships with the package: the demo vault, its gold sets, the search spaces, daemon.toml.

They live in the repository's experiments/; tuner/experiments links to it, so a wheel carries them as
package data and importlib.resources finds them the same way in a checkout and in an installed wheel.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from search_core import SearchCoreError

EXPERIMENTS = Path(str(files("tuner").joinpath("experiments"))).resolve()
DEMO_VAULT = EXPERIMENTS / "demo-vault"
DEMO_GOLD = EXPERIMENTS / "gold"
DEFAULT_SPACE = EXPERIMENTS / "spaces" / "default.toml"
DEMO_START = EXPERIMENTS / "demo-start.toml"   # where `autoresearch demo` starts: hand-set, not the tuned default


def experiments_dir() -> Path:
    """The packaged experiments folder, or an error that names the fix when it is not there."""
    if not DEMO_VAULT.is_dir():
        raise SearchCoreError(f"the packaged experiments folder is missing at {EXPERIMENTS}; reinstall autoresearch "
                              "(pip install --force-reinstall autoresearch) or, in a checkout, restore the "
                              "tuner/experiments link to ../experiments")
    return EXPERIMENTS


def demo_vault() -> Path:
    return experiments_dir() / "demo-vault"


def demo_gold(name: str) -> Path:
    """name: e.g. demo-tune.yaml, demo-holdout.yaml."""
    return experiments_dir() / "gold" / name


def demo_start() -> Path:
    return experiments_dir() / "demo-start.toml"


def default_space() -> Path:
    return experiments_dir() / "spaces" / "default.toml"
