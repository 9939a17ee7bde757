"""The evidence a night tunes on, beside the person's hand-written gold set.

- Nightly (the sweep job, before a new sweep): the questions the vault supplies (`gold make`, made again only
  when the vault changed) and the labelled recall calls (the file the `labels` job keeps) are combined with the
  hand-written tuning set into one gold file under runs/evidence/ (tuner.data.night_gold). The holdout stays
  hand-written: with `split` instead of a holdout file, the hand-written set is split first and only its
  tuning part is combined, so no made question is ever a holdout question.
- Cloze questions (`[evidence] cloze`, tuner.data.cloze): one line of each note, blanked in a copy of the vault
  under runs/evidence/cloze/ and asked of that copy's index, made again only when the vault changed. With them the
  whole night runs on the copy's index (every other question is asked of it too; the notes the hand-written and
  labelled questions point at keep every line), and what it promotes is the vault's own index
  (index_to_promote), never the copy's.
- Weekly (the `labels` job): recall calls a person labelled become gold questions and probes (`gold from-log`),
  deduplicated against the hand-written sets and the calls already kept, added to the from-log file beside the
  gold set (written atomically; the hand-written file is only read).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml

from search_core import SearchCoreError, StopRequested
from search_core.files import atomic_write_text

from tuner.data.cloze import ClozeSet
from tuner.data.gold import load_gold, split_gold
from tuner.data.night_gold import NightGold, VaultSet, refresh_vault_questions, write_night_gold

CLOZE_FOLDER = "cloze"          # under runs/evidence/: the cloze set, the copy, its index, its model indexes


@dataclass(frozen=True)
class NightSet:
    """What a new sweep of the night stands on."""
    gold: str                       # the combined tuning set
    holdout: str | None             # hand-written
    tuning: NightGold
    vault: VaultSet | None          # None: [evidence] vault_questions = 0, or `vault_skipped`
    from_log: str | None            # the labelled calls' file, when it exists
    vault_skipped: str | None = None    # why the vault gave no questions (a corpus that is not notes, too few notes)
    db: str | None = None           # the index the night runs on: the cloze copy's, or None (the vault's own)
    cloze: ClozeSet | None = None
    cloze_made: bool = False        # made now (else reused: the vault did not change)
    cloze_skipped: str | None = None

    def to_json(self) -> dict:
        """For the run table and the daemon's log."""
        return {"tuning": self.tuning.describe(), "gold": self.gold,
                "by_kind": {k.source: {"answerable": k.answerable, "probes": k.probes} for k in self.tuning.kinds},
                **({"vault_set": ("made" if self.vault.made else "reused (the vault did not change)")
                                 + ("; left out of the night: no anchor question" if self.vault.lookups_only else "")}
                   if self.vault else {"vault_set": f"not made: {self.vault_skipped}"} if self.vault_skipped else {}),
                **({"cloze": {"questions": self.cloze.questions, "index": str(self.cloze.db),
                              "set": "made" if self.cloze_made else "reused (the vault did not change)"}}
                   if self.cloze else {"cloze": f"not made: {self.cloze_skipped}"} if self.cloze_skipped else {}),
                **({"left_out": self.tuning.dropped} if self.tuning.dropped else {})}


def index_note_ids(db: str | Path) -> set[str]:
    from search_core.index.store import connect
    conn = connect(db, readonly=True)
    try:
        return {r[0] for r in conn.execute("SELECT id FROM notes")}
    finally:
        conn.close()


def _split_hand_set(gold: str, fraction: float, seed: int, folder: Path) -> tuple[str, str]:
    """The hand-written set split as `sweep --split` splits it, written as two files (tuning, holdout)."""
    tune, hold = split_gold(load_gold(gold), fraction, seed)
    paths = []
    for part in (tune, hold):
        body = {"name": part.name, "vault": part.vault, "questions": [q.to_yaml() for q in part.questions]}
        p = folder / f"{part.name}.yaml"
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, f"# {gold} split {fraction:g} (seed {seed}), as `sweep --split` splits it\n"
                          + yaml.safe_dump(body, allow_unicode=True, sort_keys=False, width=1000))
        paths.append(str(p))
    return paths[0], paths[1]


