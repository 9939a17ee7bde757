"""A sweep with a time budget spends it on evidence first: more questions from the vault, when the tuning set
is too small to tell the gains its rounds will see from noise.

Before round 1 of a new sweep whose tuning set holds questions the vault supplies (`gold make`, source
`vault`), this step measures what the set can detect:

1. It evaluates the start and one pilot change per ranking variable of the space (each fusion weight and
   rrf_k moved half way to the far end of its range: the kind of change the rounds will try), and reads
   each pilot's per-question changes against the start (tuner/sweep/evidence.py).
2. The median of the pilots' gains (those that gained) sets the size the night needs: a typical gain of the
   rounds to come, not the easiest one; when none gained but some moved questions both ways, the smallest
   gain worth finding (SMALLEST_GAIN) at the widest spread they showed. The gain test detects it at 80 %
   power once n >= questions_needed(gain, spread) (tuner/sweep/power.py, the keep rule's own power
   calculation, checked by simulation in benchmarks/bench_keep_rule.py), if the questions added move as the
   set's do. A set that already detects it is left alone, and so is one where no pilot moved a question.
3. Otherwise it makes more questions from the vault, up to that size and to what the budget allows: the
   night's predicted cost per question (the start's evaluation plus `rounds` pilot-like re-fusions, measured
   here) may take at most BUDGET_SHARE of the budget left. Anchors come first (the kind whose config order
   agreed with hand-written questions: BENCHMARKS.md, questions the vault supplies), each with its link left
   out (`mask_link`: the link's text names the gold note, which the entity channel matches; masked, johngrib's
   agreement across the configs a night visits rose from -0.11 to 0.89), then the other kinds. A question
   the set already asks (the same source line about the same note) is not added twice.

The grown set is a new file (the set it grew from is only read), named by its content, which the sweep then
pins. What the step did (questions before and after, the gain it sized for, seconds making questions and
sizing them) is recorded with the sweep's params, and the morning report says how the night was spent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.config import SearchConfig

from tuner.data.gold import GoldSet, load_gold
from tuner.sweep.evidence import ranking_evidence
from tuner.sweep.power import detectable_gain, questions_needed
from tuner.sweep.space import Space
from tuner.sweep.variables import FUSION, kind_of

# The grown night's predicted evaluation may take at most this share of the budget left: the rest covers
# rounds dearer than a re-fusion (new channel lists, an index build) and the holdout check at the end.
BUDGET_SHARE = 0.5
PILOT_VARIABLES = ("w_dense", "w_sparse", "w_ngram", "w_decomposed", "w_entity", "rrf_k")
# The smallest gain worth finding, when no pilot gained: a kept fusion step of the nights on made questions
# gained 0.7 (johngrib) to 2.2 (demo) score100 points on them (benchmarks/bench_recovery.py, 600 questions);
# 0.01 of MRR, hit@5 or nDCG@10 for those objectives.
SMALLEST_GAIN = {"score100": 1.0, "other": 0.01}


@dataclass(frozen=True)
class Pilot:
    """One change of the start the step evaluated to size the night: its gain in the objective's units and
    the spread of its per-question changes (the unit the gain test's power turns on)."""
    variable: str
    value: float
    gain: float
    spread: float
    up: int
    down: int

    def to_json(self) -> dict:
        return {"variable": self.variable, "value": self.value, "gain": self.gain, "spread": self.spread,
                "up": self.up, "down": self.down}

    @classmethod
    def from_json(cls, d: dict) -> "Pilot":
        return cls(d["variable"], d["value"], d["gain"], d["spread"], d["up"], d["down"])


@dataclass(frozen=True)
class EvidenceStep:
    """What a sweep with a time budget did before its rounds. outcome: "grown" (questions made), "enough"
    (the set detects the gain sized for), "no gain" (no pilot moved a question: nothing to size for), "no room" (the
    budget allows no more questions), "vault spent" (the vault has no question the set lacks), "stopped"
    (asked to stop first)."""
    outcome: str
    why: str
    objective: str
    questions_before: int          # answerable tuning questions, every kind
    questions_after: int
    vault_before: int              # of them from the vault's text
    vault_after: int
    anchors_added: int
    target_gain: float | None      # the gain the night needs to detect (the median of the pilots' gains), objective units
    detectable_before: float | None  # the smallest gain the set detects at 80 % power, objective units
    detectable_after: float | None
    needed: int | None             # questions the gain test needs for target_gain
    allowed: int | None            # questions the budget allows
    sizing_s: float                # evaluating the start and the pilots
    making_s: float                # making and writing the questions
    budget_s: float
    pilots: tuple[Pilot, ...] = ()
    gold_before: str = ""
    gold_after: str = ""

    @property
    def seconds(self) -> float:
        return self.sizing_s + self.making_s

    def to_json(self) -> dict:
        return {"outcome": self.outcome, "why": self.why, "objective": self.objective,
                "questions_before": self.questions_before, "questions_after": self.questions_after,
                "vault_before": self.vault_before, "vault_after": self.vault_after,
                "anchors_added": self.anchors_added, "target_gain": self.target_gain,
                "detectable_before": self.detectable_before, "detectable_after": self.detectable_after,
                "needed": self.needed, "allowed": self.allowed, "sizing_s": self.sizing_s,
                "making_s": self.making_s, "budget_s": self.budget_s,
                "pilots": [p.to_json() for p in self.pilots], "gold_before": self.gold_before,
                "gold_after": self.gold_after}

    @classmethod
    def from_json(cls, d: dict) -> "EvidenceStep":
        return cls(**{**d, "pilots": tuple(Pilot.from_json(p) for p in d.get("pilots", ()))})

    def describe(self) -> str:
        """One sentence for the morning report and the daemon's log."""
        spent = f"{self.sizing_s:.0f} s sizing the tuning set (the start and {len(self.pilots)} pilot changes)"
        if self.outcome == "grown":
            return (f"{spent}, {self.making_s:.0f} s making questions from the vault: {self.questions_before} -> "
                    f"{self.questions_after} tuning questions ({self.vault_before} -> {self.vault_after} from the "
                    f"vault's text, {self.anchors_added} of the added ones anchors with the link left out); "
                    f"{self.why}")
        return f"{spent}; the set was left at {self.questions_before} questions: {self.why}"


def pilot_value(var, start_value: float) -> float:
    """Half way from the start's value to the far end of the variable's range, on its grid."""
    lo, hi = float(var.low), float(var.high)
    far = hi if abs(hi - start_value) >= abs(start_value - lo) else lo
    v = start_value + (far - start_value) / 2
    if var.kind == "int":
        return int(round(v))
    if var.step:
        v = lo + round((v - lo) / var.step) * var.step
    return round(v, 6)


def night_size(n: int, need: int | None, per_question_s: float, remaining_s: float, available: int) -> tuple[int, int]:
    """(questions to add, questions the budget allows in all): up to `need`, to what BUDGET_SHARE of the
    remaining budget buys at per_question_s (a night's predicted seconds per tuning question), and to the
    `available` questions the vault has beyond the set."""
    allowed = int(max(0.0, remaining_s) * BUDGET_SHARE / per_question_s) if per_question_s > 0 else n + available
    if need is None:
        return 0, allowed
    return max(0, min(need - n, allowed - n, available)), allowed


def night_target(pilots, objective: str) -> Pilot | None:
    """The gain the night needs to detect, as a pilot (its gain and spread): the median of the pilots' gains
    (the lower one of an even count), a typical gain of the rounds to come (the largest alone would size the
    set for the easiest change only). When no pilot gained but some moved questions (as many up as down), the
    smallest gain worth finding (SMALLEST_GAIN) at the widest spread they showed; None when none moved any."""
    gained = sorted((p for p in pilots if p.gain > 0), key=lambda p: p.gain)
    if gained:
        return gained[(len(gained) - 1) // 2]
    moved = [p for p in pilots if p.spread > 0]
    if not moved:
        return None
    widest = max(moved, key=lambda p: p.spread)
    return Pilot(widest.variable, widest.value, SMALLEST_GAIN.get(objective, SMALLEST_GAIN["other"]), widest.spread,
                 widest.up, widest.down)


def _answerable(gold: GoldSet) -> list:
    return [q for q in gold.questions if not q.is_probe]


def spend_on_evidence(bench, gold_path: str | Path, gold: GoldSet, start: SearchConfig, space: Space, *,
                      vault: str | Path, rounds: int, budget_s: float, objective: str, alpha: float,
                      folder: str | Path, seed: int = 0, known_notes=None, progress=None, stop=None) -> EvidenceStep:
    """The step before round 1 (module docstring). `gold` is the tuning set read from `gold_path`; the grown
    set, if any, is written under `folder` and named in the result's gold_after. stop: asked between its
    evaluations; when it says so, the set is left as it is (outcome "stopped") and the sweep stops before
    round 1."""
    progress = progress or (lambda line: None)
    stop = stop or (lambda: False)
    t0 = time.perf_counter()
    weights = bench.score_cfg.quality_weights
    points = bench.score_cfg.quality_points if objective == "score100" else 1.0
    answerable = _answerable(gold)
    n = len(answerable)
    made_before = sum(q.source == "vault" for q in answerable)
    base = bench.evaluate(start, gold)
    first_s = time.perf_counter() - t0
    pilots, refuse_s = [], []
    for name in PILOT_VARIABLES:
        if name not in space.names() or kind_of(name) is not FUSION or stop():
            continue
        var = space.get(name)
        value = pilot_value(var, float(getattr(start, name)))
        if value == getattr(start, name):
            continue
        t1 = time.perf_counter()
        cand = bench.evaluate(start.replace(**{name: value}), gold)
        refuse_s.append(time.perf_counter() - t1)
        ev = ranking_evidence(base, cand, objective, weights)
        pilots.append(Pilot(name, value, round(ev.delta * points, 4), round(ev.spread * points, 4), ev.better,
                            ev.worse))
    sizing_s = time.perf_counter() - t0
    step = dict(objective=objective, questions_before=n, questions_after=n, vault_before=made_before,
                vault_after=made_before, anchors_added=0, sizing_s=round(sizing_s, 2), making_s=0.0,
                budget_s=budget_s, pilots=tuple(pilots), gold_before=str(gold_path), gold_after=str(gold_path))
    best = night_target(pilots, objective)
    if stop():
        return EvidenceStep("stopped", "asked to stop before the set was sized", target_gain=None,
                            detectable_before=None, detectable_after=None, needed=None, allowed=None, **step)
    if best is None:
        return EvidenceStep("no gain", "no pilot change moved any question: there is no gain to size the "
                            "set for", target_gain=None, detectable_before=None, detectable_after=None, needed=None,
                            allowed=None, **step)
    detect = detectable_gain(n, best.spread, alpha=alpha)
    need = questions_needed(best.gain, best.spread, alpha=alpha)
    sized = dict(target_gain=best.gain, detectable_before=round(detect, 4), needed=need)
    if best.gain >= detect:
        return EvidenceStep("enough", f"the set of {n} detects the gain sized for ({best.variable} -> "
                            f"{best.value}: {best.gain:+.2f} {objective}, at least {detect:.2f} detectable)",
                            detectable_after=round(detect, 4), allowed=None, **sized, **step)
    # a night's predicted seconds per question: the start's first evaluation plus `rounds` re-fusions
    per_question_s = (first_s + rounds * (sum(refuse_s) / len(refuse_s))) / max(n, 1)
    remaining = budget_s - sizing_s
    t2 = time.perf_counter()
    extra = _new_questions(gold, vault, seed, known_notes)
    add, allowed = night_size(n, need, per_question_s, remaining, len(extra))
    sized["allowed"] = allowed
    if add <= 0:
        outcome, why = (("vault spent", "the vault has no question the set does not already ask") if not extra else
                        ("no room", f"the budget left ({remaining:.0f} s) allows {allowed} questions at "
                                    f"{per_question_s * 1000:.1f} ms each per night, not more than the {n} there"))
        return EvidenceStep(outcome, why + f" (sized for {best.gain:+.2f} {objective} at the spread of "
                            f"{best.variable} -> {best.value}; {need} questions would detect it)",
                            detectable_after=round(detect, 4), **sized, **{**step, "making_s": round(time.perf_counter() - t2, 2)})
    chosen = extra[:add]
    path = _write_grown(gold_path, chosen, vault, seed, folder, known_notes)
    grown = load_gold(path)
    after = _answerable(grown)
    limit = ("the size that detects it" if add == need - n else
             "what the budget allows" if n + add == allowed else "every question the vault has beyond the set")
    why = (f"the gain sized for ({best.variable} -> {best.value}: {best.gain:+.2f} {objective}, {best.up} up, "
           f"{best.down} down) is below the {detect:.2f} {n} questions detect; {need} would detect it, the budget "
           f"allows {'that' if allowed >= need else allowed}; made up to {limit}")
    progress(f"evidence: {why}")
    return EvidenceStep("grown", why, detectable_after=round(detectable_gain(len(after), best.spread, alpha=alpha), 4),
                        **sized, **{**step, "questions_after": len(after),
                                    "vault_after": sum(q.source == "vault" for q in after),
                                    "anchors_added": sum(q.kind == "anchor" for q in chosen),
                                    "making_s": round(time.perf_counter() - t2, 2), "gold_after": str(path)})


def _key(why: str, gold) -> tuple[str, tuple[str, ...]]:
    """A made question's source line and gold note(s): the same anchor masked or not is one question."""
    return why, tuple(gold)


def _new_questions(gold: GoldSet, vault, seed: int, known_notes) -> list:
    """The vault's questions the set does not ask yet, anchors first (each with its link left out), then the
    other default kinds, each in gold make's seeded order."""
    from tuner.data.vault_questions import MADE_HEADING_TITLE, make_vault_questions
    try:
        vq = make_vault_questions(vault, n=None, seed=seed, mask_link=True, heading_title=MADE_HEADING_TITLE,
                                  only_notes=known_notes)
    except SearchCoreError:
        return []
    have_ids = {q.id for q in gold.questions}
    have = {_key(q.why, q.gold) for q in gold.questions}
    fresh = [q for q in vq.questions if q.id not in have_ids and _key(q.why, q.gold) not in have]
    fresh.sort(key=lambda q: q.kind != "anchor")        # stable: gold make's order within each group
    return fresh


def _write_grown(gold_path, chosen, vault, seed: int, folder, known_notes) -> Path:
    from search_core.files import atomic_write_text
    from tuner.data.night_gold import write_night_gold
    from tuner.data.vault_questions import VaultQuestions, gold_yaml
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    added = folder / f"{Path(gold_path).stem}-added.yaml"
    atomic_write_text(added, gold_yaml(VaultQuestions(tuple(chosen), str(vault), seed), added.stem,
                                       "the sweep's evidence step (tuner/sweep/evidence_budget.py)"))
    night = write_night_gold([gold_path, added], folder, name=f"{Path(gold_path).stem}-grown", known_ids=known_notes)
    return night.path


__all__ = ["BUDGET_SHARE", "EvidenceStep", "Pilot", "SMALLEST_GAIN", "night_size", "night_target", "pilot_value", "spend_on_evidence"]
