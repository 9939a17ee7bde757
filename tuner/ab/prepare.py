"""Everything an A/B checks before it loads a model: candidate names, the question sets, the vault."""

from __future__ import annotations

from pathlib import Path

from search_core import SearchCoreError


def load_ab_gold(gold_path: Path, holdout: Path | None, split: float | None):
    """(tuning set, evaluation set, a note on how they were made)."""
    from tuner.data.gold import load_gold, split_gold

    if holdout and split:
        raise SearchCoreError("give --holdout FILE or --split F, not both")
    gold = load_gold(gold_path)
    if holdout:
        return gold, load_gold(holdout), ""
    if split:
        tune, hold = split_gold(gold, split)
        return tune, hold, (f"{gold.name} split by a hash of each question id: {len(tune.questions)} tuning, "
                            f"{len(hold.questions)} holdout (--split {split}).")
    return gold, gold, ""


def prepare(embedders: str, rerankers: str | None, gold_path: Path, holdout: Path | None, split: float | None,
            vault: str | None, db: Path | None, config_path: Path | None, work: Path):
    """Every check that needs no model: names, gold files, vault. Returns ABParams."""
    from search_core.config import load_config
    from search_core.index.store import connect, get_meta

    from tuner.ab.run import ABError, ABParams, parse_candidates

    embs, rers = parse_candidates(embedders, rerankers)
    tune, ev, note = load_ab_gold(gold_path, holdout, split)
    if vault is None and db is not None:
        conn = connect(db)
        try:
            vault = get_meta(conn, "vault")
        finally:
            conn.close()
    vault = vault or ev.vault or tune.vault
    if not vault or not Path(vault).exists():
        raise ABError(f"no vault to index: {vault!r} is not here; pass --vault DIR (the notes folder, a BEIR "
                      "corpus folder or a KorQuAD JSON file)")
    folder = Path(vault)
    if folder.is_dir() and not (folder / "corpus.jsonl").exists() and next(folder.rglob("*.md"), None) is None:
        raise ABError(f"the vault {vault} has no notes (no .md file below it, no corpus.jsonl); an A/B of an empty "
                      "vault compares nothing. Pass --vault with your notes folder")
    params = ABParams(embs, rers, tune, ev, str(vault), str(work), str(db) if db else None, load_config(config_path),
                      note)
    check_runnable(params)
    return params


def check_runnable(p) -> None:
    """Refuse, before anything is built or written, an A/B where fewer than two candidates can run here."""
    from tuner.ab.run import ABError, not_runnable_here
    gone = not_runnable_here(p)
    runs = [(e, r) for e in p.embedders for r in p.rerankers if e not in gone and r not in gone]
    if len(runs) >= 2:
        return
    can = ", ".join(e if r == "none" else f"{e} + {r}" for e, r in runs) or "none"
    raise ABError(f"an A/B needs two candidates that can run here; {len(runs)} can ({can}). "
                  + "; ".join(f"{n}: {why}" for n, why in gone.items())
                  + ". Install what is missing, or compare others (e5-small runs everywhere)")
