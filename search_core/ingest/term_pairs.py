"""Terms a vault itself pairs across scripts: `퀵 정렬(Quick Sort)`, `latency(지연 시간)`. An English word of a
question that the vault pairs with a Korean term can be asked with that term beside it, so that the keyword
channel finds the Korean note an English question means, with no translation model.

Pure functions: `mine_pairs` reads chunk texts, `expand_query` adds the paired terms to a query.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

_HANGUL_WORD = r"[가-힣][가-힣0-9]*"
_LATIN_WORD = r"[A-Za-z][A-Za-z0-9.+#'-]*"
# A Korean phrase of up to four words, then a Latin one of up to five in parentheses, and the other way round.
_KO_THEN_EN = re.compile(rf"({_HANGUL_WORD}(?: {_HANGUL_WORD}){{0,3}})\s?\(({_LATIN_WORD}(?: {_LATIN_WORD}){{0,4}})\)")
_EN_THEN_KO = re.compile(rf"({_LATIN_WORD}(?: {_LATIN_WORD}){{0,4}})\s?\(({_HANGUL_WORD}(?: {_HANGUL_WORD}){{0,3}})\)")
# Shorter Latin sides are mostly single letters of a formula ("C(일관성)") or markup ("div(선택)").
MIN_LATIN_CHARS = 3


def _korean_term(phrase: str) -> str:
    """The Korean side of a pair: its last two words at most, so that `이러한 제어의 역전(inversion of control)`
    pairs `제어의 역전` and `네트워크의 지연 시간(latency)` pairs `지연 시간`, not the words before them."""
    return " ".join(phrase.split()[-2:])


def pair_counts(text: str) -> Counter:
    """(lower-cased Latin phrase, Korean term) -> how often one text pairs them."""
    counts: Counter = Counter()
    for ko, en in _KO_THEN_EN.findall(text):
        if len(en) >= MIN_LATIN_CHARS:
            counts[(en.lower(), _korean_term(ko))] += 1
    for en, ko in _EN_THEN_KO.findall(text):
        if len(en) >= MIN_LATIN_CHARS:
            counts[(en.lower(), _korean_term(ko))] += 1
    return counts


def pairs_from_counts(rows, min_count: int = 1) -> dict[str, tuple[str, ...]]:
    """(Latin, Korean, count) rows -> Latin phrase -> its Korean terms, most often paired first (then by
    the term, so equal counts come out in one order); a pair seen fewer than `min_count` times is left out."""
    out: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for en, ko, n in rows:
        if n >= min_count:
            out[en].append((n, ko))
    return {en: tuple(ko for _, ko in sorted(kos, key=lambda t: (-t[0], t[1]))) for en, kos in out.items()}


def mine_pairs(texts, min_count: int = 1) -> dict[str, tuple[str, ...]]:
    """Lower-cased Latin phrase -> the Korean terms the texts pair it with, most often first."""
    total: Counter = Counter()
    for text in texts:
        total.update(pair_counts(text))
    return pairs_from_counts(((en, ko, n) for (en, ko), n in total.items()), min_count)


_WORD_RE = re.compile(r"[a-z][a-z0-9.+#'-]*")


def expand_query(query: str, pairs: dict[str, tuple[str, ...]], max_terms: int = 2,
                 per_phrase: int = 1) -> str:
    """`query` and, after it, the Korean terms the vault pairs with its Latin phrases (longest phrase first,
    each word used once; at most `max_terms` terms, `per_phrase` for each phrase). A query with no paired
    phrase comes back unchanged."""
    words = _WORD_RE.findall(query.lower())
    used = [False] * len(words)
    added: list[str] = []
    for size in (5, 4, 3, 2, 1):
        for i in range(len(words) - size + 1):
            if any(used[i:i + size]):
                continue
            kos = pairs.get(" ".join(words[i:i + size]))
            if not kos:
                continue
            for ko in kos[:per_phrase]:
                if ko not in added and ko not in query:
                    added.append(ko)
            used[i:i + size] = [True] * size
    added = added[:max_terms]
    return f"{query} {' '.join(added)}" if added else query
