"""Gold sets: our YAML format, BEIR folders (queries.jsonl + qrels .tsv), and KorQuAD 1.0 JSON as it is.

Every problem is reported with the file and the line (or the question id), and a gold id that the
index does not hold is an error unless the caller asks for a warning.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from search_core import SearchCoreError

LEVELS = {
    "L0": "direct lookup", "L1": "concept / paraphrase", "XL": "cross-lingual",
    "L2": "multi-hop", "L3": "synthesis", "probe": "no answer exists",
}


class GoldError(SearchCoreError):
    pass


QUESTION_KEYS = ("id", "level", "query", "gold", "why", "source", "exclude")
# where a question came from, in order of trust: written by hand, a recall-log call a person labelled,
# made from the vault's own text (tuner/sweep/keep_rule.py reads them apart: docs/tuner.md)
SOURCES = ("hand", "log", "vault")
# what a gold file that is not UTF-8 most likely is, tried in this order: Korean Windows first (the
# case that was reported: a file saved as CP949), then Japanese and Chinese, then Western European
ENCODING_GUESSES = ("cp949", "euc-kr", "shift_jis", "gb18030", "cp1252")


def read_text(p: Path) -> str:
    """A gold file as text. Not UTF-8 is an error that names the file, the line and a likely encoding."""
    raw = p.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        guess = next((enc for enc in ENCODING_GUESSES if _decodes(raw, enc)), None)
        hint = (f"it reads as {guess}; convert it: `iconv -f {guess} -t utf-8 {p} > {p.stem}.utf8{p.suffix}`"
                if guess else "re-save it as UTF-8")
        raise GoldError(f"{p} line {line}: not UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start}); {hint}") from None


def _decodes(raw: bytes, enc: str) -> bool:
    try:
        raw.decode(enc)
        return True
    except UnicodeDecodeError:
        return False


@dataclass(frozen=True)
class Question:
    id: str
    level: str
    query: str
    gold: tuple[str, ...]
    why: str = ""
    line: int | None = None
    source: str = "hand"      # SOURCES
    # note ids held out of this question's search (Searcher.rank's exclude): a question cut from a note's
    # own text (the words around a link in it) is asked without that note, so it cannot be matched to itself
    exclude: tuple[str, ...] = ()

    @property
    def is_probe(self) -> bool:
        return self.level == "probe"

    def to_yaml(self) -> dict:
        """The question as a gold file holds it (load_gold reads it back)."""
        return {"id": self.id, "level": self.level, "query": self.query, "gold": list(self.gold), "why": self.why,
                "source": self.source, **({"exclude": list(self.exclude)} if self.exclude else {})}


@dataclass(frozen=True)
class GoldSet:
    name: str
    source: str
    questions: tuple[Question, ...]
    vault: str | None = None

    def answerable(self) -> list[Question]:
        return [q for q in self.questions if not q.is_probe]

    def probes(self) -> list[Question]:
        return [q for q in self.questions if q.is_probe]

    def gold_ids(self) -> set[str]:
        return {g for q in self.questions for g in q.gold}

    def check_against(self, known_ids, *, allow_missing: bool = False) -> list[str]:
        """Every gold id must be a note in the index. Returns warnings when allow_missing, else raises."""
        known = set(known_ids)
        missing = [(q.id, g, "") for q in self.questions for g in q.gold if g not in known] + \
            [(q.id, x, " in `exclude`") for q in self.questions for x in q.exclude if x not in known]
        if not missing:
            return []
        lines = {q.id: q.line for q in self.questions}
        listing = ", ".join(f"{qid}{f' (line {lines[qid]})' if lines.get(qid) else ''}: {g!r}{where}"
                            for qid, g, where in missing[:20]) + (" ..." if len(missing) > 20 else "")
        msg = (f"{self.source}: {len(missing)} gold id(s) are not notes in the index: {listing}. "
               "Fix the ids (a note id is the vault path without .md), or index the right vault")
        if allow_missing:
            return [msg + " (ignored: --allow-missing; these questions can never be hits)"]
        raise GoldError(msg)


def load_gold(path: str | Path) -> GoldSet:
    p = Path(path)
    if not p.exists():
        raise GoldError(f"gold set {p} does not exist")
    if p.is_dir() or p.suffix == ".tsv":
        return load_beir_gold(p)
    if p.suffix == ".json":
        return load_korquad_gold(p)
    return load_yaml_gold(p)


def _line_of(node) -> int:
    return node.start_mark.line + 1


def load_yaml_gold(p: Path) -> GoldSet:
    text = read_text(p)
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise GoldError(f"{p}{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if isinstance(data, dict) and data.get("questions") is None and "\n  # - id:" in text:
        raise GoldError(f"{p}: no question is filled in yet: remove the leading `# ` of a slot's lines and write "
                        "its query (`gold init` wrote the slots as comments)")
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise GoldError(f"{p}: a gold set is a mapping with `name` and a `questions:` list")
    q_nodes = next(v for k, v in root.value if k.value == "questions").value
    if not data["questions"]:
        raise GoldError(f"{p}: the gold set has no questions")
    seen: dict[str, int] = {}
    questions = []
    for raw, node in zip(data["questions"], q_nodes):
        line = _line_of(node)
        where = f"{p} line {line}"
        if not isinstance(raw, dict):
            raise GoldError(f"{where}: a question is a mapping with id, level, query, gold, why")
        qid = str(raw.get("id", "")).strip()
        if not qid:
            raise GoldError(f"{where}: question without `id`")
        if qid in seen:
            raise GoldError(f"{where}: duplicate id {qid!r} (first at line {seen[qid]})")
        seen[qid] = line
        unknown = [str(k) for k in raw if k not in QUESTION_KEYS]
        if unknown:
            close = difflib.get_close_matches(unknown[0], QUESTION_KEYS, n=1)
            raise GoldError(f"{where}: question {qid} has unknown key {unknown[0]!r}" +
                            (f" (did you mean {close[0]!r}?)" if close else "") + f"; keys: {', '.join(QUESTION_KEYS)}")
        query = raw.get("query")
        if query is not None and not isinstance(query, str):
            raise GoldError(f"{where}: question {qid}: query must be text, got {type(query).__name__} {query!r}; "
                            "quote it: query: \"...\"")
        if query is None or not query.strip():
            raise GoldError(f"{where}: question {qid} has no `query`")
        level = str(raw.get("level", "")).strip()
        if level not in LEVELS:
            raise GoldError(f"{where}: question {qid} has unknown level {level!r}; levels: {', '.join(LEVELS)}")
        gold = raw.get("gold") or []
        if isinstance(gold, str):
            gold = [gold]
        if not isinstance(gold, list):
            raise GoldError(f"{where}: question {qid}: `gold` is a list of note ids")
        if level == "probe" and gold:
            raise GoldError(f"{where}: question {qid} is a probe (no answer exists) but lists gold {gold}")
        if level != "probe" and not gold:
            raise GoldError(f"{where}: question {qid} has no gold ids; make it level `probe` if no note answers it")
        source = raw.get("source", "hand")
        if source not in SOURCES:
            raise GoldError(f"{where}: question {qid} has unknown source {source!r}; sources: {', '.join(SOURCES)} "
                            "(hand-written, a labelled recall-log call, made from the vault's text)")
        exclude = raw.get("exclude") or []
        if isinstance(exclude, str):
            exclude = [exclude]
        if not isinstance(exclude, list) or not all(isinstance(x, str) and x.strip() for x in exclude):
            raise GoldError(f"{where}: question {qid}: `exclude` is a list of note ids (the notes held out of "
                            f"this question's search), got {raw.get('exclude')!r}")
        both = sorted(set(map(str.strip, exclude)) & {str(g) for g in gold})
        if both:
            raise GoldError(f"{where}: question {qid} excludes its own gold {both}: a held-out note can never be "
                            "found; drop it from `exclude` or from `gold`")
        questions.append(Question(qid, level, query.strip(), tuple(str(g) for g in gold),
                                  str(raw.get("why", "")).strip(), line, source=source,
                                  exclude=tuple(x.strip() for x in exclude)))
    return GoldSet(str(data.get("name") or p.stem), str(p), tuple(questions), data.get("vault"))


def _qrels_file(p: Path) -> Path:
    if p.is_file():
        return p
    for cand in ("qrels_test.tsv", "qrels/test.tsv", "qrels_dev.tsv", "qrels/dev.tsv"):
        if (p / cand).exists():
            return p / cand
    found = sorted(p.glob("qrels*.tsv")) + sorted(p.glob("qrels/*.tsv"))
    if len(found) == 1:
        return found[0]
    raise GoldError(f"{p}: no qrels file (looked for qrels_test.tsv, qrels/test.tsv); pass the .tsv itself")


def load_beir_gold(p: Path) -> GoldSet:
    qrels_path = _qrels_file(p)
    folder = qrels_path.parent if qrels_path.parent.name != "qrels" else qrels_path.parent.parent
    qpath = folder / "queries.jsonl"
    if not qpath.exists():
        raise GoldError(f"{folder}: no queries.jsonl beside the qrels")
    queries: dict[str, str] = {}
    for lineno, line in enumerate(read_text(qpath).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            queries[str(row["_id"])] = str(row["text"])
        except (json.JSONDecodeError, KeyError) as e:
            raise GoldError(f"{qpath} line {lineno}: not a BEIR query row ({e})") from None
    gold: dict[str, list[str]] = {}
    with io.StringIO(read_text(qrels_path)) as f:
        reader = csv.reader(f, delimiter="\t")
        for lineno, row in enumerate(reader, 1):
            if not row or (lineno == 1 and row[0] == "query-id"):
                continue
            if len(row) < 2:
                raise GoldError(f"{qrels_path} line {lineno}: expected query-id, corpus-id, score")
            qid, did = row[0], row[1]
            score = int(row[2]) if len(row) > 2 and row[2].lstrip("-").isdigit() else 1
            if qid not in queries:
                raise GoldError(f"{qrels_path} line {lineno}: query {qid!r} is not in {qpath.name}")
            if score > 0:
                gold.setdefault(qid, []).append(did)
    if not gold:
        raise GoldError(f"{qrels_path}: no relevant (score > 0) judgements")
    qs = tuple(Question(qid, "L1", queries[qid], tuple(ids)) for qid, ids in gold.items())
    return GoldSet(f"{folder.name}-{qrels_path.stem}", str(qrels_path), qs, str(folder))


def korquad_paragraph_id(article: int, paragraph: int) -> str:
    return f"{article:03d}-{paragraph:02d}"


_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_LATIN = re.compile(r"[A-Za-z]")


def korquad_level(question: str, title: str) -> str:
    """KorQuAD has no levels; these rules give it the ones the reports break down by. XL: the question is
    written mostly in Latin letters over a Korean paragraph (13 of the 5,774 dev questions); L0: it names its
    article's title, a direct lookup (1,717); L1: everything else, a paraphrase of the paragraph."""
    if len(_LATIN.findall(question)) > len(_HANGUL.findall(question)):
        return "XL"
    if title and title in question:
        return "L0"
    return "L1"


