"""Markdown note parsing: frontmatter, [[links]], #tags, sections. Pure functions of text."""

from __future__ import annotations

import hashlib
import re
from datetime import date, datetime

import yaml

from search_core.ingest.note import Link, Note, Section

FRONTMATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
FENCE_RE = re.compile(r"^\s*(```+|~~~+)")
# The closing "#"s are stripped by heading_title, not here: "(.*?)[ \t]*#*[ \t]*$" backtracked over every
# "#" of "# ####…# x" (7.6 s on a line of 20,000).
HEADING_RE = re.compile(r"^(#{1,6})[ \t]+(.*)$")
# ![[target#anchor|display]]{kramdown display}. Bounded parts, as in MD_LINK_RE: unbounded ones made a
# line of 20,000 "[" take 10 s (each "[[" scanned the rest of the line); no real link part is 300 chars.
LINK_RE = re.compile(
    r"(!?)\[\[([^\]\|#\n]{0,300})(?:#([^\]\|\n]{0,300}))?(?:\|([^\]\n]{0,300}))?\]\](?:\{([^}\n]{0,300})\})?")
# a tag starts after whitespace/start/punctuation, never inside a word, URL or anchor
INLINE_TAG_RE = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[(,]))#([0-9A-Za-z_가-힣\-/]*[A-Za-z_가-힣][0-9A-Za-z_가-힣\-/]*)")
INLINE_CODE_RE = re.compile(r"`[^`\n]*`")
KRAMDOWN_ATTR_LINE_RE = re.compile(r"^\s*\{:[^}]*\}\s*$")
KRAMDOWN_HEADING_ID_RE = re.compile(r"\s*\{#[^}]*\}\s*$")
TOC_MARKER_RE = re.compile(r"^\s*[*-]\s+TOC\s*$")
NAV_TYPES = {"moc", "index", "nav", "hub"}
# A link page: a note that is mostly links to many other notes (a vault's README or root index, a
# docsify `_sidebar`), kept out of the answer lists like a MOC. Measured with link_page_measure over every
# vault we have (benchmarks/bench_nav_pages.py): the index pages have 67-98 % of their words in link text
# and link 10-966 notes (demo's five index/home pages 0.67-0.97 over 10-42 notes; johngrib's root-index
# 0.98 over 966; baekjungho's index 0.93 over 660; hoonti06's index 0.98 over 127). The real note with
# the largest share among those linking 10+ notes is hoonti06's do-algorithm at 0.47 (a study log with
# 77 problem links and its own notes), then johngrib's cmd/gnu-coreutils at 0.27 (30 commands, each
# described); long "see also" lists under real content stay below 0.25. 0.6 sits in that gap.
LINK_PAGE_SHARE = 0.6
LINK_PAGE_MIN_NOTES = 10
# the version of nav_reason's rule: an index written under another one has every note read again for it
# by the next `index` run (search_core.index.indexer), so a changed rule never waits for notes to change
NAV_RULE = 1
# A pasted image kept inline as a data: URI (`![](data:image/png;base64,iVBOR...)`) is text in the file but
# holds no word anyone searches for; its payload is dropped before sections are cut. Four notes of aegis1920's
# wiki carried such images: with their payloads the 186 notes made 13,148 chunks of base64.
DATA_URI_RE = re.compile(r"(data:[\w.+*\-]{1,100}/[\w.+*\-]{1,100}(?:;[\w.=\-]{1,100}){0,5};base64,)[A-Za-z0-9+/=]{16,}")
# the version of what parse keeps of a note's text (sections, summary, links): an index written under another
# one has every note written again by the next `index` run (search_core.index.indexer); chunks whose text did
# not change keep their vectors
TEXT_RULE = 1
# [text](target) to a file of the vault (README and docsify sidebars link so); a URL with a scheme or
# a bare #anchor is not a note, and these links are counted for the measure only, never stored as links.
# Bounded parts: unbounded ones made a line of 20,000 "[" take 3.1 s (each "[" scanned the rest of the line)
MD_LINK_RE = re.compile(r"!?\[([^\]\n]{0,300})\]\(<?([^)\s>]{1,300})>?(?:\s{1,300}\"[^\"\n]{0,300}\")?\)")
URL_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
WORD_CHAR_RE = re.compile(r"\w", re.UNICODE)
# Frontmatter is a few hundred bytes in every real note; 64 KB and 20 levels leave room for any honest
# use and stop the 302-byte alias bomb (63 s, 741 MB before) and 10,000-deep `[[[[...` at once.
MAX_FRONTMATTER_CHARS = 64 * 1024
MAX_FRONTMATTER_DEPTH = 20


