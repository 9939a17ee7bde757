"""The files that ship with the repository under experiments/: the demo vault, its gold sets, the default space."""

from __future__ import annotations

from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
DEMO_VAULT = EXPERIMENTS / "demo-vault"
DEMO_GOLD = EXPERIMENTS / "gold"
DEFAULT_SPACE = EXPERIMENTS / "spaces" / "default.toml"
