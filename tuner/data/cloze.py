"""Cloze questions: a sentence of a note, deleted from a copy of the vault, asked of that copy's index.

The inverse cloze task (Lee, Chang and Toutanova, ACL 2019, "Latent Retrieval for Weakly Supervised Open Domain
Question Answering") as a tuning set: one body sentence per note becomes a question whose answer is its note,
and the sentence is taken out of the note, so the search must find the note by what the rest of it says, as it
finds a note for a question written by someone who read it. Anchors and headings (tuner.data.vault_questions)
are asked of the vault as it is; a cloze question only of the copy without its sentence (ClozeSet.db), so a
night tuned on cloze questions runs on that copy (tuner.daemon.evidence).

Why: on the johngrib wiki, over 26 configs, cloze MRR ranked them as the hand-written sets do (Spearman 0.93
against the holdout, 0.96 against the tune sets), where anchors and headings agreed at 0.71 and refused the joint
move towards the shipped default (w_dense 0.3 with rrf_k 2-5) that lifts held-out MRR 0.859 -> 0.92; the keep rule on
the cloze set kept it (docs/lab-notes/tuner-2026-12.md, "Cloze questions").

What a note gives: a line of its body outside code, tables, quotes, headings and HTML, 30-200 characters, with
words of its own (vault_questions.says_something) and no link (a line with a link is an anchor about another
note). A note gives one only when at least MIN_LINES of its lines could (so the rest of it still says something),
and a line another note holds too, or its own note holds twice, is no question about one note. The
sentence is blanked in the copy (the line stays, empty, so every other line keeps its number); the question is the
line as a reader sees it (links as text, no markup).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

from search_core import SearchCoreError
from search_core.config import ChunkConfig
from search_core.files import atomic_write_text, swap_folder
from search_core.hashing import hash_tree

from tuner.data.gold import Question
from tuner.data.vault_questions import (_body_lines, _render, is_nav_note, normalise, read_vault, says_something,
                                        vault_of)

CLOZE_MIN_CHARS = 30          # a shorter line is a fragment ("예시:", "아래와 같다.")
CLOZE_MAX_CHARS = 200         # a longer one is a paragraph, not a question
MIN_LINES = 3                 # candidate lines a note needs to give one (it keeps at least two)
CLOZE_LEVEL = "L1"            # a question in the note's own words, without the note's own sentence
CLOZE_WORDS: int | None = None  # a question is its line's first words (None: the whole line)
FENCE_RE = re.compile(r"^\s*(```|~~~)")
NOT_PROSE_RE = re.compile(r"^\s*(#|\||>|<|!\[|\{|\$\$|---|\*\*\*|===)")
LINK_MARK_RE = re.compile(r"\[\[|\]\(|https?://")
GOLD_FILE, MANIFEST, VAULT_DIR, INDEX = "gold.yaml", "manifest.json", "vault", "index.sqlite"


@dataclass(frozen=True)
class ClozeLine:
    note_id: str
    line: int            # 1-based line of the note's file
    text: str            # the line as the file holds it (what the copy blanks)
    query: str           # the line as a reader sees it (the question)


@dataclass(frozen=True)
class ClozeSet:
    folder: Path
    gold: Path           # the questions (source "vault", kind cloze)
    vault: Path          # the copy without their sentences
    db: Path | None      # its index (None until indexed)
    questions: int
    notes: int           # notes in the vault
    dropped: dict[str, int]     # reason -> lines left out

    def to_json(self) -> dict:
        return {"folder": str(self.folder), "gold": str(self.gold), "vault": str(self.vault),
                "db": str(self.db) if self.db else None, "questions": self.questions, "notes": self.notes,
                "dropped": self.dropped}


def candidate_lines(note_id: str, raw: str) -> list[ClozeLine]:
    """The lines of a note's body a cloze question could be (module docstring), in file order."""
    lines, first = _body_lines(raw)
    out, fenced = [], False
    for i, line in enumerate(lines):
        if FENCE_RE.match(line):
            fenced = not fenced
            continue
        if fenced or NOT_PROSE_RE.match(line) or LINK_MARK_RE.search(line) or line.startswith(("    ", "\t")):
            continue
        query = _render(line)
        if CLOZE_MIN_CHARS <= len(query) <= CLOZE_MAX_CHARS and says_something(query):
            out.append(ClozeLine(note_id, first + i, line, query))
    return out


