"""One wrong value, and no value, for every option and argument of every verb: each ends with exit 1 or 2 and
a message that names the option or the value, never a traceback.

The verbs are read from the `main` group itself, so a new verb or option is covered the day it is added. The
wrong values come from the option's click type (a word for a number, a choice that is not one) and from what
its name says it holds (a count, a fraction, an index, a ledger, a gold set, a TOML file, an output folder...);
see `wrong_values`. Each case runs in-process on CliRunner with the other options set to working values
(`BASE`), so the wrong value is what the command trips on. A verb that serves or loops (serve, mcp, daemon,
sweep, demo, ab, index --watch) would not return when a wrong value got through: `tripwires` turn its
long-running step into a failure naming the case instead.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.helpers import ROOT, SMALL_VAULT, free_port, write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tests.helpers.sweeps import FUSION_SPACE, HAND_SET_UNITS, hand_set_calibrations
from tuner.cli import main


def walk(cmd: click.Command, path: tuple[str, ...] = ()):
    """(path, command) for the group itself and every command and subcommand below it."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from walk(cmd.commands[name], path + (name,))


def verb(path: tuple[str, ...]) -> str:
    return " ".join(path)


# What a file or folder option holds, by the option's name; (verb, name) where one verb differs.
ROLE_BY_NAME = {
    "db": "index", "gold_path": "gold", "holdout": "gold", "labels": "gold", "config_path": "toml",
    "space": "toml", "gate_path": "json", "proposal": "json", "from_json": "json", "a": "json", "b": "json",
    "label_file": "labels", "ledger_path": "sqlite", "log_path": "sqlite", "cache": "sqlite_out",
    "out": "out_file", "work": "out_dir", "runs": "out_dir", "hermes_home": "out_dir",
    "vault": "vault", "watch_vault": "vault", "existing": "gold", "vault_or_db": "vault",
    "since": "duration", "time_budget": "duration", "older_than": "duration", "retention": "duration",
    "embedder": "model", "reranker": "model", "embedders": "models", "rerankers": "models",
    "sweep_id": "sweep_id", "resume": "sweep_id", "server": "url", "host": "host", "label": "label",
    "query": "query",
}
ROLE_BY_VERB = {
    ("index", "db"): "index_out", ("eval", "out"): "out_dir", ("demo", "out"): "out_dir",
    ("probes make", "out"): "out_dir", ("calibrate", "proposal"): "out_file", ("sweep", "ledger_path"): "sqlite_out",
    ("serve", "log_path"): "sqlite_out", ("mcp", "log_path"): "sqlite_out", ("gold make", "findable_in"): "index",
    ("gold cloze", "out"): "out_dir", ("gold cloze", "like"): "index", ("gold cloze", "keep_of"): "gold",
}
# counts: a negative is wrong, and zero too unless it means something ("0 = none", "0: one pass")
COUNTS_ZERO_OK = {"sample", "timing_samples", "dense_per_note", "calls", "words"}
COUNTS = {"rounds", "limit", "n", "findable_within", "top_k", "chunk_chars", "timeout_ms", "port", "call_id", "event_id",
          "seed"} | COUNTS_ZERO_OK
FRACTIONS = {"split", "fraction", "target_probe_rate", "noise_alpha", "gate_epsilon"}
NON_NEGATIVE = {"epsilon", "latency_budget", "start_in", "timeout"}


@dataclass(frozen=True)
class Files:
    """The module's working inputs (`good`) and the wrong files a case may name (`bad`)."""
    root: Path
    good: dict
    bad: dict


def role_of(v: str, param: click.Parameter) -> str | None:
    return ROLE_BY_VERB.get((v, param.name), ROLE_BY_NAME.get(param.name))


