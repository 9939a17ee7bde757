"""Which script a text is written in, and whether a question is asked across scripts.

A Korean question about notes written in English (or an English one about Korean notes) shares few words with
its answer: the keyword lists then match the words it shares with other notes, and the meaning (the dense
list) is the one channel that crosses. SearchConfig.w_dense_cross weighs that list more for such a question.
"""

from __future__ import annotations

import re

from search_core.index.ngram_postings import HANGUL_RE

# A question is asked across scripts when each of the dense list's first CROSS_SCRIPT_NOTES notes has a Hangul
# share at least CROSS_SCRIPT_GAP away from the question's. Chosen with the weight on the tuning parts: the
# first note alone, or a gap of 0.3, also moved a johngrib holdout question out of the top 5
# (docs/lab-notes/peers-2026-12.md).
CROSS_SCRIPT_NOTES = 3
CROSS_SCRIPT_GAP = 0.5
_LATIN_CHAR = re.compile(r"[A-Za-z]")


# A question whose meaning points across scripts where its words do not: the dense list's first note is written
# in the other script, on the Hangul side of the question (an English question about a Korean note), and neither
# keyword list has it among its first ALONE_DEPTH. The keywords then matched the question's English words in other
# notes (aegis1920: "splitting the shared database when migrating a monolith to microservices" put its SQL note
# `database` first, the Korean note on the book dense alone found, and no list else), whatever the n-gram lead.
# Found on aegis1920's English questions (that vault is no check of it) and measured at the cross-script weight on
# every set's questions: 9 moved, all up (johngrib, voyager003, aegis1920), none fell; 5 or 10 deep alike, 20 or
# 50 lift fewer. With the question on either side of the scripts, Korean questions about English notes fell too
# (hoonti06 MRR 0.956 -> 0.927), so the note must be on the Hangul side: docs/lab-notes/peers-2026-12.md.
ALONE_DEPTH = 10


def script_counts(text: str) -> tuple[int, int]:
    """(Hangul syllables, Latin letters) in `text`."""
    return len(HANGUL_RE.findall(text)), len(_LATIN_CHAR.findall(text))


def hangul_share(hangul: int, latin: int) -> float:
    """Hangul syllables over Hangul syllables and Latin letters; 0.5 (neither script) with none of either."""
    return hangul / (hangul + latin) if hangul + latin else 0.5


def cross_script(query: str, note_shares: list[float]) -> bool:
    """Whether the notes the meaning points at (their hangul_share: the dense list's first notes) are each
    written in another script than the question: CROSS_SCRIPT_GAP or more apart."""
    if not note_shares:             # the question's own script is not read then (a fast-path answer has no notes)
        return False
    q = hangul_share(*script_counts(query))
    return all(abs(q - s) >= CROSS_SCRIPT_GAP for s in note_shares)


def alone_across(query: str, first_share: float, in_keywords: bool) -> bool:
    """Whether the dense list's first note (its hangul_share `first_share`) is written in Hangul where the question
    is written in Latin letters (CROSS_SCRIPT_GAP or more apart, the note on the Hangul side), and no keyword list
    has it among its first ALONE_DEPTH (`in_keywords` False): the meaning alone points at it."""
    return not in_keywords and first_share - hangul_share(*script_counts(query)) >= CROSS_SCRIPT_GAP