class FrontmatterRefused(Exception):
    """The frontmatter was not loaded; the message says why (aliases, depth)."""


# libyaml's parser when PyYAML was built with it: the pure-Python loader took 2.4 s over johngrib's 1,112
# frontmatters, libyaml 0.5 s with its events checked first (the same data for every one of them)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NODE_EVENTS = (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent, yaml.AliasEvent)


def _check_events(text: str) -> None:
    """Refuse aliases (*name) and nodes nested deeper than MAX_FRONTMATTER_DEPTH on the parser's events,
    before anything is composed or built: an alias bomb expands exponentially in whoever walks the result,
    and the walk stops where the alias or the 21st level appears."""
    try:
        _walk_events(text)
    except yaml.MarkedYAMLError as e:
        # PyYAML >= 6.0.4 has a nesting limit of its own, and its scanner (which reads ahead of the events)
        # can reach it before the 21st level is seen here; either way the refusal is ours and says the same
        if "nesting depth" in str(getattr(e, "problem", "")):
            raise FrontmatterRefused(f"frontmatter nests deeper than {MAX_FRONTMATTER_DEPTH} levels") from None
        raise


def _walk_events(text: str) -> None:
    open_collections = 0
    for ev in yaml.parse(text, Loader=_LOADER):
        if isinstance(ev, _NODE_EVENTS):
            if isinstance(ev, yaml.AliasEvent):
                raise FrontmatterRefused(f"frontmatter uses a YAML alias (*{ev.anchor}, line {ev.start_mark.line + 2}); "
                                         "aliases are refused (they can expand exponentially): write the values out")
            if open_collections + 1 > MAX_FRONTMATTER_DEPTH:
                raise FrontmatterRefused(f"frontmatter nests deeper than {MAX_FRONTMATTER_DEPTH} levels")
            if not isinstance(ev, yaml.ScalarEvent):
                open_collections += 1
        elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            open_collections -= 1


def load_frontmatter_yaml(text: str):
    """yaml.safe_load with a size cap, no aliases and a depth cap; FrontmatterRefused says which limit."""
    if len(text) > MAX_FRONTMATTER_CHARS:
        raise FrontmatterRefused(f"frontmatter is {len(text):,} characters, over the "
                                 f"{MAX_FRONTMATTER_CHARS // 1024} KB limit")
    _check_events(text)
    return yaml.load(text, Loader=_LOADER)


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def split_frontmatter(text: str) -> tuple[dict, str, list[str]]:
    """Return (metadata, body, warnings). A malformed block is dropped from the body, never indexed as text."""
    m = FRONTMATTER_RE.match(text)
    if not m:
        return {}, text, []
    body = text[m.end():]
    try:
        data = load_frontmatter_yaml(m.group(1))
    except FrontmatterRefused as e:
        return {}, body, [f"{e}; indexed without its metadata"]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 2}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        return {}, body, [f"malformed YAML frontmatter{where}: {problem}; indexed without its metadata"]
    if data is None:
        return {}, body, []
    if not isinstance(data, dict):
        return {}, body, [f"frontmatter is a {type(data).__name__}, not a mapping; indexed without its metadata"]
    return data, body, []