def choose_cloze(vault: str | Path, *, n: int | None = 600, seed: int = 0, keep_notes=()) -> tuple[list[ClozeLine],
                                                                                                  int, Counter]:
    """(one ClozeLine per note for up to n notes in a seeded order, the vault's note count, reasons lines were left
    out). keep_notes: notes no line is taken from (the gold notes of the person's own questions, which are asked of
    the same copy: they keep every line)."""
    notes, raw = read_vault(Path(vault))
    keep = set(keep_notes)
    dropped: Counter = Counter()
    # who holds each line, read as a question reads it: a line two notes hold (a template, a quote copied
    # over) is no question about one of them; one pass over every line, not a search of every note per line
    holders: dict[str, set[str]] = defaultdict(set)
    for nid, text in raw.items():
        for line in text.split("\n"):
            key = normalise(_render(line))
            if len(key) >= CLOZE_MIN_CHARS // 2:
                holders[key].add(nid)
    order = sorted(notes)
    rng = random.Random(seed)
    rng.shuffle(order)
    chosen: list[ClozeLine] = []
    for nid in order:
        if n is not None and len(chosen) >= n:
            break
        if nid in keep:
            dropped["a note the hand-written or labelled questions point at"] += 1
            continue
        if is_nav_note(notes[nid], raw[nid]):
            dropped["an index or MOC note"] += 1
            continue
        cands = candidate_lines(nid, raw[nid])
        if len(cands) < MIN_LINES:
            dropped[f"a note with fewer than {MIN_LINES} prose lines"] += 1
            continue
        own = Counter(normalise(c.query) for c in cands)
        usable = []
        for c in cands:
            key = normalise(c.query)
            if own[key] > 1:
                dropped["a line its note holds twice"] += 1
            elif holders[key] - {nid}:
                dropped["a line another note holds too"] += 1
            else:
                usable.append(c)
        if usable:
            chosen.append(rng.choice(usable))
    return chosen, len(notes), dropped


def first_words(text: str, words: int | None) -> str:
    return text if not words else " ".join(text.split()[:words])


def cloze_questions(lines: list[ClozeLine], words: int | None = CLOZE_WORDS) -> list[Question]:
    """A question per line: its first `words` words (None: all of it); the copy blanks the whole line either way."""
    return [Question(f"cloze-{hashlib.sha256(f'{c.note_id}|{c.line}|{c.text}'.encode()).hexdigest()[:8]}",
                     CLOZE_LEVEL, first_words(c.query, words), (c.note_id,),
                     f"line {c.line} of note {c.note_id}, blanked in the copy", source="vault") for c in lines]


def write_cloze_vault(vault: str | Path, lines: list[ClozeLine], out: str | Path) -> Path:
    """A copy of the vault's notes under `out` with each line blanked (the line kept, empty). A line the note no
    longer holds as chosen (the vault changed in between) is an error, not a silent question without its blank."""
    from search_core.ingest.vault import list_vault
    vault, out = Path(vault), Path(out)
    blanks: dict[str, dict[int, str]] = {}
    for c in lines:
        blanks.setdefault(c.note_id, {})[c.line] = c.text
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    for f in list_vault(vault):
        rel = Path(f.path).relative_to(vault)
        dest = tmp / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if f.note_id not in blanks:
            shutil.copyfile(f.path, dest)
            continue
        text = Path(f.path).read_text(encoding="utf-8")
        file_lines = text.split("\n")
        for line, want in blanks.pop(f.note_id).items():
            if line > len(file_lines) or file_lines[line - 1] != want:
                shutil.rmtree(tmp)
                raise SearchCoreError(f"{f.path} changed while its cloze questions were made (line {line}); "
                                      "make them again")
            file_lines[line - 1] = ""
        dest.write_text("\n".join(file_lines), encoding="utf-8")
    if blanks:
        shutil.rmtree(tmp)
        raise SearchCoreError(f"notes {sorted(blanks)[:3]} left {vault} while cloze questions were made; make them again")
    return swap_folder(tmp, out)


def index_settings(db: str | Path) -> tuple[str, ChunkConfig]:
    """(embedder name, chunking) an index was built with: a cloze copy's index must be built alike to stand in
    for it."""
    from search_core.index.store import get_meta, open_index
    conn = open_index(db)
    try:
        fp = get_meta(conn, "fingerprint")
    finally:
        conn.close()
    if not isinstance(fp, dict) or "embedder" not in fp or "chunking" not in fp:
        raise SearchCoreError(f"{db} records no embedder and chunking (an index made before they were recorded, or "
                              "not an index); build it again with `autoresearch index`, or pass another with --like")
    return fp["embedder"]["name"], ChunkConfig(**fp["chunking"])