def wrong_values(v: str, param: click.Parameter, bad: dict) -> list[tuple[str, str]]:
    """(label, value) pairs that are wrong for this parameter: by type, then by what its name says."""
    name, t = param.name, param.type
    role = role_of(v, param)
    out: list[tuple[str, str]] = []
    if isinstance(t, click.Choice):
        out.append(("not-a-choice", "no-such-choice"))
    elif isinstance(t, (click.types.IntParamType, click.IntRange)) or t is click.INT:
        out += [("word", "seven"), ("decimal", "1.5")]
        if name in COUNTS:
            out.append(("negative", "-1"))
            if name not in COUNTS_ZERO_OK and name != "seed":
                out.append(("zero", "0"))
    elif isinstance(t, (click.types.FloatParamType, click.FloatRange)) or t is click.FLOAT:
        out += [("word", "half"), ("nan", "nan"), ("inf", "inf")]
        if name in FRACTIONS:
            out += [("above-one", "1.5"), ("negative", "-0.1")]
        if name in NON_NEGATIVE:
            out.append(("negative", "-5"))
        if name == "latency_budget":
            out.append(("zero", "0"))
    elif role in ("index", "sqlite", "json", "labels"):
        out += [("missing", bad["missing"]), ("directory", bad["dir"]), ("text-file", bad["text"]),
                ("empty-file", bad["empty"])]
        if role == "json":
            out += [("json-list", bad["json_list"]), ("binary-file", bad["an_index"])]
        if role in ("index", "sqlite"):         # SQLite, but another kind: a ledger for an index, an index for the rest
            out.append(("other-sqlite", bad["a_ledger"] if role == "index" else bad["an_index"]))
    elif role in ("index_out", "sqlite_out"):
        out += [("directory", bad["dir"]), ("text-file", bad["text"]), ("under-a-file", bad["under_file"]),
                ("other-sqlite", bad["a_ledger"] if role == "index_out" else bad["an_index"])]
    elif role == "toml":
        out += [("missing", bad["missing"]), ("directory", bad["dir"]), ("not-toml", bad["not_toml"]),
                ("wrong-type", bad["toml_wrong_type"] if v != "daemon" else bad["daemon_wrong_type"])]
    elif role == "gold":
        out += [("missing", bad["missing"]), ("empty-dir", bad["dir"]), ("yaml-list", bad["yaml_list"]),
                ("not-yaml", bad["not_yaml"]), ("empty-file", bad["empty"])]
    elif role == "out_file":
        out += [("directory", bad["dir"]), ("under-a-file", bad["under_file"])]
    elif role == "out_dir":
        out += [("a-file", bad["text"]), ("under-a-file", bad["under_file"])]
    elif role == "vault":
        out += [("missing", bad["missing"]), ("a-text-file", bad["text"])]
    elif role == "duration":
        out += [("word", "soon"), ("negative", "-5m")]
    elif role == "model":
        out.append(("unknown", "no-such-model"))
    elif role == "models":
        out.append(("unknown", f"no-such-model,{FAKE_EMBEDDER}"))
    elif role == "sweep_id":
        out.append(("unknown", "no-such-sweep"))
    elif role == "url":
        out += [("not-a-url", "not a url"), ("no-scheme", "127.0.0.1:8765")]
    elif role == "host":
        out.append(("not-a-host", "no such host!"))
    elif role == "label":
        out.append(("unknown", "maybe"))
    if isinstance(t, click.Path) or role in ("vault", "duration", "model", "models", "url", "host", "query", "label"):
        out.append(("empty", ""))
    return out


