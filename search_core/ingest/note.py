"""The frozen records passed between stages: Link, Section, Note, Chunk."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    target: str            # as written, e.g. "/java/thread", "graphrag", "ai/rag/chunking"
    anchor: str = ""       # the part after '#'
    display: str = ""      # "shown" in [[a|shown]] or [[a]]{shown}
    embed: bool = False    # ![[...]]
    kind: str = "link"     # link | embed | parent


@dataclass(frozen=True)
class Section:
    heading_path: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Note:
    id: str                        # vault-relative path without .md
    title: str
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    summary: str = ""
    nav_reason: str = ""           # why it is an index page kept out of answers (parse.nav_reason); "" if not
    sections: tuple[Section, ...] = ()
    links: tuple[Link, ...] = ()
    content_hash: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def is_nav(self) -> bool:
        return bool(self.nav_reason)

    @property
    def body(self) -> str:
        return "\n\n".join(s.text for s in self.sections if s.text)


@dataclass(frozen=True)
class Chunk:
    note_id: str
    ord: int
    heading_path: tuple[str, ...]
    text: str
    context: str                   # "title > heading > subheading", prepended when embedding

    def embed_text(self) -> str:
        return f"{self.context}\n{self.text}" if self.text else self.context