def prepare_night_gold(cfg, db: str | Path, progress=None) -> NightSet:
    """The night's tuning set: hand-written (+ labelled calls) (+ the vault's questions), in one file."""
    progress = progress or (lambda line: None)
    s, ev = cfg.sweep, cfg.evidence
    folder = Path(cfg.runs) / "evidence"
    hand, holdout = s.gold, s.holdout
    if not holdout and s.setting("split"):
        hand, holdout = _split_hand_set(hand, float(s.setting("split")), int(s.setting("seed")), folder)
    parts = [hand]
    log_file = ev.from_log_path(s.gold)
    if log_file.exists():
        parts.append(str(log_file))
    own = [*parts, *([holdout] if holdout else [])]        # the person's questions: hand-written and labelled
    vault, skipped = None, None
    if ev.vault_questions and s.vault:
        try:
            vault = refresh_vault_questions(s.vault, folder, n=ev.vault_questions, seed=ev.seed, kinds=ev.kinds)
        except SearchCoreError as e:
            # a vault that yields no questions (a BEIR corpus, two notes) still has its hand-written night
            skipped = str(e)
            progress(f"vault questions: none ({skipped}); the night tunes on the other questions")
        else:
            progress(f"vault questions: {vault.questions} "
                     f"({', '.join(f'{k} {v}' for k, v in vault.by_kind.items())}) "
                     + ("made now" if vault.made else "reused: the vault did not change"))
            if vault.lookups_only:          # lookups alone name their answer (tuner/data/night_gold.py)
                progress(f"vault questions left out: {vault.left_out_reason()}")
            else:
                parts.append(str(vault.path))
    cloze, cloze_made, cloze_skipped = None, False, None
    if ev.cloze and s.vault:
        from tuner.data.cloze import refresh_cloze
        # the notes the person's own questions point at keep every line: those questions are asked of the copy too
        keep = {g for p in own for q in load_gold(p).questions for g in q.gold}
        try:
            cloze, cloze_made = refresh_cloze(s.vault, folder / CLOZE_FOLDER, n=ev.cloze, seed=ev.seed, keep_notes=keep,
                                              like=db)
        except SearchCoreError as e:
            cloze_skipped = str(e)
            progress(f"cloze questions: none ({cloze_skipped}); the night runs on the vault's own index")
        else:
            _share_gate_file(db, cloze.db)
            parts.append(str(cloze.gold))
            progress(f"cloze questions: {cloze.questions}, asked of {cloze.db} "
                     + ("(made now)" if cloze_made else "(reused: the vault did not change)"))
    night_db = str(cloze.db) if cloze else None
    left_out = (vault.left_out_reason(),) if vault is not None and vault.lookups_only else ()
    tuning = write_night_gold(parts, folder, name="night-gold", known_ids=index_note_ids(night_db or db),
                              left_out=left_out)
    progress(f"tuning set {tuning.path.name}: {tuning.describe()}")
    return NightSet(str(tuning.path), holdout, tuning, vault, str(log_file) if log_file.exists() else None, skipped,
                    night_db, cloze, cloze_made, cloze_skipped)


def _share_gate_file(db: str | Path, copy_db: str | Path) -> None:
    """The vault's index's gate file (`calibrate apply`) beside the copy's index too, or none there: the night
    decides with the gate `search` uses on the vault's index."""
    from search_core.gate.model import sidecar_path
    src, dst = sidecar_path(db), sidecar_path(copy_db)
    if src.exists():
        atomic_write_text(dst, src.read_text(encoding="utf-8"))
    elif dst.exists():
        dst.unlink()


