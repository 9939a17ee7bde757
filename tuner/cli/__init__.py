"""The `autoresearch` command line: one module per group of verbs, each only parsing, calling the library
and printing. Each verb is named here with the module that defines it (its COMMANDS); the group in
tuner/cli/main.py imports that module when the verb is asked for, so `autoresearch search` loads the search
verb's module and what it calls, not every verb's. No verb module imports this one."""

from tuner.cli.main import main

# verb -> module, in the order of the concepts (`autoresearch --help` lists them alphabetically, as click does);
# tests/tuner/cli/test_lazy_verbs.py checks it against every module's COMMANDS
VERB_MODULES = {
    "index": "tuner.cli.index",
    "search": "tuner.cli.search", "stats": "tuner.cli.search",
    "check": "tuner.cli.check",
    "pgvector": "tuner.cli.pgvector",
    "eval": "tuner.cli.tuning", "compare": "tuner.cli.tuning", "sweep": "tuner.cli.tuning",
    "ledger": "tuner.cli.tuning", "best": "tuner.cli.tuning", "demo": "tuner.cli.tuning",
    "gold": "tuner.cli.gold",
    "calibrate": "tuner.cli.gate", "probes": "tuner.cli.gate",
    "recall-log": "tuner.cli.recall", "serve": "tuner.cli.recall", "mcp": "tuner.cli.recall",
    "ab": "tuner.cli.ab",
    "daemon": "tuner.cli.daemon", "status": "tuner.cli.daemon", "config": "tuner.cli.daemon",
    "report": "tuner.cli.daemon", "audit": "tuner.cli.daemon",
    "hermes": "tuner.cli.hermes",
}
main.verb_modules = VERB_MODULES

__all__ = ["main", "VERB_MODULES"]
