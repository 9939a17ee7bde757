"""Index pages kept out of the answer lists by what they are (search_core.ingest.parse.nav_reason): per vault,
the notes the rule flags and why, the real notes closest to the link-page threshold, and, where hand-written
question sets exist, how many answerable questions had an index page in their top 5 under the old rule
(frontmatter `type`/`nav` and the id globs only) and under the new one, with hit@5 and MRR for both.

    python benchmarks/bench_nav_pages.py [--vaults demo,johngrib,autorag,extra] [--sample 60] [--vaults-dir ../vaults]

extra: the real vaults of benchmarks.common.VAULT_SETS, each with all its sets (every one spent).

johngrib is indexed as a subset (the notes the spent sets name as gold, root-index and a seeded sample of
the rest), copied and indexed under /work/cache/navpages/ (outside the repository; a full index is ~13 min
of both cores). johngrib-next.yaml is never read here: it is kept out of every choice (benchmarks/sets/README.md).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, VAULT_SETS, write_result  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))     # a worktree sits one level deeper than shared/
CACHE = Path("/work/cache/navpages")
JOHNGRIB = DATA / "johngrib-wiki" / "_wiki"
JOHNGRIB_SETS = [ROOT / "benchmarks" / "sets" / f"johngrib-{n}.yaml"
                 for n in ("tune", "holdout", "blind", "week", "final", "last")]     # never johngrib-next
DEMO_SETS = sorted((ROOT / "experiments" / "gold").glob("demo-*.yaml"))
OLD_REASONS = ("frontmatter nav: true", "frontmatter type:")   # what parse flagged before the link-page rule


def flagged(notes) -> tuple[list[tuple[str, str, float, int]], list[tuple[str, float, int]]]:
    """(flagged: id, reason, link share, notes linked), (the unflagged notes linking 10+ notes with the
    largest link shares: the real notes nearest the threshold)."""
    from search_core.ingest.parse import LINK_PAGE_MIN_NOTES, link_page_measure
    out, near = [], []
    for n in notes:
        body = n.__dict__.get("_raw_body", None)
        share, linked = link_page_measure(body) if body is not None else (0.0, 0)
        if n.nav_reason:
            out.append((n.id, n.nav_reason, share, linked))
        elif linked >= LINK_PAGE_MIN_NOTES:
            near.append((n.id, share, linked))
    near.sort(key=lambda t: -t[1])
    return sorted(out), near[:3]


def parse_vault(root: Path):
    """Every note of a folder vault, parsed as the indexer parses it, with its raw body kept for the measure."""
    from search_core.ingest.parse import parse_note, split_frontmatter
    notes = []
    for p in sorted(root.rglob("*.md")):
        text = p.read_text(encoding="utf-8", errors="replace")
        n = parse_note(str(p.relative_to(root))[:-3], text)
        object.__setattr__(n, "_raw_body", split_frontmatter(text)[1])
        notes.append(n)
    return notes


def print_flagged(name: str, notes) -> dict:
    rows, near = flagged(notes)
    print(f"\n== {name}: {len(notes)} notes, {len(rows)} flagged as index pages")
    for nid, why, share, linked in rows:
        print(f"  {nid:<40} {why}   (measure: {share:.0%} link words, {linked} notes)")
    if near:
        print("  nearest real notes (10+ notes linked, largest link share): " +
              ", ".join(f"{nid} {share:.0%}/{linked}" for nid, share, linked in near))
    return {"notes": len(notes), "flagged": [{"id": r[0], "reason": r[1], "share": round(r[2], 3), "linked": r[3]}
                                             for r in rows],
            "nearest": [{"id": n[0], "share": round(n[1], 3), "linked": n[2]} for n in near]}


def old_rule_searcher(db):
    """A Searcher that keeps out only what was kept out before the link-page rule, and pins nothing."""
    from search_core.search.pipeline import Searcher

    class OldRule(Searcher):
        def nav_reasons(self, globs=None):
            import fnmatch
            globs = globs or ()
            return {nid: n["nav_reason"] or "glob" for nid, n in self.view.notes.items()
                    if n["nav_reason"].startswith(OLD_REASONS) or any(fnmatch.fnmatchcase(nid, g) for g in globs)}

        def _nav_names(self, globs):
            return {}
    return OldRule(db)


def before_after(name: str, db: Path, sets: list[Path]) -> dict:
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from tuner.data.gold import GoldSet, load_gold
    from tuner.evaluation.evaluate import RetrievalCache, run_queries, summarize

    questions = []
    for p in sets:
        questions += load_gold(p).answerable()
    gold = GoldSet(name, "+".join(p.name for p in sets), tuple(questions))
    new = Searcher(db)
    old = old_rule_searcher(db)
    cfg = SearchConfig(embedder=new.embedder_name)
    pages = set(new.nav_reasons(cfg.nav_globs))          # every index page, by the new rule and the globs
    cache = RetrievalCache()
    out = {"questions": len(questions), "index_pages": sorted(pages)}
    for label, s in (("before", old), ("after", new)):
        rows = run_queries(s, gold, cfg, cache)
        with_page = [r for r in rows if pages & set(r.ranked[:5])]
        m = summarize(rows)
        out[label] = {"with_index_page_in_top5": len(with_page), "hit@5": m["hit@5"], "mrr": m["mrr"],
                      "examples": [(r.id, sorted(pages & set(r.ranked[:5]))) for r in with_page[:8]]}
    print(f"  {len(questions)} answerable questions ({gold.source})")
    for label in ("before", "after"):
        b = out[label]
        print(f"  {label:<6}: index page in top 5 for {b['with_index_page_in_top5']:>3}, hit@5 {b['hit@5']:.4f}, "
              f"MRR {b['mrr']:.4f}" + (f"   e.g. {b['examples'][:4]}" if b["examples"] else ""))
    return out


def johngrib_subset(sample: int) -> Path:
    """The notes the six spent sets name as gold, root-index, and `sample` other notes (seed 0)."""
    from tuner.data.gold import load_gold
    want = {"root-index"}
    for p in JOHNGRIB_SETS:
        want |= load_gold(p).gold_ids()
    every = sorted(str(p.relative_to(JOHNGRIB))[:-3] for p in JOHNGRIB.rglob("*.md"))
    rest = [n for n in every if n not in want]
    want |= set(random.Random(0).sample(rest, min(sample, len(rest))))
    vault = CACHE / f"johngrib-subset-{sample}" / "_wiki"
    have = {str(p.relative_to(vault))[:-3] for p in vault.rglob("*.md")} if vault.exists() else set()
    if have != {n for n in want if (JOHNGRIB / f"{n}.md").exists()}:
        shutil.rmtree(vault, ignore_errors=True)
        for n in sorted(want):
            src = JOHNGRIB / f"{n}.md"
            if src.exists():
                (vault / src.relative_to(JOHNGRIB)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, vault / src.relative_to(JOHNGRIB))
    return vault


def index_of(name: str, vault: Path, cache: str | None = "embed-cache.sqlite") -> Path:
    """The vault's index under CACHE, embedding through `cache` there (None: the shared embedding cache)."""
    from search_core.index.indexer import index_vault
    db = CACHE / f"{name}.sqlite"
    rep = index_vault(vault, db, cache=CACHE / cache if cache else None)
    print(f"  index {db}: {rep.notes} notes ({rep.mode}, {rep.embedded} embedded now, {rep.seconds:.0f} s)", flush=True)
    return db


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vaults", default="demo,johngrib,autorag,extra")
    ap.add_argument("--sample", type=int, default=60, help="johngrib notes beyond the gold notes and root-index")
    ap.add_argument("--sets-dir", type=Path, default=ROOT / "benchmarks" / "sets",
                    help="where the sets of the real vaults (VAULT_SETS) are")
    ap.add_argument("--vaults-dir", type=Path, default=DATA.parent.parent / "vaults",
                    help="the folder holding the real vaults of VAULT_SETS (benchmarks/sets/README.md)")
    args = ap.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    result = {}
    if "demo" in args.vaults:
        vault = ROOT / "experiments" / "demo-vault"
        result["demo"] = print_flagged("demo", parse_vault(vault))
        result["demo"]["questions"] = before_after("demo", index_of("demo", vault), DEMO_SETS)
    if "johngrib" in args.vaults:
        result["johngrib"] = print_flagged("johngrib (all 974 notes)", parse_vault(JOHNGRIB))
        vault = johngrib_subset(args.sample)
        result["johngrib"]["questions"] = before_after("johngrib", index_of(f"johngrib-subset-{args.sample}", vault,
                                                                                "embed-cache-johngrib.sqlite"),
                                                       JOHNGRIB_SETS)
    if "autorag" in args.vaults:
        from search_core.ingest.parse import parse_note
        from search_core.ingest.vault import read_beir
        passages, _ = read_beir(DATA / "autorag-ko" / "beir")
        notes = []
        for p in passages:             # each passage's text put through the note parser's rule
            n = parse_note(p.id, p.body)
            object.__setattr__(n, "_raw_body", p.body)
            notes.append(n)
        result["autorag-ko"] = print_flagged("autorag-ko (BEIR passages)", notes)
    if "extra" in args.vaults:
        for name, (folder, set_names) in VAULT_SETS.items():      # the real vaults and their (spent) sets
            root = args.vaults_dir / folder
            if not root.is_dir():
                print(f"\n== {name}: no vault at {root} (benchmarks/sets/README.md says how to lay it out); left out")
                continue
            result[name] = print_flagged(name, parse_vault(root))
            # the shared embedding cache: these vaults were embedded by the other benchmarks already
            result[name]["questions"] = before_after(name, index_of(name, root, cache=None),
                                                     [args.sets_dir / f"{n}.yaml" for n in set_names])
    previous = ROOT / "runs" / "bench" / "nav_pages.json"      # the vaults not run now keep their last figures
    if previous.exists():
        import json
        result = {**json.loads(previous.read_text(encoding="utf-8")), **result}
    print(f"\nwritten {write_result('nav_pages', result)}")


if __name__ == "__main__":
    main()
