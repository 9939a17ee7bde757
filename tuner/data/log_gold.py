"""Labels from use become gold: recall-log calls a person labelled, as questions of a gold set.

A call labelled `relevant` (the vault could answer it; `autoresearch recall-log label` or the /label page)
becomes a question whose gold is the note the injected block led with; a call labelled `irrelevant`
becomes a probe. A call that asks again what an existing gold set (or an earlier labelled call) already
asks is left out, by the near-duplicate test the recall path folds calls with (search_core.recall.suggest:
twin_labels, character-trigram Jaccard >= 0.6). The log is read by its one reader (read_logged_calls).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from search_core import SearchCoreError
from search_core.files import atomic_write_text
from search_core.recall.log import read_logged_calls
from search_core.recall.suggest import twin_labels

from tuner.data.gold import Question, load_gold

LABEL_ANSWERABLE, LABEL_PROBE = "relevant", "irrelevant"


@dataclass(frozen=True)
class LogGold:
    questions: tuple[Question, ...]                # source "log"
    log: str
    labelled: int                                  # labelled calls in the window
    left_out: dict[str, int] = field(default_factory=dict)   # reason -> count


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts)) if ts else "at an unknown time"


def gold_from_log(log_path: str | Path, *, since_s: float | None = None, existing=(),
                  now: float | None = None, allow_empty: bool = False) -> LogGold:
    """The labelled calls of the window (in the log's order) as gold questions and probes; `existing`: gold set
    paths whose questions a call must not repeat. allow_empty: no question left is an answer (the daemon's
    weekly job, which adds to what it kept), not an error."""
    calls = read_logged_calls(log_path, since_s, now)
    asked = [q.query for p in existing for q in load_gold(p).questions]
    labelled = [c for c in calls if c.label in (LABEL_ANSWERABLE, LABEL_PROBE)]
    left: Counter = Counter()
    kept: list[tuple[str, bool]] = []
    out = []
    for c in labelled:
        if not c.query:
            left["its query was not kept (recall-log privacy = hash)"] += 1
            continue
        relevant = c.label == LABEL_ANSWERABLE
        if relevant and not c.top_note:
            left["labelled relevant, but the search found no note to lead with"] += 1
            continue
        if asked and twin_labels([(q, True) for q in asked], [c.query])[0] is not None:
            left["asks what an existing gold set asks"] += 1
            continue
        if kept and twin_labels(kept, [c.query])[0] is not None:
            left["asks what an earlier labelled call asks"] += 1
            continue
        kept.append((c.query, relevant))
        why = f"recall-log call {c.id}, labelled {_when(c.labelled_at)}"
        if relevant:
            led = "the injected block led with it" if c.injected else "the gate held the block back; it would have led"
            out.append(Question(f"log-{c.id}", "L1", c.query.strip(), (c.top_note,), f"{why} relevant ({led})",
                                source="log"))
        else:
            out.append(Question(f"log-{c.id}", "probe", c.query.strip(), (), f"{why} irrelevant", source="log"))
    if not out and not allow_empty:
        window = "" if since_s is None else " in the --since window"
        raise SearchCoreError(
            f"{log_path}: no labelled call{window} to make a question of ({len(labelled)} labelled"
            + (f"; left out: {', '.join(f'{k} {v}' for k, v in left.items())}" if left else "")
            + "); label calls with `autoresearch recall-log label` or the /label page of `serve`")
    return LogGold(tuple(out), str(log_path), len(labelled), dict(left))


def write_gold_from_log(log_path: str | Path, out: str | Path, *, since_s: float | None = None, existing=(),
                        now: float | None = None) -> LogGold:
    """gold_from_log, written atomically to `out` as a gold set."""
    lg = gold_from_log(log_path, since_s=since_s, existing=existing, now=now)
    n_probes = sum(q.level == "probe" for q in lg.questions)
    header = [f"# Questions from use: recall-log calls a person labelled ({lg.log}); {len(lg.questions) - n_probes} "
              f"answerable (gold: the note the block led with), {n_probes} probes.",
              "# L1 is a guess: change the level of a lookup to L0, of a question in the other script to XL."]
    if lg.left_out:
        header.append("# Left out: " + "; ".join(f"{k}: {v}" for k, v in sorted(lg.left_out.items())))
    body = yaml.safe_dump({"name": Path(out).stem, "questions": [q.to_yaml() for q in lg.questions]},
                          allow_unicode=True, sort_keys=False, width=1000)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, "\n".join(header) + "\n" + body)
    return lg
