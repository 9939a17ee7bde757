"""Markdown as an agent should read it in a snippet: the words, not the markup.

A snippet goes into an agent's context every turn, and the raw chunk text spends that room on syntax:
link-reference lines (`[repo]: https://github.com/...`), footnotes, HTML comments, `[[link|text]]`,
`[text](url)`, kramdown attributes (`{:toc}`, `{#id}`), heading hashes and emphasis marks.
clean_markup keeps the text each of them shows and drops the rest; it is idempotent, so a snippet
cleaned once and again at block composition reads the same.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_LINK_DEF_LINE = re.compile(r"^[ \t]{0,3}\[(?!\^)[^\]\n]+\]:[ \t]*<?\S+>?(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?[ \t]*$",
                            re.MULTILINE)
_FOOTNOTE_DEF_LINE = re.compile(r"^[ \t]{0,3}\[\^[^\]\n]+\]:.*$", re.MULTILINE)
# the same two once whitespace is collapsed (a snippet is one line): a definition up to the next one or the end
_LINK_DEF_INLINE = re.compile(r"\[(?!\^)[^\]]+\]:\s*<?(?:https?://|/|\./|#|mailto:)\S*>?(?:\s+\"[^\"]*\")?")
_FOOTNOTE_REF = re.compile(r"\[\^[^\]\s]+\]:?")
_WIKI_DISPLAY = re.compile(r"\[\[([^\]\n]+?)\]\]\{([^}\n]*)\}")           # johngrib: [[/path]]{display text}
_WIKI = re.compile(r"!?\[\[([^\]\n]+?)\]\]")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]+)\]\((?:[^()\n]|\([^)\n]*\))*\)")
_REF_LINK = re.compile(r"\[([^\]\n]+)\]\[[^\]\n]*\]")
_KRAMDOWN_ATTR = re.compile(r"\{:[^}\n]*\}|\{#[\w-]+\}")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.MULTILINE)
# a heading's hashes inside a collapsed line: 1-6 "#" at the start or after whitespace, then whitespace, as
# (?:(?<=\s)|^)#{1,6}\s+(?=\S) says it. Written to start with the "#" (its lookbehind after the first one), so the
# scan jumps from "#" to "#" instead of trying the lookbehind at every character: 0.8 us a chunk holding a "#"
# instead of 12 on the demo and AutoRAG-ko chunks, the same matches
_HEADING_INLINE = re.compile(r"#(?<!\S#)#{0,5}\s+(?=\S)")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)[\w+-]*[ \t]*$", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|~~)(?=\S)(.+?)(?<=\S)\1")
_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_MARKUP_CHARS = re.compile(r"[<\[\]{`~#*_]")     # every piece clean_markup checks for holds one
_BLANKS = re.compile(r"[ \t]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


def _wiki_text(m: re.Match) -> str:
    inner = m.group(1)
    if "|" in inner:
        return inner.split("|", 1)[1].strip()
    return inner.split("#", 1)[0].strip().lstrip("/") or inner.strip()


def clean_markup(text: str, *, one_line: bool = False) -> str:
    """`text` (markdown, one line or many) with its markup reduced to the words it shows; line breaks kept, or
    with `one_line` every run of whitespace one space (a snippet). Each pattern runs only when the text holds a
    piece every match of it must contain: a pattern scans the whole chunk even when it finds nothing, and 17
    scans were most of a snippet's cost (five snippets ~0.45 ms of a 4 ms keyword-only answer on johngrib); the
    text is then the same as with every pattern run."""
    if not text:
        return text
    # each check below looks for a piece holding one of these characters: a chunk with none of them (half the
    # demo's and AutoRAG-ko's hits) is words and whitespace, and one scan for them replaces the 14 checks
    if _MARKUP_CHARS.search(text) is not None:
        if "<!--" in text:
            text = _COMMENT.sub(" ", text)
        if "]:" in text:
            text = _LINK_DEF_LINE.sub("", text)
            if "[^" in text:
                text = _FOOTNOTE_DEF_LINE.sub("", text)
            text = _LINK_DEF_INLINE.sub(" ", text)
        if "[^" in text:
            text = _FOOTNOTE_REF.sub("", text)
        if "[[" in text:
            text = _WIKI_DISPLAY.sub(lambda m: m.group(2).strip() or _wiki_text(m), text)
            text = _WIKI.sub(_wiki_text, text)
        if "](" in text:
            text = _IMAGE.sub(lambda m: m.group(1), text)
            text = _LINK.sub(lambda m: m.group(1), text)
        if "][" in text:
            text = _REF_LINK.sub(lambda m: m.group(1), text)
        if "{:" in text or "{#" in text:
            text = _KRAMDOWN_ATTR.sub("", text)
        if "```" in text or "~~~" in text:
            text = _FENCE.sub("", text)
        if "#" in text:
            text = _HEADING.sub("", text)
            text = _HEADING_INLINE.sub("", text)
        if "**" in text or "__" in text or "~~" in text:
            text = _EMPHASIS.sub(lambda m: m.group(2), text)
        if "<" in text:
            text = _TAG.sub(" ", text)
    if one_line:
        # what " ".join(clean_markup(text).split()) gives: the two patterns below only turn whitespace into other
        # whitespace (\s and split()'s whitespace are the same 29 code points, every one checked), which the split
        # drops anyway, and _BLANKS replaces every space between two words (22 us of a 765-character AutoRAG-ko
        # chunk's ~34 us). The join is ~4x cheaper than re.sub(r"\s+", " ", ...).strip()
        return " ".join(text.split())
    text = _BLANKS.sub(" ", text)
    return _BLANK_LINES.sub("\n", text).strip()