# Working values for the other options, so the wrong one is what a command trips on. {name} is a file of
# `Files.good`; {fresh} a new folder per case. A verb with a required parameter must be here
# (test_every_verb_with_required_parameters_has_working_values).
BASE = {
    "index": (["{small_vault}"], {"--db": "{fresh}/index.sqlite", "--embedder": FAKE_EMBEDDER}),
    "search": (["GraphRAG"], {"--db": "{db}"}),
    "stats": ([], {"--db": "{db}"}),
    "check": ([], {"--db": "{db}", "--sample": "0"}),
    "eval": ([], {"--db": "{db}", "--gold": "{gold}", "--timing-samples": "0", "--no-audit": None,
                  "--out": "{fresh}/evals"}),
    "compare": (["{eval_a}", "{eval_b}"], {}),
    "sweep": ([], {"--db": "{db}", "--gold": "{gold}", "--space": "{fusion_space}", "--rounds": "1",
                   "--ledger": "{sweep_runs}/ledger.sqlite"}),
    "ledger": ([], {"--ledger": "{ledger}"}),
    "best": ([], {"--ledger": "{ledger}"}),
    "demo": ([], {"--out": "{fresh}/demo", "--rounds": "1"}),
    "report sweep": ([], {"--ledger": "{ledger}"}),
    "audit": ([], {"--ledger": "{ledger}"}),
    "calibrate": ([], {"--db": "{db}", "--log": "{log}", "--out": "{fresh}/report.md"}),
    "calibrate apply": ([], {"--db": "{db}"}),
    "calibrate undo": ([], {"--db": "{db}"}),
    "probes make": (["{small_vault}"], {"--gold": "{small_gold}", "--out": "{fresh}/probes"}),
    "gold make": (["{small_vault}"], {"--out": "{fresh}/made.yaml"}),
    "gold cloze": (["{db}"], {"--out": "{fresh}/cloze", "-n": "5"}),
    "gold from-log": ([], {"--log": "{log}", "--out": "{fresh}/from-log.yaml"}),
    "gold init": (["{small_vault}"], {"--out": "{fresh}/init.yaml"}),
    "recall-log stats": ([], {"--log": "{log}"}),
    "recall-log list": ([], {"--log": "{log}"}),
    "recall-log suggest": ([], {"--log": "{log}"}),
    "recall-log label": (["1", "relevant"], {"--log": "{log}"}),
    "recall-log prune": ([], {"--log": "{log}"}),
    "serve": ([], {"--db": "{db}", "--log": "{fresh}/log.sqlite", "--port": "{port}"}),
    "mcp": ([], {"--db": "{db}", "--log": "{fresh}/log.sqlite"}),
    "daemon": ([], {"--config": "{daemon_toml}"}),
    "ab": ([], {"--embedders": f"e5-small,{FAKE_EMBEDDER}", "--gold": "{gold}", "--db": "{db}",
                "--work": "{fresh}/ab"}),
    "hermes install": ([], {"--hermes-home": "{hermes_home}"}),
    "hermes status": ([], {"--hermes-home": "{hermes_home}", "--server": "http://127.0.0.1:{port}"}),
}

# Cases left out, with why.
SKIP = {
    ("recall-log label", "call_id", "no-value"): "ID is optional: --file is the other way to give labels",
    ("recall-log label", "label", "no-value"): "LABEL is optional: --file is the other way to give labels",
    ("config rollback", "event_id", "no-value"): "ID is optional: without it the latest promotion is undone",
    **{(v, "gate_path", label): "a gate file that does not load is passed over to the cosine gate, the reason in "
                                "the result (search_core.gate.model.choose_gate); a search never fails over its gate"
       for v in ("search", "eval") for label in ("text-file", "empty-file", "json-list", "binary-file")},
}


@dataclass(frozen=True)
class Case:
    verb: str
    param: str
    label: str
    value: str | None        # None: the option given with no value (or the argument left out)

    @property
    def id(self) -> str:
        return f"{self.verb or 'main'}:{self.param}:{self.label}"


def _param(v: str, name: str) -> click.Parameter:
    cmd = dict((verb(p), c) for p, c in walk(main))[v]
    return next(p for p in cmd.params if p.name == name)


def cases(bad: dict | None = None) -> list[Case]:
    bad = bad or {k: "{bad_" + k + "}" for k in BAD_NAMES}
    out = []
    for path, cmd in walk(main):
        v = verb(path)
        for p in cmd.params:
            if isinstance(p, click.Option) and (p.is_flag or p.count):
                continue                          # a flag takes no value to get wrong
            for label, value in wrong_values(v, p, bad):
                out.append(Case(v, p.name, label, value))
            if (v, p.name, "no-value") not in SKIP:
                out.append(Case(v, p.name, "no-value", None))
    return out


