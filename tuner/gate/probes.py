"""Probes you can trust: hold whole documents out of an index built for the purpose.

A question whose gold lies only in held-out documents cannot be answered by that index: it becomes a
probe. A question with some gold left keeps the rest as its gold. Hand-written probes stay probes.

Documents are notes (a markdown vault: the kept notes are copied to OUT/vault), KorQuAD articles
(the kept articles are written to OUT/korquad.json with the held-out articles' paragraphs emptied, so
paragraph ids `AAA-PP` keep their article numbers), or the documents of a BEIR corpus: passages that
share a title are one document (AutoRAG-ko: the passages of one PDF, "finance - X.pdf - 4"), a passage
without a title is its own; the kept rows are written to OUT/beir/corpus.jsonl as they were. Outputs: OUT/index.sqlite, OUT/gold.yaml,
OUT/manifest.json (which documents were held out, the seed).
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from search_core import SearchCoreError
from search_core.index.indexer import index_vault
from search_core.ingest.vault import is_beir, is_korquad, list_vault

from tuner.data.gold import GoldSet, Question, load_gold


def document_of(note_id: str, korquad: bool, docs: dict | None = None) -> str:
    """The document a note belongs to: a KorQuAD paragraph `AAA-PP` belongs to article `AAA`; a BEIR
    passage to the document `docs` names for it (its title)."""
    if docs is not None:
        return docs.get(note_id, note_id)
    return note_id.split("-", 1)[0] if korquad else note_id


def questions_without(gold: GoldSet, held_out: set[str], korquad: bool, docs: dict | None = None) -> list[Question]:
    """The gold set's questions against an index without `held_out` documents (pure): a question whose gold
    is all held out becomes a probe. `docs`: note id -> document, for corpora whose documents are not in the
    ids (BEIR)."""
    out = []
    for q in gold.questions:
        kept = tuple(g for g in q.gold if document_of(g, korquad, docs) not in held_out)
        if q.is_probe or not kept:
            why = q.why if q.is_probe else f"gold {', '.join(q.gold)} held out"
            out.append(Question(q.id, "probe", q.query, (), why, source=q.source))
        else:
            # a note held out of this question's search that the index no longer holds needs no holding out
            exclude = tuple(x for x in q.exclude if document_of(x, korquad, docs) not in held_out)
            out.append(Question(q.id, q.level, q.query, kept, q.why, source=q.source, exclude=exclude))
    return out


def _probe_set_yaml(q: Question) -> dict:
    """A question as a probe set's gold file holds it: the gold file's form without `source` (the file has
    always been written so; load_gold reads the questions as hand-written)."""
    return {k: v for k, v in q.to_yaml().items() if k != "source"}


@dataclass(frozen=True)
class ProbeSet:
    """What `probes make` wrote: the index without the held-out documents and the gold set asked of it. Its
    `to_json` is the folder's manifest.json and the verb's --json output."""
    vault: str                  # the vault the documents were held out of
    gold: str                   # the new gold set (its probes and answerable questions)
    db: str                     # the index built without the held-out documents
    seed: int
    fraction: float
    documents: int
    held_out_documents: int
    held_out: tuple[str, ...]
    probes: int
    answerable: int
    made_probes: int            # questions that became probes because their gold was held out
    index_seconds: float

    def to_json(self) -> dict:
        return {"vault": self.vault, "gold": self.gold, "db": self.db, "seed": self.seed, "fraction": self.fraction,
                "documents": self.documents, "held_out_documents": self.held_out_documents,
                "held_out": list(self.held_out), "probes": self.probes, "answerable": self.answerable,
                "made_probes": self.made_probes, "index_seconds": self.index_seconds}


def make_probes(vault: str | Path, gold_path: str | Path, out: str | Path, *, fraction: float = 0.2,
                seed: int = 0, cache: str | Path | None = None) -> ProbeSet:
    vault, out = Path(vault), Path(out)
    if not 0.0 < fraction < 1.0:
        raise SearchCoreError(f"--fraction {fraction} must be between 0 and 1 (0.2 holds out a fifth of the documents)")
    if out.exists() and any(out.iterdir()):
        raise SearchCoreError(f"{out} is not empty; probes are made into a new folder (pick another --out)")
    gold = load_gold(gold_path)
    korquad, beir, doc_of = is_korquad(vault), is_beir(vault), None
    if korquad:
        data = json.loads(vault.read_text(encoding="utf-8"))
        docs = [f"{i:03d}" for i in range(len(data["data"]))]
    elif beir:
        corpus = vault / "corpus.jsonl" if vault.is_dir() else vault
        lines = [ln for ln in corpus.read_text(encoding="utf-8").splitlines() if ln.strip()]
        try:
            rows = [json.loads(ln) for ln in lines]
            doc_of = {str(r["_id"]): str(r.get("title") or r["_id"]) for r in rows}
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise SearchCoreError(f"{corpus} is not a BEIR corpus (one JSON object with an _id per line): {e}") from None
        docs = sorted(set(doc_of.values()))
    elif vault.is_dir():
        files = list_vault(vault)
        docs = [f.note_id for f in files]
    else:
        raise SearchCoreError(f"{vault}: probes can be made from a markdown vault folder, a KorQuAD JSON file "
                              "or a BEIR folder (corpus.jsonl)")
    if len(docs) < 2:
        raise SearchCoreError(f"{vault} has {len(docs)} document(s); holding some out needs at least 2")
    n_out = max(1, round(fraction * len(docs)))
    held = set(random.Random(seed).sample(sorted(docs), n_out))
    out.mkdir(parents=True, exist_ok=True)
    if korquad:
        for i, art in enumerate(data["data"]):
            if f"{i:03d}" in held:
                art["paragraphs"] = []
        source = out / "korquad.json"
        source.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    elif beir:
        source = out / "beir"
        source.mkdir()
        kept = [ln for ln, r in zip(lines, rows) if doc_of[str(r["_id"])] not in held]
        (source / "corpus.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    else:
        source = out / "vault"
        for f in files:
            if f.note_id not in held:
                dst = source / f.path.relative_to(vault)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f.path, dst)
    questions = questions_without(gold, held, korquad, doc_of)
    db = out / "index.sqlite"
    report = index_vault(source, db, cache=cache)
    gold_out = out / "gold.yaml"
    gold_out.write_text(yaml.safe_dump({"name": f"{gold.name}-probes-{seed}", "vault": str(source),
                                        "questions": [_probe_set_yaml(q) for q in questions]},
                                       allow_unicode=True, sort_keys=False),
                        encoding="utf-8")
    n_probes = sum(q.is_probe for q in questions)
    manifest = ProbeSet(str(vault), str(gold_out), str(db), seed, fraction, len(docs), len(held), tuple(sorted(held)),
                        n_probes, len(questions) - n_probes,
                        sum(q.is_probe for q, orig in zip(questions, gold.questions) if not orig.is_probe),
                        round(report.seconds, 1))
    (out / "manifest.json").write_text(json.dumps(manifest.to_json(), ensure_ascii=False, indent=1), encoding="utf-8")
    return manifest
