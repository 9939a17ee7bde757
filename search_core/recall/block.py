"""The block a recall injects: one line per hit (title, path, plain-text snippet), under a header that says
when the gate's pass was a narrow one, cut to the caller's budget; and the answer that carries it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from search_core.gate.model import WHICH_GATE
from search_core.search.markup import clean_markup

# Reasons a block that passed the gate is empty: every line was one the caller already holds (its `held`
# lines or `exclude_notes`), or the caller's char_budget leaves no room for the header and one line.
ALREADY_HELD, NO_ROOM = "already_held", "no_room"
# A YAML block ("--- title: x tags: [a] ---") that reached a snippet, e.g. a note with a duplicated header.
_FRONTMATTER_RE = re.compile(r"(?:^|\s)-{3,}\s+(?:[\w-]+\s*:.*?)\s-{3,}(?=\s|$)", re.DOTALL)
_HEADER = "Related notes from your vault:"


def strip_frontmatter(text: str) -> str:
    text = _FRONTMATTER_RE.sub(" ", text)
    text = re.sub(r"(?:^|\s)-{3,}(?=\s|$)", " ", text)      # a bare fence or rule left over
    return re.sub(r"\s+", " ", text).strip()


# The gate passed, but inside its caveat band (a probability just over the threshold): the agent is told.
_CAVEAT_HEADER = ("Possibly related notes from your vault (low confidence: the gate passed near its threshold; "
                  "check before relying on them):")
CAVEAT_BAND = "caveat"


def header_for(gate: dict | None) -> str:
    """The block's first line: the caveat header when the gate's band says the pass was a narrow one."""
    return _CAVEAT_HEADER if (gate or {}).get("band") == CAVEAT_BAND else _HEADER


def hit_lines(hits) -> tuple[str, ...]:
    """One line per hit: title, where it lives (its vault-relative path, else its note id) and its
    snippet as plain text (search_core.search.markup: no link lines, footnotes or markup)."""
    return tuple(f"- {h.title} ({getattr(h, 'path', None) or h.note_id}): "
                 f"{clean_markup(strip_frontmatter(h.snippet))}".rstrip(": ") for h in hits)


def compose_block(lines, budget: int, held=(), header: str = _HEADER) -> str:
    """Header + the lines the caller does not hold yet, cut to `budget` characters (never over it)."""
    return compose_notes(lines, budget, held, header=header)[0]


def compose_notes(lines, budget: int, held=(), note_ids=None, exclude=(),
                  header: str = _HEADER) -> tuple[str, tuple[str, ...]]:
    """compose_block, and the note ids of the lines that made it in. `exclude` leaves out whole notes
    (an agent that keeps earlier blocks in its transcript sends the notes it was already given)."""
    held = {h.strip() for h in held}
    exclude = set(exclude)
    ids = tuple(note_ids) if note_ids is not None else (None,) * len(lines)
    out, kept, used = [], [], len(header)
    for line, nid in zip(lines, ids):
        if line.strip() in held or (nid is not None and nid in exclude):
            continue
        room = budget - used - 1
        if room <= 1:
            break
        if len(line) > room:
            out.append(line[: room - 1] + "…")
            kept.append(nid)
            break
        out.append(line)
        kept.append(nid)
        used += len(line) + 1
    if not out:
        return "", ()
    return "\n".join([header, *out]), tuple(n for n in kept if n is not None)


def empty_block_reason(lines, held=(), note_ids=None, exclude=()) -> str:
    """Why compose_notes gave nothing for lines that passed the gate: every line was already held or
    excluded (ALREADY_HELD), or the budget had no room for one (NO_ROOM)."""
    held = {h.strip() for h in held}
    ids = tuple(note_ids) if note_ids is not None else (None,) * len(lines)
    if all(line.strip() in held or (nid is not None and nid in exclude) for line, nid in zip(lines, ids)):
        return ALREADY_HELD
    return NO_ROOM


@dataclass(frozen=True)
class RecallBlock:
    block: str
    injected: bool
    gate: dict                  # the gate's features in force: top_score, threshold, ...
    stopped_by: str | None      # a name from GATES, "error", "nothing_queued", "already_held", "no_room", or None
    call_id: int | None = None  # the recall-log row (for `recall-log label`)
    error: str | None = None
    notes: tuple[str, ...] = ()  # the note ids whose lines are in the block

    @property
    def caveat(self) -> bool:
        """The block went in on a narrow pass (its header says so)."""
        return self.injected and self.gate.get("band") == CAVEAT_BAND

    def as_dict(self, explain: bool = False) -> dict:
        """The answer of /prefetch and MCP recall: the decision and its reason (`gate`: inject, band,
        kind, probability, top_score and the cosine threshold, reason, and `decided_by`: the deciding gate's kind,
        file and cut, as /search says it); the features the gate read only with `explain`."""
        gate = self.gate if explain else {k: self.gate[k] for k in LEAN_GATE_KEYS if k in self.gate}
        if not explain and "gate" in self.gate:
            # the cut the deciding gate applied (a probability for a model): `threshold` is the cosine one, and
            # a model's probability read beside it alone looked compared with it (0.83 "over" 0.82; the cut 0.65)
            gate["decided_by"] = self.gate["gate"]
        return {"block": self.block, "injected": self.injected, "caveat": self.caveat, "gate": gate,
                "stopped_by": self.stopped_by, "call_id": self.call_id, "error": self.error, "notes": list(self.notes)}


# What a recall answer says about its gate by default: the decision and why, not the ~38 features behind it.
LEAN_GATE_KEYS = ("top_score", "threshold", "probability", "band", "kind", "reason")


def gate_features(result) -> dict:
    """What the result's gate read and which gate decided (for the log's JSON column and the block):
    the top cosine and the cosine threshold, the model's probability, band, kind and reason, the decision
    under "gate" (kind, source file, threshold), and the features the model read."""
    gate = result.gate
    d = gate.decision
    decided = d.to_json()
    out = {"top_score": gate.top_score, "threshold": gate.threshold, "probability": d.probability, "band": d.band,
           "kind": d.kind, "reason": d.reason, "gate": {k: decided[k] for k in WHICH_GATE}}
    return {**out, **(gate.features or {})}
