"""The `autoresearch` group imports a verb's module when the verb is named: `search` must not load the tuner
(the daemon's config, the sweep, the evaluation), which cost a cold search ~9 % of its CPU at 567,000 chunks."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import tuner.cli
from tests.helpers import ROOT
from tuner.cli import VERB_MODULES, main

# what a search needs of the tuner: the CLI's own modules and the active config (tuner.promotion, whose history
# keeps its configs as tuner.stored_config records and its verdicts as tuner.promotion.verdicts values)
SEARCH_MAY_LOAD = ("tuner.cli", "tuner.cli.main", "tuner.cli.options", "tuner.cli.search", "tuner.durations",
                   "tuner.progress", "tuner.promotion", "tuner.promotion.config_toml", "tuner.promotion.promote",
                   "tuner.promotion.verdicts", "tuner.reasons", "tuner.reports", "tuner.reports.doc",
                   "tuner.reports.render", "tuner.stored_config")


def test_every_verb_is_named_with_the_module_that_defines_it():
    defined = {}
    for info in pkgutil.iter_modules(tuner.cli.__path__):
        if info.name == "__main__":          # runs the command line when imported
            continue
        module = importlib.import_module(f"tuner.cli.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            defined[command.name] = module.__name__
    assert defined == VERB_MODULES
    assert sorted(main.commands) == sorted(VERB_MODULES)


def test_a_search_loads_only_the_search_verb_of_the_cli(small_index_e5):
    code = ("import atexit, json, sys\n"
            "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules if m.startswith('tuner'))), "
            "file=sys.stderr))\n"
            "from tuner.cli import main\n"
            "main()\n")
    out = subprocess.run([sys.executable, "-c", code, "search", "retrieval", "--db", str(small_index_e5), "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"], out.stdout
    loaded = json.loads(out.stderr.strip().splitlines()[-1])
    assert "tuner.cli.search" in loaded
    assert sorted(set(loaded) - {"tuner", *SEARCH_MAY_LOAD}) == []
