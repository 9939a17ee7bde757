"""The tuning set a night stands on: the person's hand-written gold set, the recall calls they labelled
(`gold from-log`) and the questions the vault supplies (`gold make`), written as one gold file.

Each question keeps its `source` (hand, log, vault), which the keep rule reads: the hit@5 guard reads the
hand-written and labelled questions alone when the set has any, and every kind counts for the gain test
(docs/tuner.md, "Evidence by kind"). The file is named by a hash of its content, so a sweep's pinned gold
set is never rewritten under it (a resumed sweep or a re-test reads the very questions it was decided on),
and a night whose evidence did not change reuses it.

A vault whose made set holds no anchor (its links sit in lists, or it has none) gives lookups alone: a heading
or an alias with the note's title, which name their answer. Those are left out of the night (VaultSet.lookups_only):
on Voyager003's wiki (600 heading lookups) every night tuned on them alone lowered held-out hit@5 below the
start (5 of 5 seeds, with or without the title in the question), and beside its 30 hand-written questions they
took held-out MRR 0.908 -> 0.853 where the hand-written questions alone kept 0.894-0.903 (BENCHMARKS.md). The combined file says what was left
out and why (`left_out:`), and the morning report reads it from there.

The vault's questions are made again only when the vault changed (a hash of its files, with the options
they were made with, stamped beside them); the hand-written file is only ever read.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from search_core import SearchCoreError
from search_core.files import atomic_write_text
from search_core.hashing import hash_json, hash_tree

from tuner.data.gold import SOURCES, GoldSet, Question, load_gold

VAULT_SET = "vault-questions.yaml"       # in the evidence folder; its stamp beside it (.json)


@dataclass(frozen=True)
class KindCount:
    source: str          # tuner.data.gold.SOURCES
    answerable: int
    probes: int


@dataclass(frozen=True)
class NightGold:
    path: Path                          # the combined gold file
    kinds: tuple[KindCount, ...]        # per source, in SOURCES order (only the sources present)
    parts: tuple[str, ...]              # the files it was combined from
    renamed: int = 0                    # questions whose id another part already used (prefixed with the source)
    dropped: dict[str, int] | None = None   # reason -> count: vault or log questions left out
    left_out: tuple[str, ...] = ()      # whole parts left out of the night, each as the sentence that says why

    def count(self, source: str) -> int:
        return sum(k.answerable + k.probes for k in self.kinds if k.source == source)

    def describe(self) -> str:
        """"24 hand-written (+12 probes), 200 from the vault's text": what a log line or a report says."""
        words = {"hand": "hand-written", "log": "labelled recall calls", "vault": "from the vault's text"}
        return ", ".join(f"{k.answerable} {words[k.source]}" + (f" (+{k.probes} probes)" if k.probes else "")
                         for k in self.kinds)


def kind_counts(questions) -> tuple[KindCount, ...]:
    questions = list(questions)      # Questions or an evaluation's QuestionResults: both have level and source
    ans = Counter(q.source for q in questions if q.level != "probe")
    probes = Counter(q.source for q in questions if q.level == "probe")
    return tuple(KindCount(s, ans[s], probes[s]) for s in SOURCES if ans[s] or probes[s])


def combine(parts: list[GoldSet], known_ids=None) -> tuple[tuple[Question, ...], int, Counter]:
    """The questions of every part, in order. An id an earlier part already used is prefixed with the
    question's source ("vault:anchor-1a2b"); with `known_ids` (the index's notes), a question from the vault
    or the log whose gold or held-out notes the index lacks is left out (the vault changed after the index
    was built), while a hand-written one stays and the sweep's own check names it."""
    seen: set[str] = set()
    out, renamed, dropped = [], 0, Counter()
    known = set(known_ids) if known_ids is not None else None
    for part in parts:
        for q in part.questions:
            if known is not None and q.source != "hand" and not set(q.gold + q.exclude) <= known:
                dropped["names a note the index does not hold"] += 1
                continue
            qid = q.id
            if qid in seen:
                qid = f"{q.source}:{q.id}"
                n = 2
                while qid in seen:
                    qid, n = f"{q.source}:{q.id}-{n}", n + 1
                renamed += 1
            seen.add(qid)
            out.append(Question(qid, q.level, q.query, q.gold, q.why, source=q.source, exclude=q.exclude))
    return tuple(out), renamed, dropped


