"""Whether a gold set can tell configs apart at all: a set whose every answerable question is already at
rank 1 scores every config that keeps them there alike, so no change can show a gain on it and a sweep
over it keeps nothing. `eval` warns about such a set, and says what to add."""

from __future__ import annotations

from dataclasses import dataclass

# the levels a set that cannot discriminate lacks, easiest first, with what each asks of the search
# (docs/first-gold-set.md has a Korean example of each)
HARDER_LEVELS = (("L1", "paraphrase", "the question in other words than the note's"),
                 ("XL", "cross-lingual", "an English term for a Korean note, or the other way round"),
                 ("L2", "multi-hop", "the answer needs two linked notes"))
FIRST_GOLD_SET = "docs/first-gold-set.md"
CANNOT_DISCRIMINATE = "this gold set cannot discriminate"   # how the warning starts (eval --json: warnings)


@dataclass(frozen=True)
class Saturation:
    """answerable: questions with gold; at_rank1: of them, with a gold note first; probes: questions with none."""
    answerable: int
    at_rank1: int
    probes: int

    @property
    def saturated(self) -> bool:
        return self.answerable > 0 and self.at_rank1 == self.answerable

    def warning(self) -> str:
        add = ", ".join(f"{lv} {name} ({what})" for lv, name, what in HARDER_LEVELS)
        probes = ("" if self.probes else
                  "; and probes, questions whose answer is not in the vault (`autoresearch probes make`)")
        return (f"{CANNOT_DISCRIMINATE}: all {self.answerable} answerable questions are at rank 1, so no config "
                f"can score better on it and a sweep over it keeps nothing. Add harder questions: {add}{probes}. "
                f"How: {FIRST_GOLD_SET}")


def saturation(rows) -> Saturation:
    """rows: an evaluation's per-question rows (anything with `level` and `first_rank`)."""
    answerable = [r for r in rows if r.level != "probe"]
    return Saturation(len(answerable), sum(r.first_rank == 1 for r in answerable), len(rows) - len(answerable))