def make_cloze(vault_or_db: str | Path, out: str | Path, *, n: int | None = 600, seed: int = 0, keep_notes=(),
               words: int | None = CLOZE_WORDS, index: bool = True, like: str | Path | None = None, embedder: str | None = None,
               chunking: ChunkConfig | None = None, cache: str | Path | None = None, progress=None) -> ClozeSet:
    """Cloze questions of a vault in `out`: OUT/gold.yaml, OUT/vault (the copy without their lines), OUT/index.sqlite
    (its index unless index=False: built as the index `like` was, else with `embedder` and `chunking`; an index
    already there is brought up to date, and chunks the copy shares with the vault come from the embedding cache)."""
    if n is not None and n < 1:
        raise SearchCoreError(f"-n {n}: ask for at least one question")
    if like is not None:
        embedder, chunking = index_settings(like)
    vault, out = vault_of(vault_or_db), Path(out)
    lines, n_notes, dropped = choose_cloze(vault, n=n, seed=seed, keep_notes=keep_notes)
    if not lines:
        raise SearchCoreError(f"{vault}: no note has {MIN_LINES} or more prose lines to take a sentence from "
                              f"({n_notes} notes); write questions with `gold init` instead")
    out.mkdir(parents=True, exist_ok=True)
    copy = write_cloze_vault(vault, lines, out / VAULT_DIR)
    qs = cloze_questions(lines, words)
    header = [f"# Cloze questions: {len(qs)} lines of {vault}'s notes, each blanked in {copy} and asked of its index",
              f"# ({out / INDEX}), never of the vault itself. Made by a program (seed {seed}); read them and prune."]
    body = yaml.safe_dump({"name": out.name, "vault": str(copy), "questions": [q.to_yaml() for q in qs]},
                          allow_unicode=True, sort_keys=False, width=1000)
    gold = out / GOLD_FILE
    atomic_write_text(gold, "\n".join(header) + "\n" + body)
    db = None
    if index:
        from search_core.index.indexer import index_vault
        db = out / INDEX
        index_vault(copy, db, embedder=embedder, chunk_cfg=chunking, cache=cache, progress=progress)
    return ClozeSet(out, gold, copy, db, len(qs), n_notes, dict(dropped))


def _stamp(vault: Path, n: int | None, seed: int, keep_notes, words: int | None, built: object) -> dict[str, object]:
    return {"vault": str(Path(vault).resolve()), "content": hash_tree(vault), "n": n, "seed": seed,
            "keep_notes": sorted(keep_notes), "words": words, "index": built}


def refresh_cloze(vault: str | Path, out: str | Path, *, n: int | None = 600, seed: int = 0, keep_notes=(),
                  words: int | None = CLOZE_WORDS, like: str | Path | None = None, embedder: str | None = None, cache: str | Path | None = None,
                  progress=None) -> tuple[ClozeSet, bool]:
    """make_cloze into `out`, with OUT/manifest.json (the vault's content hash and the options), unless the manifest
    says it was made there from the same vault content and options: (the set, whether it was made now). A night's
    evidence is reused while the vault does not change."""
    vault, out = vault_of(vault), Path(out)
    chunking = None
    if like is not None:            # read once: the stamp and the build use the same settings
        embedder, chunking = index_settings(like)
    stamp = _stamp(vault, n, seed, keep_notes, words, [embedder, chunking and dataclasses.asdict(chunking)])
    try:
        old = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    if old and old.get("stamp") == stamp and (out / INDEX).exists() and (out / GOLD_FILE).exists():
        return ClozeSet(out, out / GOLD_FILE, out / VAULT_DIR, out / INDEX, old["questions"], old["notes"],
                        old.get("dropped", {})), False
    if (out / MANIFEST).exists():
        (out / MANIFEST).unlink()            # a half-made set never passes for a whole one
    made = make_cloze(vault, out, n=n, seed=seed, keep_notes=keep_notes, words=words, embedder=embedder, chunking=chunking,
                      cache=cache, progress=progress)
    atomic_write_text(out / MANIFEST, json.dumps({"stamp": stamp, **made.to_json()}, ensure_ascii=False, indent=1))
    return made, True
