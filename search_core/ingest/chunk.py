"""Section-aware chunking: ~target_chars pieces that never cross a heading, title and heading path kept."""

from __future__ import annotations

import re

from search_core.config import ChunkConfig
from search_core.ingest.note import Chunk, Note

PARA_SPLIT_RE = re.compile(r"\n\s*\n")
# sentence ends: Latin punctuation, CJK full stop, Korean declarative "다." / "요."
SENTENCE_END_RE = re.compile(r"(?<=[.!?。])\s+|(?<=\n)")


def _split_long(text: str, max_chars: int) -> list[str]:
    if len(text) <= max_chars:
        return [text]
    pieces, cur = [], ""
    for sent in SENTENCE_END_RE.split(text):
        if not sent:
            continue
        while len(sent) > max_chars:              # one endless "sentence": hard cut
            if cur:
                pieces.append(cur)
                cur = ""
            pieces.append(sent[:max_chars])
            sent = sent[max_chars:]
        if cur and len(cur) + 1 + len(sent) > max_chars:
            pieces.append(cur)
            cur = sent
        else:
            cur = f"{cur} {sent}" if cur else sent
    if cur:
        pieces.append(cur)
    return [p.strip() for p in pieces if p.strip()]


def _pack(paragraphs: list[str], cfg: ChunkConfig) -> list[str]:
    units = [u for p in paragraphs for u in _split_long(p.strip(), cfg.max_chars) if u]
    chunks, cur = [], ""
    for u in units:
        if cur and len(cur) + 2 + len(u) > cfg.target_chars:
            chunks.append(cur)
            cur = u
        else:
            cur = f"{cur}\n\n{u}" if cur else u
    if cur:
        if chunks and len(cur) < cfg.min_chars and len(chunks[-1]) + len(cur) <= cfg.max_chars:
            chunks[-1] = f"{chunks[-1]}\n\n{cur}"
        else:
            chunks.append(cur)
    return chunks


def chunk_note(note: Note, cfg: ChunkConfig = ChunkConfig()) -> list[Chunk]:
    out: list[Chunk] = []
    for section in note.sections:
        context = " > ".join((note.title,) + section.heading_path)
        for text in _pack(PARA_SPLIT_RE.split(section.text), cfg):
            out.append(Chunk(note.id, len(out), section.heading_path, text, context))
    if not out:   # a note with only frontmatter still gets one (title-only) vector
        out.append(Chunk(note.id, 0, (), "", note.title))
    return out


def dense_selection(n_chunks: int, cap: int) -> list[int]:
    """Which chunk ordinals of a note get a vector: all of them, or the first cap//2 and the rest spread evenly."""
    if cap <= 0 or n_chunks <= cap:
        return list(range(n_chunks))
    head = cap // 2
    rest = cap - head
    tail_n = n_chunks - head
    picks = {head + round(i * (tail_n - 1) / max(rest - 1, 1)) for i in range(rest)}
    return sorted(set(range(head)) | picks)
