"""The `autoresearch` command line."""

from tuner.cli.main import main

__all__ = ["main"]
