"""The blocks a report is made of: frozen, plain data, so one report renders to every format."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Para:
    """A paragraph of plain text. `tone` marks verdict lines: "good", "bad", "note" or ""."""

    text: str
    tone: str = ""


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]
    caption: str = ""


@dataclass(frozen=True)
class Plot:
    """An SVG drawing (from `plots.figure_svg`) and the same information in words, for Markdown
    and for readers who cannot see it."""

    title: str
    svg: str
    alt: str


@dataclass(frozen=True)
class Section:
    heading: str
    blocks: tuple = ()


@dataclass(frozen=True)
class Report:
    """kind: "sweep", "audit", "ab", "calibration", ... ; verdict: the first line a person reads;
    data: the machine-readable content (what `--format json` prints, besides kind/title/verdict)."""

    kind: str
    title: str
    verdict: str
    sections: tuple[Section, ...] = ()
    data: dict = field(default_factory=dict)
    generated: str = ""