def is_cloze_index(runs: str | Path, db: str | Path) -> bool:
    """Whether a sweep's index is a cloze copy's (or a model index built from the copy), which is never promoted."""
    root = (Path(runs) / "evidence" / CLOZE_FOLDER).resolve()
    return Path(db).resolve().is_relative_to(root)


def index_to_promote(vault_db: str | Path, vault: str | None, final_embedder: str, index_dir: str | Path,
                     stop=None) -> str:
    """The index a night run on the cloze copy promotes: the vault's own (`vault_db`) when the winner keeps its
    embedder, else the vault's index for the winner's embedder, built in `index_dir` as a sweep's model round builds
    it (the copy's index of that model lacks the cloze lines)."""
    from tuner.data.cloze import index_settings
    if index_settings(vault_db)[0] == final_embedder:
        return str(vault_db)
    from tuner.sweep.workbench import Workbench
    bench = Workbench(vault_db, vault=vault, index_dir=index_dir)
    bench.stop = stop
    try:
        searcher, _ = bench.searcher_for(final_embedder)
        return str(searcher.db)
    finally:
        for sr in bench.searchers.values():
            sr.close()


@dataclass(frozen=True)
class LabelsRun:
    """What the weekly `labels` job did: `added` questions and probes written to `file` (none: `why`)."""
    log: str
    file: str
    added: int
    why: str | None = None
    labelled: int | None = None
    left_out: dict[str, int] | None = None     # reason -> calls left out
    questions: int | None = None
    probes: int | None = None
    total: int | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def labels_to_gold(cfg, *, now: float | None = None, stop=None) -> LabelsRun:
    """The weekly `labels` job: labelled recall calls not yet kept become questions and probes, added to the
    from-log file. Nothing labelled, or nothing new: the file is left as it is. `stop()`, asked after the log
    is read and before the file is written, ends the run with StopRequested and leaves the file as it was."""
    from search_core.paths import recall_log_file
    from tuner.data.log_gold import gold_from_log
    log_path = recall_log_file(cfg.runs)
    out = cfg.evidence.from_log_path(cfg.sweep.gold)
    if not log_path.exists():
        return LabelsRun(str(log_path), str(out), 0, f"no recall log at {log_path} yet (the recall path writes it)")
    existing = [p for p in (cfg.sweep.gold, cfg.sweep.holdout) if p]
    kept = load_gold(out) if out.exists() else None
    lg = gold_from_log(log_path, existing=existing + ([str(out)] if kept else []), now=now, allow_empty=True)
    answerable = sum(q.level != "probe" for q in lg.questions)
    if not lg.questions:
        return LabelsRun(str(log_path), str(out), 0, "no labelled call that the gold sets do not already ask"
                         if lg.labelled else "no call is labelled yet (`autoresearch recall-log label` or the /label page)",
                         lg.labelled, lg.left_out)
    rows = [q.to_yaml() for q in (kept.questions if kept else ())] + [q.to_yaml() for q in lg.questions]
    seen: set[str] = set()
    for r in rows:                    # a new log file numbers its calls from 1 again
        base_id, n = r["id"], 2
        while r["id"] in seen:
            r["id"], n = f"{base_id}-{n}", n + 1
        seen.add(r["id"])
    header = (f"# Questions from use: recall calls a person labelled ({log_path}), kept by the daemon's weekly "
              "labels job.\n# Edit or prune freely: the next run keeps what is here and only adds calls it does not "
              "ask yet.\n")
    if stop is not None and stop():
        raise StopRequested(f"stopped before {len(lg.questions)} new question(s) were added to {out}; the next "
                            "run adds them")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, header + yaml.safe_dump({"name": out.stem, "questions": rows}, allow_unicode=True,
                                                   sort_keys=False, width=1000))
    return LabelsRun(str(log_path), str(out), len(lg.questions), None, lg.labelled, lg.left_out, answerable,
                     len(lg.questions) - answerable, len(rows))
