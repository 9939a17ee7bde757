"""The `autoresearch` command line: one module per group of verbs, each only parsing, calling the library
and printing. The verbs are registered here on the group in tuner/cli/main.py; no verb module imports it."""

from tuner.cli import ab, check, daemon, gate, gold, hermes, index, pgvector, recall, search, tuning
from tuner.cli.main import main

# the order of `autoresearch --help` is click's (alphabetical); this is the order of the concepts
for _module in (index, search, check, pgvector, tuning, gold, gate, recall, ab, daemon, hermes):
    for _command in _module.COMMANDS:
        main.add_command(_command)

__all__ = ["main"]
