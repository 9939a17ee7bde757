"""Reading whole notes out of an index by id or path (MCP `get_note`), so an agent that found a note with
search_notes can read it without a file tool.

The text is the file in the vault when the index knows its folder and the file is still there (what the
user sees in their editor); else the note's chunks from the index (a BEIR corpus, or a vault moved away).
A note over the cap is cut and says so; a request for several notes shares one cap.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError

MAX_NOTE_CHARS = 20_000     # ~5,000 tokens: one long note, not a 300 KB wiki page in an agent's context
MAX_NOTES = 20              # notes in one request


@dataclass(frozen=True)
class NoteText:
    note_id: str
    title: str
    path: str | None          # inside the vault
    abs_path: str | None      # on this machine, when the file is there
    text: str
    chars: int                # of the whole note
    truncated: bool           # text is the first part of it (the cap)
    source: str               # "file" or "index"

    def as_dict(self) -> dict:
        return {"note_id": self.note_id, "title": self.title, "path": self.path, "abs_path": self.abs_path,
                "text": self.text, "chars": self.chars, "truncated": self.truncated, "source": self.source}


class UnknownNote(SearchCoreError):
    pass


def resolve(view, ref: str) -> str:
    """The note id `ref` names: a note id, a vault-relative path, or an absolute path inside the vault.
    Raises UnknownNote naming up to five close matches."""
    ref = (ref or "").strip()
    if ref in view.notes:
        return ref
    by_path = {n["path"]: nid for nid, n in view.notes.items() if n.get("path")}
    rel = ref
    if view.vault and os.path.isabs(ref):
        try:
            rel = Path(ref).resolve().relative_to(Path(view.vault).resolve()).as_posix()
        except ValueError:
            rel = ref
    rel = rel.lstrip("/")
    for candidate in (rel, rel + ".md", rel[:-3] if rel.lower().endswith(".md") else None):
        if candidate in by_path:
            return by_path[candidate]
        if candidate in view.notes:
            return candidate
    names = list(view.notes) + list(by_path)
    close = difflib.get_close_matches(rel, names, n=5, cutoff=0.5)
    close += [n for n in names if rel and rel.lower() in n.lower() and n not in close][: 5 - len(close)]
    hint = f"close matches: {', '.join(close)}" if close else "no note id or path is close to it"
    raise UnknownNote(f"no note {ref!r} in this index; {hint}. Pass a note id or path from search_notes' results")


def read_notes(view, refs: list[str], cap: int = MAX_NOTE_CHARS) -> list[NoteText]:
    """The notes `refs` name, in order, sharing `cap` characters (each cut to what remains of it).
    Raises UnknownNote on the first ref that names no note (nothing is returned half)."""
    if not refs:
        raise SearchCoreError("name a note: `id` (a note id or path) or `ids` (a list of them)")
    if len(refs) > MAX_NOTES:
        raise SearchCoreError(f"{len(refs)} notes asked for; at most {MAX_NOTES} at once")
    ids = [resolve(view, r) for r in refs]
    out, room = [], cap
    for nid in ids:
        note = view.notes[nid]
        text, abs_path, source = _text_of(view, nid, note.get("path"))
        piece = text[: max(room, 0)]
        room -= len(piece)
        out.append(NoteText(nid, note["title"], note.get("path"), abs_path, piece, len(text), len(piece) < len(text),
                            source))
    return out


def _text_of(view, nid: str, rel: str | None) -> tuple[str, str | None, str]:
    if rel and view.vault:
        root = Path(view.vault).resolve()
        path = (root / rel).resolve()
        # only a file inside the vault (a note id never climbs out, but the index is a file anyone can edit)
        if path.is_relative_to(root) and path.is_file():
            try:
                return path.read_text(encoding="utf-8", errors="replace"), str(path), "file"
            except OSError:
                pass
    rows = view.conn.execute("SELECT heading, text FROM chunks WHERE note_id = ? ORDER BY ord", (nid,)).fetchall()
    parts, last = [], None
    for heading, text in rows:       # a section's heading once, before its first chunk
        parts.append(f"{heading}\n{text}" if heading and heading != last else text)
        last = heading
    return "\n\n".join(parts), None, "index"