BAD_NAMES = ("missing", "dir", "text", "empty", "json_list", "under_file", "not_toml", "toml_wrong_type",
             "daemon_wrong_type", "yaml_list", "not_yaml", "a_ledger", "an_index")
CASES = cases()


def _write_bad(root: Path, index: Path, ledger: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(index, root / "an-index.sqlite")          # copies: a case that wrote to them would change nothing
    shutil.copy(ledger, root / "a-ledger.sqlite")
    (root / "empty-dir").mkdir(exist_ok=True)
    files = {"text": ("notes.txt", "this is a note, not a database\n"), "empty": ("empty.sqlite", ""),
             "json_list": ("list.json", "[1, 2, 3]\n"), "not_toml": ("broken.toml", "top_k = = [\n"),
             "toml_wrong_type": ("wrong-type.toml", '[search]\ntop_k = "five"\n'),
             "daemon_wrong_type": ("daemon-wrong-type.toml", '[daemon]\ntimezone = 9\n'),
             "yaml_list": ("list.yaml", "- a question\n- another\n"), "not_yaml": ("broken.yaml", "a: [b\n  c: {\n")}
    bad = {"missing": str(root / "no-such-file.sqlite"), "dir": str(root / "empty-dir"),
           "under_file": str(root / "notes.txt" / "inside"), "an_index": str(root / "an-index.sqlite"),
           "a_ledger": str(root / "a-ledger.sqlite")}
    for key, (name, text) in files.items():
        (root / name).write_text(text, encoding="utf-8")
        bad[key] = str(root / name)
    return bad


SMALL_GOLD = """name: small
questions:
  - {id: q1, level: L0, query: "GraphRAG 커뮤니티", gold: ["ai/graphrag"]}
  - {id: q2, level: L0, query: "RRF 점수", gold: ["ai/rrf"]}
  - {id: q3, level: L0, query: "김치찌개 재료", gold: ["life/kimchi"]}
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory, demo_index) -> Files:
    """Working inputs built once for the module: the demo index (a copy: `calibrate apply` writes beside
    it), two `eval` results, a real sweep's ledger, a recall log with calls, a daemon config."""
    from search_core.recall.log import RecallLog
    root = tmp_path_factory.mktemp("option-values")
    db = root / "index.sqlite"
    shutil.copy(demo_index, db)
    small_vault = write_vault(root / "small-vault", SMALL_VAULT)
    (root / "small-gold.yaml").write_text(SMALL_GOLD, encoding="utf-8")
    ledger = root / "ledger.sqlite"
    shutil.copy(ROOT / "tests/tuner/ledger/data/schema2-demo-sweep.sqlite", ledger)
    log = RecallLog(root / "recall-log.sqlite")
    for i in range(3):
        log.write({"session": "s", "query": f"question {i}", "injected": i == 0,
                   "stopped_by": None if i == 0 else "threshold", "threshold": 0.82,
                   "top_scores": [{"note_id": "ai/rag/graphrag", "score": 0.03, "cosine": 0.8}],
                   "features": {"probability": 0.3 * i, "top_cos": 0.8, "band": "skip", "kind": "model"}})
    log.close()
    from search_core.recall.log import label_calls
    label_calls(root / "recall-log.sqlite", [(1, "relevant")])      # `gold from-log` needs a labelled call
    daemon_toml = root / "daemon.toml"
    daemon_toml.write_text(f'[daemon]\ntimezone = "UTC"\nruns = "{root / "daemon-runs"}"\n[sweep]\n'
                           f'vault = "{ROOT / "experiments/demo-vault"}"\ndb = "{db}"\n'
                           f'gold = "{ROOT / "experiments/gold/demo-tune.yaml"}"\n'
                           f'holdout = "{ROOT / "experiments/gold/demo-holdout.yaml"}"\nrounds = 1\n', encoding="utf-8")
    good = {"db": db, "gold": ROOT / "experiments/gold/demo-tune.yaml", "small_vault": small_vault,
            "small_gold": root / "small-gold.yaml", "ledger": ledger, "log": root / "recall-log.sqlite",
            "daemon_toml": daemon_toml, "hermes_home": root / "hermes", "sweep_runs": root / "sweep-runs"}
    good["hermes_home"].mkdir()
    good["fusion_space"] = root / "fusion-space.toml"
    good["fusion_space"].write_text(FUSION_SPACE, encoding="utf-8")
    # a sweep that got this far would time the test embedder first: its unit costs are set by hand instead
    hand_set_calibrations(good["sweep_runs"] / "cost-model",
                          units_by_embedder={FAKE_EMBEDDER: HAND_SET_UNITS["e5-small"]})
    evals = root / "evals"
    r = CliRunner().invoke(main, ["eval", "--db", str(db), "--gold", str(good["gold"]), "--no-audit",
                                  "--timing-samples", "0", "--out", str(evals)])
    assert r.exit_code == 0, r.output
    good["eval_a"] = next(evals.glob("*.json"))
    good["eval_b"] = root / "eval-b.json"
    shutil.copy(good["eval_a"], good["eval_b"])
    return Files(root, {k: str(v) for k, v in good.items()}, _write_bad(root / "bad", db, ledger))


class LongRunStarted(AssertionError):
    pass


@pytest.fixture(autouse=True)
def tripwires(monkeypatch):
    """The step where each serving or looping verb would stop returning raises instead: a wrong value that
    got through to it fails its case in a second rather than hanging the run."""
    import search_core.index.watch
    import search_core.recall.mcp
    import search_core.recall.server
    import tuner.ab.run
    import tuner.daemon.scheduler
    import tuner.demo
    import tuner.sweep.loop

    def wire(what):
        def tripped(*a, **k):
            raise LongRunStarted(f"{what} started: the wrong value was accepted")
        return tripped
    monkeypatch.setattr(search_core.recall.server, "run_server", wire("the HTTP server"))
    monkeypatch.setattr(search_core.recall.mcp, "run_stdio", wire("the MCP server"))
    monkeypatch.setattr(tuner.daemon.scheduler.Daemon, "serve", wire("the daemon"))
    monkeypatch.setattr(tuner.daemon.scheduler, "run_once", wire("a daemon job"))
    monkeypatch.setattr(tuner.sweep.loop.Sweep, "run", wire("the sweep"))
    monkeypatch.setattr(tuner.demo, "run_demo", wire("the demo"))
    monkeypatch.setattr(tuner.ab.run, "run_ab", wire("the A/B"))
    monkeypatch.setattr(search_core.index.watch.VaultWatcher, "run", wire("the vault watcher"))


def build_args(case: Case, files: Files, fresh: Path) -> tuple[list[str], str | None]:
    """BASE for the verb with the case's parameter set to its wrong value (or given with none), and that
    value with its file names filled in."""
    fill = {**files.good, **{"bad_" + k: v for k, v in files.bad.items()}, "fresh": str(fresh),
            "port": str(free_port())}

    def sub(s: str) -> str:
        return s.format(**fill) if "{" in s else s
    positionals, opts = BASE.get(case.verb, ([], {}))
    positionals = [sub(a) for a in positionals]
    param = _param(case.verb, case.param)
    value = None if case.value is None else sub(case.value)
    if isinstance(param, click.Argument):
        args_params = [p for p in _cmd(case.verb).params if isinstance(p, click.Argument)]
        i = args_params.index(param)
        positionals = positionals[:i] if value is None else positionals[:i] + [value] + positionals[i + 1:]
        return [*case.verb.split(), *positionals, *_flat(opts, sub)], value
    rest = {k: v for k, v in opts.items() if k not in param.opts and k not in param.secondary_opts}
    tail = [param.opts[0]] if value is None else [param.opts[0], value]
    return [*case.verb.split(), *positionals, *_flat(rest, sub), *tail], value


def _cmd(v: str) -> click.Command:
    return dict((verb(p), c) for p, c in walk(main))[v]


def _flat(opts: dict, sub) -> list[str]:
    out = []
    for k, v in opts.items():
        out += [k] if v is None else [k, sub(v)]
    return out


def names_it(output: str, param: click.Parameter, value: str | None) -> bool:
    """The message names the option (or argument) or the wrong value itself."""
    names = [*param.opts, param.human_readable_name, param.name.replace("_", "-"), param.name.upper()]
    if value:      # a list's wrong item is its first (wrong_values puts it there)
        names += [value, str(Path(value)), value.split(",")[0]]
    return any(n and n in output for n in names)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_wrong_value_is_refused_with_a_message(case, files, tmp_path, monkeypatch):
    if (case.verb, case.param, case.label) in SKIP:
        pytest.skip(SKIP[(case.verb, case.param, case.label)])
    monkeypatch.chdir(tmp_path)        # a value that gets through (`--out ""` is the working folder) writes here
    args, value = build_args(case, files, tmp_path / "fresh")
    r = CliRunner().invoke(main, args, catch_exceptions=True)
    shown = f"autoresearch {' '.join(args)}\n-> exit {r.exit_code}\n{r.output}"
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        import traceback
        shown += "".join(traceback.format_exception(r.exception))
        pytest.fail(f"uncaught {type(r.exception).__name__}: {shown}")
    assert r.exit_code in (1, 2), shown
    assert "Traceback" not in r.output, shown
    assert r.output.strip(), shown
    assert names_it(r.output, _param(case.verb, case.param), value), f"the message names neither: {shown}"


def test_every_verb_with_required_parameters_has_working_values():
    """A new verb with a required option needs working values in BASE, or its cases would stop at the
    missing option and test nothing."""
    missing = [verb(p) for p, c in walk(main) if any(q.required for q in c.params) and verb(p) not in BASE]
    assert not missing, f"add working values to BASE for: {missing}"


def test_the_cases_cover_every_option_of_every_verb():
    covered = {(c.verb, c.param) for c in CASES}
    for path, cmd in walk(main):
        for p in cmd.params:
            if isinstance(p, click.Option) and p.is_flag:
                continue
            assert (verb(path), p.name) in covered, (verb(path), p.name)
            if isinstance(p.type, click.Path):     # a new file option: say what it holds, so it gets wrong files
                assert role_of(verb(path), p), f"{verb(path)} {p.opts}: add it to ROLE_BY_NAME or ROLE_BY_VERB"


# Verbs whose working values still end in an error, and why that is enough to reach every wrong value.
BASE_ENDS_IN_ERROR = {
    "calibrate apply": "no proposal was written for the index; every option is read before that is found",
    "calibrate undo": "nothing was applied to undo; --db is read before that is found",
}


@pytest.mark.parametrize("v", sorted(BASE), ids=sorted(BASE))
def test_the_working_values_get_past_every_check(v, files, tmp_path, monkeypatch):
    """Without this, a case could pass because the working values themselves were refused."""
    monkeypatch.chdir(tmp_path)
    positionals, opts = BASE[v]
    fill = {**files.good, "fresh": str(tmp_path / "fresh"), "port": str(free_port())}
    args = [*v.split(), *(a.format(**fill) for a in positionals), *_flat(opts, lambda s: s.format(**fill))]
    r = CliRunner().invoke(main, args, catch_exceptions=True)
    if isinstance(r.exception, LongRunStarted):
        return                                  # it got as far as serving, looping or sweeping
    if v in BASE_ENDS_IN_ERROR:
        assert r.exit_code == 1 and "Traceback" not in r.output, r.output
        return
    assert r.exit_code == 0, f"autoresearch {' '.join(args)}\n-> exit {r.exit_code}\n{r.output}{r.exception!r}"