def write_night_gold(parts: list[str | Path], folder: str | Path, *, name: str = "night", known_ids=None,
                     left_out: tuple[str, ...] = ()) -> NightGold:
    """The parts (gold files) combined into one, written atomically under `folder` as
    `<name>-<hash of its questions>.yaml` (reused when it exists). left_out: why a part the night could have
    had is not among them (VaultSet.left_out_reason), written in the file for the morning report."""
    sets = [load_gold(p) for p in parts]
    questions, renamed, dropped = combine(sets, known_ids)
    if not questions:
        raise SearchCoreError(f"no tuning question left in {', '.join(map(str, parts))}")
    body = {"name": name, "vault": next((s.vault for s in sets if s.vault), None),
            **({"left_out": list(left_out)} if left_out else {}),
            "questions": [q.to_yaml() for q in questions]}
    folder = Path(folder)
    path = folder / f"{name}-{hash_json(body, 12)}.yaml"
    kinds = kind_counts(questions)
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        header = ["# The tuning set of a night, combined from: " + ", ".join(map(str, parts)),
                  "# " + NightGold(path, kinds, ()).describe() + ". Made by the program; edit the parts, not this.", ""]
        atomic_write_text(path, "\n".join(header) + yaml.safe_dump(body, allow_unicode=True, sort_keys=False,
                                                                    width=1000))
    return NightGold(path, kinds, tuple(map(str, parts)), renamed, dict(dropped) or None, tuple(left_out))


def left_out_of(path: str | Path | None) -> tuple[str, ...]:
    """What a night's combined gold file says was left out of it (`left_out:`); () for any other gold file, or
    one that no longer reads (a report on a moved file still renders)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, yaml.YAMLError):
        return ()
    said = data.get("left_out") if isinstance(data, dict) else None
    return tuple(str(x) for x in said) if isinstance(said, list) else ()


@dataclass(frozen=True)
class VaultSet:
    path: Path
    made: bool              # made now (the vault changed, or the options did), else reused
    questions: int
    by_kind: dict[str, int]     # kind -> questions

    @property
    def lookups_only(self) -> bool:
        """Questions, none of them an anchor: what a night leaves out (the module docstring)."""
        return self.questions > 0 and not self.by_kind.get("anchor")

    def left_out_reason(self) -> str:
        """Why a lookups-only set is not in the night's tuning set, as the morning report says it."""
        counts = ", ".join(f"{k} {n}" for k, n in self.by_kind.items())
        return (f"The vault's {self.questions} questions ({counts}) were left out of the night: none is an anchor "
                "(no note refers to another inside a sentence), and a lookup names its answer, so the keyword and "
                "entity channels win it whether or not they help real questions (on a wiki whose links sat only in "
                "lists, 5 of 5 nights tuned on such lookups lowered held-out hit@5 below the start). Every ranking "
                "change was judged on the hand-written and labelled questions alone; add questions in your own "
                "words to give the night more evidence (`autoresearch gold init`).")


def refresh_vault_questions(vault: str | Path, folder: str | Path, *, n: int | None = None, seed: int = 0,
                            kinds: tuple[str, ...] | None = None, recipe_before: bool = False) -> VaultSet:
    """`gold make` on the vault into `folder`/vault-questions.yaml, unless the file there was made from the same
    vault content with the same options (its stamp says so). Made as `gold make` makes them by default (n
    MADE_N, anchors first, each anchor without its link: the recipe a night tuned on made questions recovered the
    most with, BENCHMARKS.md); recipe_before: every kind in turn with the links kept (`--kinds-in-turn
    --keep-link`)."""
    from tuner.data.vault_questions import (DEFAULT_KINDS, MADE_ANCHOR_SHARE, MADE_HEADING_TITLE, MADE_N,
                                            write_vault_questions)
    kinds = tuple(kinds or DEFAULT_KINDS)
    n = MADE_N if n is None else n
    anchor_share, mask_link, heading_title = (None, False, True) if recipe_before else \
        (MADE_ANCHOR_SHARE, True, MADE_HEADING_TITLE)
    folder = Path(folder)
    out, stamp_path = folder / VAULT_SET, folder / (Path(VAULT_SET).stem + ".json")
    stamp = {"vault": str(Path(vault).resolve()), "content": hash_tree(vault), "n": n, "seed": seed,
             "kinds": list(kinds), "anchor_share": anchor_share, "mask_link": mask_link, "heading_title": heading_title}
    try:
        old = json.loads(stamp_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    if old and {k: old.get(k) for k in stamp} == stamp and out.exists():
        return VaultSet(out, False, old.get("questions", 0), old.get("by_kind", {}))
    folder.mkdir(parents=True, exist_ok=True)
    vq = write_vault_questions(vault, out, n=n, seed=seed, kinds=kinds, anchor_share=anchor_share, mask_link=mask_link,
                               heading_title=heading_title,
                               command=f"autoresearch gold make {vault} --out {out} -n {n} --seed {seed} "
                                       f"--kinds {','.join(kinds)}" + (" --kinds-in-turn --keep-link"
                                                                       if recipe_before else ""))
    atomic_write_text(stamp_path, json.dumps({**stamp, "questions": len(vq.questions), "by_kind": vq.by_kind()},
                                             ensure_ascii=False, indent=1))
    return VaultSet(out, True, len(vq.questions), vq.by_kind())