def _flatten(value) -> list[str]:
    """YAML reads `parent: [[x]]` as a nested list and dates as date objects; give back strings."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for v in value:
            out.extend(_flatten(v))
        return out
    if isinstance(value, (date, datetime)):
        return [value.isoformat()]
    return [str(value)]


def _split_list(value, seps=r"[,\s]+") -> tuple[str, ...]:
    items: list[str] = []
    for v in _flatten(value):
        items.extend(p for p in re.split(seps, v) if p)
    return tuple(dict.fromkeys(t.lstrip("#") for t in items if t.lstrip("#")))


def _aliases(value) -> tuple[str, ...]:
    # aliases keep their inner spaces ("hybrid search"); a plain string may list several with commas
    out: list[str] = []
    for v in _flatten(value):
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return tuple(dict.fromkeys(out))


def _parent_links(value) -> list[Link]:
    links = []
    for v in _flatten(value):
        v = v.strip()
        m = LINK_RE.search(v) if "[[" in v else None
        target = m.group(2) if m else v.strip("[]")
        if target:
            links.append(Link(target=target.strip(), kind="parent"))
    return links


def code_mask(lines: list[str]) -> list[bool]:
    """True for each line inside a fenced code block or delimiting one (``` or ~~~, closed by the same)."""
    mask, in_fence, fence = [], False, ""
    for line in lines:
        m = FENCE_RE.match(line)
        if m and (not in_fence or m.group(1)[0] == fence):
            in_fence, fence = not in_fence, m.group(1)[0]
            mask.append(True)
        else:
            mask.append(in_fence)
    return mask


def strip_code(text: str) -> str:
    """Text with fenced blocks and inline code removed (for link and tag extraction)."""
    lines = text.split("\n")
    return "\n".join(INLINE_CODE_RE.sub(" ", l) for l, code in zip(lines, code_mask(lines)) if not code)


def extract_links(text: str) -> list[Link]:
    links = []
    for m in LINK_RE.finditer(strip_code(text)):
        bang, target, anchor, shown, kram = m.groups()
        target = target.strip()
        if not target and not anchor:
            continue
        links.append(Link(target=target, anchor=(anchor or "").strip(), display=(kram or shown or "").strip(),
                          embed=bool(bang), kind="embed" if bang else "link"))
    return links


def extract_inline_tags(text: str) -> list[str]:
    tags = []
    for line in strip_code(text).split("\n"):
        if HEADING_RE.match(line):
            continue
        line = LINK_RE.sub(" ", line)           # [[x#anchor]] is not a tag
        line = re.sub(r"https?://\S+", " ", line)
        tags.extend(t.rstrip("/-") for t in INLINE_TAG_RE.findall(line))
    return [t for t in tags if t]


def render_links(text: str) -> str:
    """[[a|shown]] -> shown, [[/path]]{shown} -> shown, [[a#h]] -> a#h: readable text for chunks."""
    def repl(m):
        bang, target, anchor, shown, kram = m.groups()
        if kram or shown:
            return (kram or shown).strip()
        t = target.strip().strip("/")
        return f"{t}#{anchor}" if anchor else t
    return LINK_RE.sub(repl, text)


def heading_title(text: str) -> str:
    """A heading's text without its closing "#"s, which CommonMark counts only after a space or tab
    ("## C#" is about C#; "## Notes ##" is "Notes")."""
    text = text.rstrip(" \t")
    bare = text.rstrip("#")
    if not bare or bare[-1] in " \t":
        return bare.rstrip(" \t")
    return text


def split_sections(body: str) -> list[Section]:
    """Sections by markdown heading, ignoring '#' lines inside fenced code; kramdown attributes stripped."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    buf: list[str] = []

    def flush():
        text = "\n".join(buf).strip()
        if text or not sections and path:
            sections.append(Section(tuple(h for _, h in path), render_links(text)))
        buf.clear()

    lines = [l.rstrip("\r") for l in body.split("\n")]
    for i, (line, code) in enumerate(zip(lines, code_mask(lines))):
        if code:
            buf.append(line)
            continue
        if KRAMDOWN_ATTR_LINE_RE.match(line):
            continue
        if TOC_MARKER_RE.match(line) and i + 1 < len(lines) and "{:toc}" in lines[i + 1]:
            continue
        h = HEADING_RE.match(line)
        if h:
            flush()
            level = len(h.group(1))
            title = KRAMDOWN_HEADING_ID_RE.sub("", heading_title(h.group(2))).strip()
            title = render_links(title)
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, title))
            continue
        buf.append(line)
    flush()
    return [s for s in sections if s.text]


def link_page_measure(body: str) -> tuple[float, int]:
    """(share of the body's word characters that are link text, distinct notes it links to). Code is
    left out; a [[link]] counts its shown text (or its target), a local [text](file) link its text, and
    a bare URL counts as neither link text nor prose."""
    link_chars = other_chars = 0
    targets: set[str] = set()

    def wiki(m):
        nonlocal link_chars
        _, target, anchor, shown, kram = m.groups()
        target = target.strip()
        if target:
            targets.add(target.lower().strip("/").removesuffix(".md"))
        link_chars += len(WORD_CHAR_RE.findall(kram or shown or target or anchor or ""))
        return " "

    def markdown(m):
        nonlocal link_chars
        text, target = m.groups()
        if URL_SCHEME_RE.match(target) or target.startswith("#"):
            return m.group(0)
        target = target.split("#", 1)[0]
        if target:
            targets.add(target.lower().lstrip("./").strip("/").removesuffix(".md"))
        link_chars += len(WORD_CHAR_RE.findall(text or target))
        return " "

    for line in strip_code(body).split("\n"):
        if KRAMDOWN_ATTR_LINE_RE.match(line) or TOC_MARKER_RE.match(line):
            continue
        rest = MD_LINK_RE.sub(markdown, LINK_RE.sub(wiki, line))
        rest = re.sub(r"[A-Za-z][A-Za-z0-9+.\-]*://\S+", " ", rest)
        rest = KRAMDOWN_HEADING_ID_RE.sub(" ", rest)
        other_chars += len(WORD_CHAR_RE.findall(rest))
    total = link_chars + other_chars
    return (link_chars / total if total else 0.0), len(targets)


def nav_reason(meta: dict, body: str) -> str:
    """Why a note is an index page kept out of the answer lists, or "" when it is not: the user's mark
    in the frontmatter (nav: true; type or layout moc/index/nav/hub, or a layout ending in "index" such
    as jekyll wikis' `wikiindex`), else the link-page measure."""
    if meta.get("nav") is True:
        return "frontmatter nav: true"
    for key in ("type", "layout"):
        value = str(meta.get(key, "")).strip().lower()
        if value in NAV_TYPES or (key == "layout" and value.endswith("index")):
            return f"frontmatter {key}: {value}"
    share, notes = link_page_measure(body)
    if share >= LINK_PAGE_SHARE and notes >= LINK_PAGE_MIN_NOTES:
        return f"link page: {share:.0%} of its words are links, to {notes} notes"
    return ""


def strip_data_uris(body: str) -> str:
    """The body with every inline base64 payload removed (the `data:...;base64,` prefix stays)."""
    return DATA_URI_RE.sub(r"\1", body) if "base64," in body else body


def parse_note(note_id: str, text: str, raw_hash: str = "", warnings: tuple[str, ...] = ()) -> Note:
    meta, body, fm_warnings = split_frontmatter(text)
    body = strip_data_uris(body)
    meta = {str(k).lower(): v for k, v in meta.items()}
    sections = split_sections(body)
    title = " ".join(_flatten(meta.get("title"))).strip()
    if not title:
        h1 = next((s.heading_path[0] for s in sections if s.heading_path), "")
        title = h1 or note_id.rsplit("/", 1)[-1]
    tags = list(_split_list(meta.get("tags", meta.get("tag"))))
    tags += [t for t in extract_inline_tags(body) if t not in tags]
    summary = " ".join(_flatten(meta.get("summary", meta.get("description")))).strip()
    links = _parent_links(meta.get("parent")) + extract_links(body)
    return Note(
        id=note_id, title=title, aliases=_aliases(meta.get("aliases", meta.get("alias"))),
        tags=tuple(tags), summary=summary, nav_reason=nav_reason(meta, body), sections=tuple(sections),
        links=tuple(links), content_hash=raw_hash or content_hash(text.encode("utf-8")),
        warnings=tuple(warnings) + tuple(fm_warnings))
