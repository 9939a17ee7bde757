"""`gold init`: a gold set to fill in, drawn from the vault: a handful of notes picked across its folders,
each with its title, aliases and headings and one commented-out question slot per level (L0 lookup,
L1 paraphrase, XL cross-lingual, L2 multi-hop, probe). A slot is filled by removing its leading `# ` and
writing the query; unfilled slots stay comments, so the file loads as a gold set once any is filled."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

from search_core import SearchCoreError
from search_core.files import atomic_write_text
from search_core.ingest.graph import LinkResolver
from search_core.search.markup import clean_markup

from tuner.data.vault_questions import is_nav_note, read_vault, vault_of

SLOTS = (
    ("L0", "a direct lookup: what you would type to find this note by its name"),
    ("L1", "a paraphrase: ask for something in it without its words"),
    ("XL", "cross-lingual: ask in the other language (English for a Korean note)"),
    ("L2", "multi-hop: a question that needs this note and the other gold note"),
    ("probe", "near this note's topic, but nothing in the vault answers it (gold stays empty)"),
)


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# A note showing fewer characters than this (its markup cleaned) is a stub: an empty tag or category page, a table of
# headings, a few-line definition. Little in it to ask about beyond its name, so the template offers it only once the
# vault's other notes are used up. 200 is about two sentences; it sets aside 4-12 % of three real wikis' notes
# (sysmae 14 of 327, crackyachae 33 of 268, BAEKJungHo 86 of 738) and none of the demo vault's.
STUB_CHARS = 200


def shown_chars(note) -> int:
    """How many characters of text a note shows, its markup cleaned and its whitespace collapsed."""
    return len(clean_markup("\n".join(s.text for s in note.sections), one_line=True))


def _across_folders(ids, seed: int) -> list[str]:
    """`ids` one folder at a time, the folders and each folder's notes in a seeded order."""
    by_folder: dict[str, list[str]] = defaultdict(list)
    for nid in sorted(ids):
        by_folder[nid.split("/", 1)[0] if "/" in nid else "."].append(nid)
    rng = random.Random(seed)
    folders = sorted(by_folder)
    rng.shuffle(folders)
    for f in folders:
        rng.shuffle(by_folder[f])
    longest = max((len(v) for v in by_folder.values()), default=0)
    return [by_folder[f][r] for r in range(longest) for f in folders if r < len(by_folder[f])]


def pick_notes(notes: dict, nav: set[str], n: int, seed: int, stubs: frozenset[str] = frozenset()) -> list[str]:
    """Up to n notes, one folder at a time, so the template covers the vault; the notes in `stubs` only once the
    others are used up."""
    rest = [nid for nid in notes if nid not in nav and nid not in stubs]
    return (_across_folders(rest, seed) + _across_folders(stubs, seed))[:n]


def gold_template(vault_or_db: str | Path, name: str, *, n: int = 6, seed: int = 0) -> tuple[str, list[str]]:
    """(the template's text, the note ids it picked)."""
    vault = vault_of(vault_or_db)
    notes, raw = read_vault(vault)
    nav = {nid for nid, note in notes.items() if is_nav_note(note, raw[nid])}
    stubs = frozenset(nid for nid, note in notes.items() if nid not in nav and shown_chars(note) < STUB_CHARS)
    picked = pick_notes(notes, nav, n, seed, stubs)
    if not picked:
        raise SearchCoreError(f"{vault} has no note to write questions about (only index notes, or none)")
    resolver = LinkResolver(notes)
    lines = [f"# A gold set to fill in: {len(picked)} notes of {vault}, picked across its folders (seed {seed}).",
             "# Fill a slot: remove the leading `# ` of its lines and write the query (and the other note of an",
             "# L2, and why). Unfilled slots stay comments. Delete what you do not want; add questions of your own.",
             "# `autoresearch eval --gold THIS_FILE` once some are filled; `autoresearch gold make` drafts more",
             "# from the vault's own text.",
             f"name: {_q(name)}", f"vault: {_q(str(vault))}", "questions:"]
    for nid in picked:
        note = notes[nid]
        heads = list(dict.fromkeys(s.heading_path[-1] for s in note.sections if s.heading_path))[:6]
        linked = next((t for l in note.links if l.kind == "link"
                       for t in [resolver.resolve(nid, l.target)] if t and t != nid and t not in nav), None)
        lines.append(f"  # ---- {nid}: {note.title}")
        if note.aliases:
            lines.append(f"  #      aliases: {', '.join(note.aliases)}")
        if note.summary:
            lines.append(f"  #      summary: {note.summary[:160]}")
        if heads:
            lines.append(f"  #      headings: {' / '.join(heads)}")
        slug = nid.rsplit("/", 1)[-1]
        for level, hint in SLOTS:
            gold = "[]" if level == "probe" else (
                f"[{_q(nid)}, {_q(linked or 'ANOTHER/NOTE')}]" if level == "L2" else f"[{_q(nid)}]")
            lines += [f"  # - id: {_q(f'{slug}-{level}')}",
                      f"  #   level: {level}    # {hint}",
                      '  #   query: ""',
                      f"  #   gold: {gold}",
                      '  #   why: ""']
    return "\n".join(lines) + "\n", picked


def write_gold_template(vault_or_db: str | Path, out: str | Path, *, n: int = 6, seed: int = 0) -> list[str]:
    """The template written to `out` (never over an existing file: it may hold questions already written).
    Returns the note ids it picked."""
    out = Path(out)
    if out.exists():
        raise SearchCoreError(f"{out} exists; `gold init` writes a new file (pick another --out, or move it away)")
    text, picked = gold_template(vault_or_db, out.stem, n=n, seed=seed)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)
    return picked
