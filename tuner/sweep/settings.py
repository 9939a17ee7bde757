"""The sweep's settings a user may set, in one table: the `sweep` verb's options and the daemon's `[sweep]` keys
are both built from it, so each setting has one name, one range, one help text and one default (SweepParams').

A setting left out takes SweepParams' default, on the command line (every option defaults to None, "not given")
as in a daemon config (a key left out). The paths a sweep reads (the index, the gold sets, the space, the vault)
and the run's own controls (resume, the ledger, the time budget) are not settings of the rule: each front end
takes those its own way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from search_core.validate import Where
from tuner.sweep.keep_rule import GATE_MEASURES, HIT5_GUARDS, SWEEP_OBJECTIVES


@dataclass(frozen=True)
class ChoiceFlag:
    """One command-line flag that sets a choice setting to one value (`--count-guard` -> hit5_guard = "count")."""
    flag: str
    value: str
    help: str


@dataclass(frozen=True)
class SweepSetting:
    name: str                       # the SweepParams field and the daemon's [sweep] key
    kind: type                      # int, float, bool or str
    default: object                 # SweepParams' default: what a setting left out is
    help: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple[str, ...] = ()
    flag: str | None = None         # the command-line option when it is not --name-with-dashes
    choice_flags: tuple[ChoiceFlag, ...] = ()   # a choice set by one flag per value instead of --name VALUE
    off_flag: str | None = None     # a bool's second flag, which sets it False (`--pairs/--no-pairs`)

    @property
    def option(self) -> str:
        """How a user sets it on the command line: the option, or its flags when each value has one."""
        if self.choice_flags:
            return "/".join(c.flag for c in self.choice_flags)
        on = self.flag or "--" + self.name.replace("_", "-")
        return f"{on}/{self.off_flag}" if self.off_flag else on

    def check(self, value, where: Where):
        """The value as the sweep takes it, or BadValue naming the file, the table, the key and what is allowed."""
        if self.kind is bool:
            return where.boolean(self.name, value)
        if self.kind is int:
            return where.integer(self.name, value, lo=self.lo, hi=self.hi)
        if self.kind is float:
            return where.number(self.name, value, lo=self.lo, hi=self.hi, lo_open=self.lo_open, hi_open=self.hi_open)
        return where.string(self.name, value, choices=self.choices or None, min_chars=1, max_chars=100)


SWEEP_SETTINGS: tuple[SweepSetting, ...] = (
    SweepSetting("rounds", int, 119, "Rounds (with --resume: the sweep's own unless given).", lo=1, hi=100_000),
    SweepSetting("seed", int, 0, "The proposal's random seed (optuna), so a night can be rerun alike.", lo=0, hi=2 ** 32 - 1),
    SweepSetting("objective", str, "score100", "What a round must raise.", choices=SWEEP_OBJECTIVES),
    SweepSetting("epsilon", float, 0.0, "The objective must rise by more than this.", lo=0.0),
    SweepSetting("gate_epsilon", float, 0.0, "Threshold rounds: the gate accuracy (0..1) must rise by more than this.",
                 lo=0.0, hi=1.0),
    SweepSetting("gate_measure", str, "balanced", "What threshold rounds are judged on: balanced accuracy over the "
                 "hand-written and labelled questions and the probes, a move kept only when the sign test over the "
                 "decisions it flips passes --noise-alpha (balanced); or every question's decision, any rise kept "
                 "(accuracy, the rule before).", choices=GATE_MEASURES),
    SweepSetting("level_guard", bool, False, "Reject a candidate that loses more than one question in a level."),
    SweepSetting("hit5_guard", str, "noninferior", "The hit@5 guard.", choices=HIT5_GUARDS, choice_flags=(
        ChoiceFlag("--noninferior-guard", "noninferior",
                   "The hit@5 guard (the default): a test, kept only when the one-sided 95% upper bound of the true "
                   "hit@5 drop, from the questions that left the top 5 and those that came in, is below --hit5-margin."),
        ChoiceFlag("--count-guard", "count",
                   "The older hit@5 guard: only the number of tuning questions hit must hold, so a swap passes."),
        ChoiceFlag("--question-guard", "question",
                   "The older per-question veto: no tuning question in the baseline's top 5 may leave it (on a large "
                   "set it rejects nearly every ranking change)."))),
    SweepSetting("hit5_margin", float, 2.0, "The noninferior guard's margin, in points of hit@5.",
                 lo=0.0, hi=100.0, lo_open=True),
    SweepSetting("guard_alpha", float, 0.05, "The noninferior guard's one-sided level: its false-keep rate for a true drop "
                 "of the margin.", lo=0.0, hi=0.5, lo_open=True),
    SweepSetting("noise_alpha", float, 0.05, "A gain that moves the ranking is kept only when the paired randomization "
                 "test over the tuning questions gives p below this (1: keep any gain).", lo=0.0, hi=1.0, lo_open=True),
    SweepSetting("latency_budget_ms", float, None, "Reject a candidate whose predicted p95 (ms) is over this.",
                 lo=0.0, lo_open=True, flag="--latency-budget"),
    SweepSetting("timing_samples", int, 0, "Repeat timed passes until the MEASURED p95 stands on this many timings "
                 "(0: one pass). It is recorded beside the cost model's prediction, which alone decides.",
                 lo=0, hi=10_000),
    SweepSetting("pairs", bool, True, "Once a full cycle of single-variable rounds against the baseline kept nothing, "
                 "move coupled pairs of fusion variables together (w_ngram+rrf_k, w_sparse+rrf_k, w_dense+rrf_k, "
                 "w_ngram+w_sparse), each proposed over its 2-D grid and judged by the same rule.", off_flag="--no-pairs"),
    SweepSetting("default_round", bool, True, "Round 1 tries the shipped default: every fusion and retrieval variable "
                 "of the space whose starting value differs from the shipped one, moved to it together and judged by "
                 "the same rule (no round when none differs).", off_flag="--no-default-round"),
    SweepSetting("split", float, None, "No holdout file: tune on this fraction of the tuning set, hold out the rest.",
                 lo=0.0, hi=1.0, lo_open=True, hi_open=True),
)

SETTING_NAMES = tuple(s.name for s in SWEEP_SETTINGS)


def setting(name: str) -> SweepSetting:
    for s in SWEEP_SETTINGS:
        if s.name == name:
            return s
    raise KeyError(f"no sweep setting {name!r}; valid: {', '.join(SETTING_NAMES)}")


def default_of(name: str):
    """The default SweepParams declares for a setting (a left-out setting's value, on every front end)."""
    return setting(name).default


def given_settings(values: dict) -> dict[str, int | float | bool | str]:
    """The settings a front end was given (None: not given; a bool flag not set is not given either, unless the
    bool has a flag that sets it False), checked by kind, for SweepParams(**...)."""
    out = {}
    for s in SWEEP_SETTINGS:
        v = values.get(s.name)
        if v is None or (s.kind is bool and v is False and not s.off_flag):
            continue
        out[s.name] = s.kind(v)
    return out


SWEEP_TABLE_PATHS = ("vault", "db", "gold", "holdout", "space", "score_config", "start_config")


@dataclass(frozen=True)
class SweepTable:
    """A daemon config's [sweep] table (tuner.daemon.config checks it and makes its paths absolute): the files a
    night's sweep reads, and the settings it gives by the table above; a setting left out takes SweepParams'
    default (`setting`)."""
    vault: str | None = None
    db: str | None = None
    gold: str | None = None
    holdout: str | None = None
    space: str | None = None
    score_config: str | None = None
    start_config: str | None = None
    settings: dict[str, int | float | bool | str] = field(default_factory=dict)   # name -> value given

    @classmethod
    def of(cls, sweep: dict) -> SweepTable:
        """From the table as read (load_daemon_config has checked every value)."""
        return cls(**{k: sweep.get(k) for k in SWEEP_TABLE_PATHS}, settings=given_settings(sweep))

    def setting(self, name: str) -> int | float | bool | str | None:
        """The value the night's sweep takes: the one given, else SweepParams' default."""
        return self.settings.get(name, default_of(name))
