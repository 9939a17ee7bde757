"""Questions the vault itself supplies: how its author already refers to each note, turned into a gold set.

No model writes these. Each question is cut from something the author wrote about a note:

- anchor  the sentence around a link to the note in another note (`[[note]]`, `[[note|text]]`,
          `[[/path]]{text}`, `[text](note.md)`): how the author refers to the note elsewhere, the closest thing
          to a query a vault holds (anchor text as a pseudo-query: Xie et al., SIGIR 2023). The linking note
          holds that very sentence, so it is held out of the question's search (`exclude:`), and so is any
          other note that holds the sentence verbatim.
- heading the note's title and one of its headings ("tmux 설정 파일"): a lookup.
- alias   one of its frontmatter aliases: a lookup, cross-lingual when the alias is in another script.
- summary its frontmatter summary/description.
- title   its title alone.

The trivial is guarded against: a question that is a near-verbatim copy of the gold note's indexed text
other than the field it was made from (an anchor sentence the note quotes back) is dropped; a heading that
many notes share ("개요", "참고문헌": it only echoes the title) is not a question; lines that are only links
(lists, "다음 문서: [[x]]") and index/MOC notes give no anchors.

Which kinds a default set holds was decided by measurement (benchmarks/bench_gold_make.py, BENCHMARKS.md):
the rank correlation of 8 configs' MRR on made and on hand-written questions. Summary questions are matched
by the very field they were cut from (frontmatter is indexed for the keyword channel): keyword-only search
scores MRR 1.000 (demo) and 0.962 (johngrib) on them, its hand-written MRR is 0.849 and 0.845, and the order
agrees at Spearman 0.55 and 0.56; title questions agree at 0.31 and 0.70. Anchor sentences asked without
their linking note agree at 0.93 (demo; hit@5 0.96) and -0.21 (johngrib; hit@5 0.86), asked with it at 0.43
and -0.56; heading lookups at 0.51 and 0.95; aliases at 0.86 (demo; johngrib has none).

Two options are `gold make`'s recipe (MADE_N, MADE_ANCHOR_SHARE; benchmarks/bench_recovery.py, a night tuned
on a made set and judged on hand-written holdouts): `mask_link` leaves the link out of its anchor question
(the link's text names the gold note, which the entity channel matches: nights on unmasked sets kept w_entity
0.45-0.6 and lost MRR; masked, johngrib's agreement across the configs a night visits rose from -0.61 to
0.61), and `anchor_share` takes anchors first. Neither raised the share of the start -> default gap a night
recovers at 200 questions; together at 600 (johngrib's anchors read from the whole wiki) they did (BENCHMARKS.md).
A third option, `heading_title=False`, asks a heading without its note's title (the title names the note, which
the entity channel matches); measured, it trades that echo for the keyword channel's (MADE_HEADING_TITLE).
The library's own defaults stay the recipe before; `gold make`, the daemon's nightly set and the demo use the
recipe (tuner.data.night_gold.refresh_vault_questions).
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import yaml

from search_core import SearchCoreError
from search_core.config import SearchConfig
from search_core.files import atomic_write_text
from search_core.ingest.graph import LinkResolver
from search_core.ingest.note import Note
from search_core.ingest.parse import FRONTMATTER_RE, HEADING_RE, INLINE_CODE_RE, LINK_RE, code_mask
from search_core.ingest.vault import Skipped, list_vault, read_note

from tuner.data.gold import Question

if TYPE_CHECKING:
    from tuner.gate.probes import ProbeSet

KINDS = ("anchor", "heading", "alias", "summary", "title")
# the kinds a set holds unless asked otherwise: the ones whose config order agreed with hand-written
# questions on at least one vault and whose text is not the field the keyword channel matches them by
# (benchmarks/bench_gold_make.py; the figures are in the docstring above); the others on request (--kinds)
DEFAULT_KINDS = ("anchor", "heading", "alias")
# `gold make`'s recipe: up to 600 questions, anchors first, each without its link (BENCHMARKS.md, a night on
# questions the vault supplies: on johngrib, held-out hit@5 recovered 61-83 % of the start -> default gap with
# it, 0 % with 200 questions of every kind in turn). --keep-link and --kinds-in-turn give the recipe before.
MADE_N = 600
MADE_ANCHOR_SHARE = 1.0
# Heading questions keep their note's title. Without it (heading_title=False, `--heading-alone`) a made set stops
# rewarding the entity channel that matches the title by name (Voyager003's wiki: w_entity 0.35 moved made MRR
# 0.970 -> 0.985 with titles, 0.788 -> 0.755 without, hand-written 0.831 -> 0.758), but the heading alone is the
# very text the keyword channel indexes: a night on it kept the keyword channel alone (w_dense 1.0 -> 0) and
# lowered held-out hit@5 0.967 -> 0.900 (BENCHMARKS.md). So neither is evidence about fusion on such a vault.
MADE_HEADING_TITLE = True
# `findable_in`: a made question is kept only when some fusion list alone (dense, FTS5 keyword, n-gram BM25) finds
# its gold note in its top FINDABLE_WITHIN. rrf_k decides between a note one list puts first and a note every list
# puts mid-way: a question no list finds moves only by that consensus at deep ranks, so it rewards a large k
# (demo, the recipe's set at the shipped default: the 30 of 600 no list finds gain 0.036 MRR from k 2 -> 120, the
# 570 others lose 0.041, the hand-written demo-tune loses 0.021 from k 2 -> 60). On johngrib 275 of the recipe's 600
# no list finds; a night on the findable set moved rrf_k (60 -> 28) and recovered no more of the gap than the
# recipe, and within 1 (144 anchors, the rest heading lookups at rank 1) less: so it is not gold make's default
# (docs/lab-notes/tuner-2026-12.md).
FINDABLE_WITHIN = 10
FINDABLE_LISTS = {
    "dense": {"w_dense": 1.0, "w_sparse": 0.0, "w_ngram": 0.0},
    "keyword": {"w_dense": 0.0, "w_sparse": 1.0, "w_ngram": 0.0},
    "ngram": {"w_dense": 0.0, "w_sparse": 0.0, "w_ngram": 1.0},
}
# every kind a made question's id may name: `gold make`'s, and the cloze questions of `gold cloze` (tuner.data.cloze),
# which are asked of the vault's copy without their lines
MADE_KINDS = KINDS + ("cloze",)
LEVEL_OF = {"anchor": "L1", "heading": "L0", "alias": "L0", "summary": "L1", "title": "L0"}

MD_LINK_RE = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FOOTNOTE_RE = re.compile(r"\[\^[^\]]*\]")
URL_RE = re.compile(r"https?://\S+")
LIST_MARK_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
SENTENCE_RE = re.compile(r"(?<=[.!?。])\s+|(?<=다\.)|(?<=요\.)")
WORD_RE = re.compile(r"[0-9A-Za-z\uac00-\ud7a3]+")
HANGUL_RE = re.compile(r"[\uac00-\ud7a3]")
LATIN_RE = re.compile(r"[A-Za-z]")

# A line gives an anchor question only if, outside its links, it says something: at least 3 words and 10
# letters ("다음 문서: [[x]]" has 2 words, 4 letters; "* [[/cmd/man]]" none).
MIN_CONTEXT_WORDS = 3
MIN_CONTEXT_LETTERS = 10
MAX_QUERY_CHARS = 200          # an anchor sentence longer than this is clipped around the link
# A note whose body lines are mostly links (a list of links with little else) is an index/MOC note by its
# shape even without a `type: moc` flag: its lines say nothing about where they point.
NAV_LINK_LINE_SHARE = 0.5
NAV_MIN_LINKS = 5
# A heading shared by this many notes or more only echoes the title ("개요", "참고문헌", "Links")
GENERIC_HEADING_NOTES = 3
# A heading asked without its title must say something alone: 2 words, or 6 letters of one ("트랜잭션전파")
HEADING_ALONE_MIN_WORDS = 2
HEADING_ALONE_MIN_LETTERS = 6
# An anchor question is an echo of its gold note when this share of its 8-character shingles (letters and
# digits only, lower-cased) is in the note's indexed text: a sentence the note quotes back, not a reference
SHINGLE = 8
ECHO_SHARE = 0.8


@dataclass(frozen=True, kw_only=True)
class MadeQuestion(Question):
    """A question the vault supplies: a gold question (source "vault"; `exclude`, the notes held out of its
    search: the note it was cut from) and how it was made, which its file does not keep."""
    source: str = "vault"
    kind: str                               # one of KINDS


@dataclass(frozen=True)
class VaultQuestions:
    questions: tuple[MadeQuestion, ...]
    vault: str
    seed: int
    candidates: dict[str, int] = field(default_factory=dict)     # kind -> candidates made before sampling
    dropped: dict[str, int] = field(default_factory=dict)        # reason -> count

    def by_kind(self) -> dict[str, int]:
        """kind -> how many questions of it (a mapping, not a record)."""
        return dict(Counter(q.kind for q in self.questions))

    def lookups_only(self) -> str | None:
        """What to say when the set holds no anchor question (the vault's links sit in lists, or it has none):
        lookups alone name their answer, and nights tuned on them on such a vault (Voyager003's wiki: 600
        heading lookups) kept the keyword and entity channels and lowered held-out hit@5 and MRR below the
        start on 3 of 3 seeds (BENCHMARKS.md). None when anchors are there."""
        if not self.questions or any(q.kind == "anchor" for q in self.questions):
            return None
        return "no anchor question: " + lookups_only_warning(len(self.questions), self.vault)


def lookups_only_warning(questions: int, vault: str = "the vault") -> str:
    """What a set of made questions with no anchor among them means (`gold make`'s warning, the morning report)."""
    return (f"no note of {vault} refers to another inside a sentence, so these "
            f"{questions} questions are lookups that name their answer (the note's title, a heading "
            "or an alias); a night tuned on them alone can favour the keyword and entity channels beyond what "
            "helps your own questions: add questions in your own words (`autoresearch gold init`)")


def made_kind(question_id: str) -> str | None:
    """The kind a made question's id names ("anchor-1a2b3c4d", "cloze-1a2b3c4d", or "vault:anchor-1a2b3c4d" once a
    night's set renamed it beside a hand-written id): None for an id `gold make` or `gold cloze` did not write."""
    head = question_id.split(":", 1)[-1].split("-", 1)[0]
    return head if head in MADE_KINDS and "-" in question_id else None


@dataclass(frozen=True)
class _Candidate:
    kind: str
    query: str
    gold: str
    source: str                  # the note the text was cut from
    why: str


# -- reading the vault ------------------------------------------------------------------------------------

def vault_of(vault_or_db: str | Path) -> Path:
    """The vault folder: VAULT itself, or the vault an index file was built from (its `vault` meta)."""
    p = Path(vault_or_db)
    if p.is_dir():
        return p
    if not p.exists():
        raise SearchCoreError(f"{p} does not exist; pass a vault folder or an index file built from one")
    from search_core.index.store import connect, get_meta
    try:
        conn = connect(p)
        try:
            vault = get_meta(conn, "vault")
        finally:
            conn.close()
    except Exception as e:      # a text file, a damaged index: say what was expected
        raise SearchCoreError(f"{p} is neither a vault folder nor a readable index file ({e})") from None
    if not vault or not Path(vault).is_dir():
        raise SearchCoreError(f"{p} was built from {vault!r}, which is not a folder here; pass the vault folder")
    return Path(vault)


def read_vault(vault: Path) -> tuple[dict[str, Note], dict[str, str]]:
    """(note id -> parsed note, note id -> raw text) of every note that reads."""
    notes, raw = {}, {}
    for vf in list_vault(vault):
        n = read_note(vf)
        if isinstance(n, Skipped):
            continue
        notes[n.id] = n
        raw[n.id] = vf.path.read_text(encoding="utf-8", errors="replace").lstrip("\ufeff")
    return notes, raw


# -- text helpers -----------------------------------------------------------------------------------------

def normalise(text: str) -> str:
    """Letters and digits only, lower-cased (NFKC): what a verbatim test compares."""
    return "".join(WORD_RE.findall(unicodedata.normalize("NFKC", text).lower()))


def shingles(text: str, n: int = SHINGLE) -> set[str]:
    t = normalise(text)
    return {t[i:i + n] for i in range(len(t) - n + 1)} if len(t) >= n else ({t} if t else set())


def echo_share(query: str, text_shingles: set[str]) -> float:
    """The share of the query's shingles found in a text: 1.0 when the query is cut from it verbatim."""
    q = shingles(query)
    return len(q & text_shingles) / len(q) if q else 0.0


def indexed_text(note: Note) -> str:
    """What the index holds of a note: title, aliases, summary, headings and body (rendered links)."""
    heads = {h for s in note.sections for h in s.heading_path}
    return "\n".join([note.title, *note.aliases, note.summary, *heads, note.body])


def script_of(text: str) -> str:
    """hangul or latin when at least two thirds of the words are in that script, else mixed. Words, not
    letters: "벡터 DB를 이해할 때 (vector db comparison)" is Korean though it has more Latin letters."""
    words = WORD_RE.findall(text)
    h = sum(1 for w in words if HANGUL_RE.search(w))
    l = sum(1 for w in words if LATIN_RE.search(w) and not HANGUL_RE.search(w))
    if h + l == 0:
        return "mixed"
    return "hangul" if h >= 2 * (h + l) / 3 else "latin" if l >= 2 * (h + l) / 3 else "mixed"


def level_for(kind: str, query: str, note: Note) -> str:
    """LEVEL_OF by how the question was made; XL when words other than the note's own name (an anchor
    sentence, an alias, a summary) are written in the other script from the note's (an English alias of a
    Korean note). A title or heading lookup names the note as it is named: never XL."""
    q, n = script_of(query), script_of(note.title + " " + note.body[:2000])
    if kind in ("anchor", "alias", "summary") and {q, n} == {"hangul", "latin"}:
        return "XL"
    return LEVEL_OF[kind]


def _link_name(target: str) -> str:
    """A bare link read as words: [[/people/james-gosling]] -> "james gosling"."""
    stem = target.strip().strip("/").rsplit("/", 1)[-1]
    if stem.lower().endswith(".md"):
        stem = stem[:-3]
    return re.sub(r"[-_]+", " ", stem).strip()


def _render(line: str) -> str:
    """A line as a reader sees it: links as their text, no markup, no footnote marks or URLs."""
    def wiki(m):
        _, target, anchor, shown, kram = m.groups()
        return (kram or shown or "").strip() or _link_name(target or anchor or "")
    line = LINK_RE.sub(wiki, line)
    line = MD_LINK_RE.sub(lambda m: m.group(1), line)
    line = FOOTNOTE_RE.sub("", INLINE_CODE_RE.sub(lambda m: m.group(0).strip("`"), line))
    line = URL_RE.sub("", line)
    line = LIST_MARK_RE.sub("", line)
    line = re.sub(r"^\[[ xX]\]\s*", "", line)          # a task's checkbox
    line = re.sub(r"^\s*(?:#{1,6}|>+)\s*", "", line)
    line = re.sub(r"[*_~]{1,3}", "", line)
    return re.sub(r"\s+", " ", line).strip(" :-|")


def _outside_links(line: str) -> str:
    line = LINK_RE.sub(" ", line)
    line = MD_LINK_RE.sub(" ", line)
    return URL_RE.sub(" ", INLINE_CODE_RE.sub(" ", FOOTNOTE_RE.sub(" ", line)))


def heading_says_something(heading: str) -> bool:
    """Whether a heading asked without its note's title is a question ("초기화 작업", "Lazy loading in Hibernate")
    and not a fragment that needs the title ("해결책", "Item 3")."""
    words = [w for w in WORD_RE.findall(heading) if not w.isdigit()]
    return len(words) >= HEADING_ALONE_MIN_WORDS or sum(map(len, words)) >= HEADING_ALONE_MIN_LETTERS


def says_something(line: str) -> bool:
    """Whether a line has words of its own besides its links (a list of links, "다음 문서: [[x]]" has not)."""
    words = WORD_RE.findall(_outside_links(line))
    return len(words) >= MIN_CONTEXT_WORDS and sum(map(len, words)) >= MIN_CONTEXT_LETTERS


def _md_target(href: str) -> str | None:
    """The note a markdown link points into, or None for a web address, a mail address or an image."""
    href = unquote(href.split("#", 1)[0]).strip()
    if not href or re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I):
        return None
    if re.search(r"\.(png|jpe?g|gif|svg|pdf|webp)$", href, re.I):
        return None
    return href


def _body_lines(raw: str) -> tuple[list[str], int]:
    """(body lines, the 1-based file line of the first one): frontmatter is not body."""
    m = FRONTMATTER_RE.match(raw)
    offset = raw[:m.end()].count("\n") if m else 0
    return raw[m.end():].split("\n") if m else raw.split("\n"), offset + 1


def _sentence_with(line: str, start: int, end: int) -> str:
    """The sentence of `line` holding [start, end), clipped to MAX_QUERY_CHARS around it."""
    bounds = [0] + [m.end() for m in SENTENCE_RE.finditer(line)] + [len(line)]
    lo = max(b for b in bounds if b <= start)
    hi = min((b for b in bounds if b >= end), default=len(line))
    s = line[lo:hi]
    if len(s) > MAX_QUERY_CHARS:
        mid = (start + end) // 2 - lo
        a = max(0, mid - MAX_QUERY_CHARS // 2)
        s = s[a:a + MAX_QUERY_CHARS]
    return s


def is_nav_note(note: Note, raw: str, nav_globs=SearchConfig().nav_globs) -> bool:
    """An index/MOC note: flagged so, named so (the search's nav globs), or shaped so (mostly link lines)."""
    import fnmatch
    if note.is_nav or any(fnmatch.fnmatchcase(note.id, g) for g in nav_globs):
        return True
    lines, _ = _body_lines(raw)
    mask = code_mask(lines)
    content = [l for l, c in zip(lines, mask) if l.strip() and not c and not HEADING_RE.match(l)]
    linky = [l for l in content if (LINK_RE.search(l) or MD_LINK_RE.search(l)) and not says_something(l)]
    return len(linky) >= NAV_MIN_LINKS and len(linky) >= NAV_LINK_LINE_SHARE * len(content)


# -- candidates -------------------------------------------------------------------------------------------

def anchor_candidates(notes: dict[str, Note], raw: dict[str, str], nav: set[str], dropped: Counter,
                      mask_link: bool = False) -> list[_Candidate]:
    """One candidate per (linking note, line, target): the sentence around the link, the link read as its text,
    or with mask_link the link left out (its text mostly names the note: a title lookup for the entity
    and keyword channels, not a question about it)."""
    resolver = LinkResolver(notes)
    out = []
    for src in sorted(notes):
        if src in nav:
            continue
        lines, first = _body_lines(raw[src])
        mask = code_mask(lines)
        for i, (line, code) in enumerate(zip(lines, mask)):
            if code or "[" not in line:
                continue
            spans = [(m.start(), m.end(), m.group(2) or "", bool(m.group(1))) for m in LINK_RE.finditer(line)]
            spans += [(m.start(), m.end(), t, False) for m in MD_LINK_RE.finditer(line)
                      if (t := _md_target(m.group(2))) is not None]
            if not spans:
                continue
            if HEADING_RE.match(line) or not says_something(line):
                dropped["a line of links only"] += len(spans)
                continue
            seen = set()
            for start, end, target, embed in sorted(spans):
                if embed or not target.strip():
                    continue
                gold = resolver.resolve(src, target)
                if gold is None or gold == src or gold in seen:
                    continue
                seen.add(gold)
                if gold in nav:
                    dropped["links to an index/MOC note"] += 1
                    continue
                sentence = _sentence_with(line, start, end)
                if not says_something(sentence):
                    dropped["a line of links only"] += 1
                    continue
                if mask_link:
                    sentence = re.sub(r"\(\s*\)", " ", sentence.replace(line[start:end], " ", 1))
                    if not says_something(sentence):
                        dropped["nothing said once the link is left out"] += 1
                        continue
                query = _render(sentence)
                out.append(_Candidate("anchor", query, gold, src, f"anchor text in note {src}, line {first + i}"))
    return out


def field_candidates(notes: dict[str, Note], nav: set[str], dropped: Counter,
                     heading_title: bool = True) -> list[_Candidate]:
    """Candidates from each note's own fields: heading (title + heading), alias, summary, title.
    heading_title=False: a heading question is the heading alone, the counterpart of mask_link (the title names
    the note, which the entity channel matches by name), kept only when it says something without the title
    (HEADING_ALONE_MIN_WORDS words or HEADING_ALONE_MIN_LETTERS letters); one two notes share is dropped later
    with every question whose words point at several notes."""
    head_notes: Counter = Counter()
    for n in notes.values():
        for h in {normalise(s.heading_path[-1]) for s in n.sections if s.heading_path}:
            head_notes[h] += 1
    out = []
    for nid in sorted(notes):
        n = notes[nid]
        if nid in nav:
            continue
        title_n = normalise(n.title)
        out.append(_Candidate("title", n.title, nid, nid, f"title of note {nid}"))
        for a in n.aliases:
            if normalise(a) and normalise(a) != title_n:
                out.append(_Candidate("alias", a, nid, nid, f"alias {a!r} of note {nid}"))
        if n.summary and normalise(n.summary) != title_n:
            out.append(_Candidate("summary", n.summary, nid, nid, f"frontmatter summary of note {nid}"))
        heads = []
        for s in n.sections:
            if not s.heading_path:
                continue
            h = s.heading_path[-1].strip()
            hn = normalise(h)
            if not hn or hn == title_n or hn in title_n or h in heads:
                continue
            if head_notes[hn] >= GENERIC_HEADING_NOTES or not WORD_RE.search(re.sub(r"\d+", "", h)):
                dropped["a heading many notes share (it only echoes the title)"] += 1
                continue
            if not heading_title and not heading_says_something(h):
                dropped["a heading that says nothing without its note's title"] += 1
                continue
            heads.append(h)
            out.append(_Candidate("heading", f"{n.title} {h}" if heading_title else _render(h), nid, nid,
                                  f"heading {h!r} of note {nid}"))
    return out


# -- choosing ---------------------------------------------------------------------------------------------

def _spread(cands: list[_Candidate], n: int | None, rng: random.Random) -> list[_Candidate]:
    """Up to n candidates taken round-robin over gold notes in a seeded order, so no one note (a hub many
    notes link to) fills the set; within a note, kinds take turns too."""
    by_note: dict[str, list[_Candidate]] = defaultdict(list)
    for c in cands:
        by_note[c.gold].append(c)
    order = sorted(by_note)
    rng.shuffle(order)
    queues = []
    for nid in order:
        kinds: dict[str, list[_Candidate]] = defaultdict(list)
        for c in by_note[nid]:
            kinds[c.kind].append(c)
        for lst in kinds.values():
            rng.shuffle(lst)
        ks = sorted(kinds, key=KINDS.index)
        mixed = [kinds[k][i] for i in range(max(map(len, kinds.values()))) for k in ks if i < len(kinds[k])]
        queues.append(mixed)
    out, r = [], 0
    while any(r < len(q) for q in queues):
        for q in queues:
            if r < len(q):
                out.append(q[r])
                if n is not None and len(out) >= n:
                    return out
        r += 1
    return out


def make_vault_questions(vault_or_db: str | Path, *, n: int | None = 200, seed: int = 0,
                         kinds: tuple[str, ...] = DEFAULT_KINDS, anchor_share: float | None = None,
                         mask_link: bool = False, heading_title: bool = True, only_notes=None,
                         findable_in: str | Path | None = None,
                         findable_within: int = FINDABLE_WITHIN) -> VaultQuestions:
    """A gold set of questions the vault answers, made from what its author wrote about each note.
    anchor_share: anchor questions take up to this share of n first (None: all kinds in turn per note).
    mask_link: an anchor question leaves out the link itself (anchor_candidates).
    heading_title: a heading question carries its note's title (False: the heading alone, field_candidates).
    only_notes: note ids a question may have as its gold and hold out (e.g. the notes an index holds, when the
    vault read is larger than the index: its other notes still give anchors about these), None: every note.
    findable_in: an index of the vault; a question is kept only when one fusion list alone finds its gold note
    there in its top `findable_within` (FINDABLE_LISTS), so the set sees the top-rank fusion hand-written
    questions live in; n is then filled from the questions that pass."""
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise SearchCoreError(f"unknown question kind(s) {bad}; kinds: {', '.join(KINDS)}")
    if n is not None and n < 1:
        raise SearchCoreError(f"-n {n}: ask for at least one question")
    if findable_within < 1:
        raise SearchCoreError(f"findable within {findable_within}: give a rank of 1 or more")
    if anchor_share is not None and not 0.0 <= anchor_share <= 1.0:
        raise SearchCoreError(f"anchor share {anchor_share}: give a share of the questions from 0 to 1")
    vault = vault_of(vault_or_db)
    notes, raw = read_vault(vault)
    if len(notes) < 2:
        raise SearchCoreError(f"{vault} has {len(notes)} note(s); questions need a vault of at least 2")
    nav = {nid for nid, note in notes.items() if is_nav_note(note, raw[nid])}
    dropped: Counter = Counter()
    cands = (anchor_candidates(notes, raw, nav, dropped, mask_link) if "anchor" in kinds else []) + \
        [c for c in field_candidates(notes, nav, dropped, heading_title) if c.kind in kinds]
    if only_notes is not None:
        only = set(only_notes)
        dropped["about a note outside the notes asked for"] += sum(c.gold not in only for c in cands)
        cands = [c for c in cands if c.gold in only]
    made = Counter(c.kind for c in cands)
    # the same words asked of two notes are no question about either; the same question twice is one
    owners: dict[str, set[str]] = defaultdict(set)
    for c in cands:
        owners[normalise(c.query)].add(c.gold)
    kept, seen = [], set()
    for c in cands:
        key = normalise(c.query)
        if len(key) < 2:
            dropped["too short"] += 1
        elif len(owners[key]) > 1:
            dropped["the same words point at several notes"] += 1
        elif (key, c.gold) in seen:
            dropped["a repeat"] += 1
        else:
            seen.add((key, c.gold))
            kept.append(c)
    rng = random.Random(seed)
    shingle_cache: dict[str, set[str]] = {}
    flat = {nid: normalise(indexed_text(note)) for nid, note in notes.items()}

    def question(c: _Candidate) -> MadeQuestion | None:
        exclude: tuple[str, ...] = ()
        if c.kind == "anchor":
            if c.gold not in shingle_cache:
                shingle_cache[c.gold] = shingles(indexed_text(notes[c.gold]))
            if echo_share(c.query, shingle_cache[c.gold]) >= ECHO_SHARE:
                dropped["an anchor sentence its own note holds (an echo)"] += 1
                return None
            # the linking note, and any other note that holds the sentence word for word, are held out
            key = normalise(c.query)
            copies = sorted(nid for nid, text in flat.items() if nid not in (c.gold, c.source) and key in text)
            exclude = tuple(x for x in (c.source, *copies) if only_notes is None or x in only)
        qid = f"{c.kind}-{hashlib.sha256(f'{c.gold}|{c.query}'.encode()).hexdigest()[:8]}"
        return MadeQuestion(qid, level_for(c.kind, c.query, notes[c.gold]), c.query, (c.gold,), c.why, kind=c.kind,
                            exclude=exclude)

    finder = FindableCheck(findable_in, findable_within) if findable_in is not None else None

    def take(cands: list[_Candidate], limit: int | None, into: list[MadeQuestion]) -> None:
        for c in _spread(cands, None, rng):
            if limit is not None and len(into) >= limit:
                return
            q = question(c)
            if q is None:
                continue
            if finder is not None and not finder.finds(q):
                dropped[f"no fusion list alone finds its note in its top {findable_within}"] += 1
                continue
            into.append(q)

    questions: list[MadeQuestion] = []
    try:
        if anchor_share is not None and n is not None:
            # anchors first, up to their share of n; the other kinds fill what is left (and what anchors lack)
            take([c for c in kept if c.kind == "anchor"], round(n * anchor_share), questions)
            take([c for c in kept if c.kind != "anchor"], n, questions)
        else:
            take(kept, n, questions)
    finally:
        if finder is not None:
            finder.close()
    if not questions:
        raise SearchCoreError(f"{vault}: no question could be made from {len(notes)} notes (kinds "
                              f"{', '.join(kinds)}): the notes have no links with words around them, no "
                              "aliases and no distinctive headings; write a few questions with `gold init`")
    return VaultQuestions(tuple(questions), str(vault), seed, dict(made), dict(dropped))


class FindableCheck:
    """Whether some fusion list alone (FINDABLE_LISTS) finds a question's gold note in its top `within`, in an
    index of the vault, with the question's `exclude` notes held out as a night's search holds them out."""

    def __init__(self, db: str | Path, within: int = FINDABLE_WITHIN):
        from search_core.search.pipeline import Searcher
        self.within = within
        self.searcher = Searcher(db)
        self.configs = tuple(SearchConfig().replace(w_decomposed=0.0, w_entity=0.0, **weights)
                             for weights in FINDABLE_LISTS.values())

    def finds(self, q: MadeQuestion) -> bool:
        for cfg in self.configs:
            r = self.searcher.retrieve_for(q.query, cfg, exclude=q.exclude)
            res = self.searcher.rank(r, cfg, snippets=False, limit_fused=self.within, exclude=q.exclude)
            if any(nid in q.gold for nid in res.ranked[:self.within]):
                return True
        return False

    def close(self) -> None:
        self.searcher.close()


def gold_yaml(vq: VaultQuestions, name: str, command: str = "") -> str:
    """The set as our gold YAML (tuner.data.gold.load_gold reads it), with a header saying how it was made."""
    counts = ", ".join(f"{k} {v}" for k, v in sorted(vq.by_kind().items(), key=lambda kv: KINDS.index(kv[0])))
    dropped = "; ".join(f"{k}: {v}" for k, v in sorted(vq.dropped.items()))
    header = [f"# Questions the vault supplies: made from what its author wrote about each note, by a program,",
              f"# not by a person; read them and prune. {len(vq.questions)} questions ({counts}), seed {vq.seed}."]
    if command:
        header.append(f"# Made by: {command}")
    if dropped:
        header.append(f"# Left out: {dropped}")
    header += ["# `exclude:` notes are held out of that question's search (it was cut from their text).",
               f"# Probes: autoresearch probes make {vq.vault} --gold THIS_FILE --out DIR", ""]
    body = yaml.safe_dump({"name": name, "vault": vq.vault, "questions": [q.to_yaml() for q in vq.questions]},
                          allow_unicode=True, sort_keys=False, width=1000)
    return "\n".join(header) + body


def write_vault_questions(vault_or_db: str | Path, out: str | Path, *, n: int | None = 200, seed: int = 0,
                          kinds: tuple[str, ...] = DEFAULT_KINDS, command: str = "",
                          anchor_share: float | None = None, mask_link: bool = False, heading_title: bool = True,
                          only_notes=None, findable_in: str | Path | None = None,
                          findable_within: int = FINDABLE_WITHIN) -> VaultQuestions:
    """make_vault_questions, written atomically to `out` as a gold set."""
    vq = make_vault_questions(vault_or_db, n=n, seed=seed, kinds=kinds, anchor_share=anchor_share,
                              mask_link=mask_link, heading_title=heading_title, only_notes=only_notes,
                              findable_in=findable_in, findable_within=findable_within)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, gold_yaml(vq, Path(out).stem, command))
    return vq


def make_probes_for(vq: VaultQuestions, gold_path: str | Path, n_probes: int, *, seed: int = 0,
                    cache: str | Path | None = None) -> ProbeSet:
    """About n_probes probes from a made set through `probes make` (tuner.gate.probes): each made question
    has one gold note, so holding out that share of the vault's notes turns about n_probes of them into
    probes, asked of a new index without those notes. Written beside the set, in <stem>-probes/."""
    from tuner.gate.probes import make_probes
    gold_path = Path(gold_path)
    n_notes = len(list_vault(vq.vault))
    fraction = min(0.5, max(n_probes / len(vq.questions), 1 / n_notes))
    return make_probes(vq.vault, gold_path, gold_path.with_name(gold_path.stem + "-probes"), fraction=fraction,
                       seed=seed, cache=cache)