def load_korquad_gold(p: Path) -> GoldSet:
    data = _read_korquad(p)
    qs = []
    for ai, art in enumerate(data):
        title = str(art.get("title", ""))
        for pi, para in enumerate(art["paragraphs"]):
            for qa in para["qas"]:
                qs.append(Question(str(qa["id"]), korquad_level(qa["question"], title), qa["question"],
                                   (korquad_paragraph_id(ai, pi),)))
    return GoldSet(p.stem, str(p), tuple(qs), str(p))


def _read_korquad(p: Path) -> list:
    try:
        doc = json.loads(read_text(p))
        data = doc["data"]
        data[0]["paragraphs"][0]["qas"]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError) as e:
        raise GoldError(f"{p}: not a KorQuAD/SQuAD JSON file (data[].paragraphs[].qas[]): {e}") from None
    return data


def split_gold(gold: GoldSet, fraction: float, seed: int = 0) -> tuple[GoldSet, GoldSet]:
    """Deterministic split into (tuning, holdout) by a hash of each question id: `fraction` goes to tuning.
    Probes are split the same way, so both halves can score the gate."""
    import hashlib
    if not 0 < fraction < 1:
        raise GoldError(f"--split takes a fraction between 0 and 1, got {fraction}")
    def bucket(q):
        return int(hashlib.sha256(f"{seed}|{q.id}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    tune = tuple(q for q in gold.questions if bucket(q) < fraction)
    hold = tuple(q for q in gold.questions if bucket(q) >= fraction)
    if not tune or not hold:
        raise GoldError(f"{gold.source}: {len(gold.questions)} questions are too few to split")
    return (GoldSet(f"{gold.name}-tune{int(fraction * 100)}", gold.source, tune, gold.vault),
            GoldSet(f"{gold.name}-holdout{100 - int(fraction * 100)}", gold.source, hold, gold.vault))
