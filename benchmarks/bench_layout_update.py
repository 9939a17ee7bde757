"""Bytes one changed note writes to the layout files beside the index, at 100,000 chunks or more.

    python benchmarks/bench_layout_update.py [--chunks 100000] [--work /work/cache/layout] [--edits 3] [--nav]
        [--label after] [--out benchmarks/results/layout_update.json]

The vault is bench_scale.py's (`make_vault`: real text read in place from $AUTORESEARCH_DATA, written under
--work, never into the repository), embedded by the test embedder (tests/helpers/fake_embedder.py, in this
process): the mechanics of the write are measured, not the vectors' meaning. The index is built once under
--work/index-N (kept); each run copies it through SQLite's backup API (which leaves the layout files behind),
lets a no-op `index_vault` write them whole, then changes one note at a time (a line appended: the note's
last chunk changes, the others are kept) and runs the update, --edits times, undoing each edit after. Per
update: the bytes written to the layout files (a file new since the update's start counts whole, a file that
grew counts its growth), the bytes the process wrote through write() (wchar, /proc/self/io: SQLite's WAL
too), CPU and wall seconds with the load average beside them. With --nav, then as many runs after a change
of the notes' index-page flags (the rule's mark removed and one note's flag reason changed, as an index written
under an older rule has them: the run reads every note again and stores the flags), measured the same way.

The code measured is the checkout on PYTHONPATH (run from this one with PYTHONPATH=$PWD). The script reads
only `index_vault` and `layout_path`, so the same file measures another checkout's code:
`PYTHONPATH=/path/to/other/checkout python benchmarks/bench_layout_update.py --label before` (the label
names the run in --out; the commit measured is recorded beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))     # after PYTHONPATH: it picks the code measured
from benchmarks.bench_scale import DATA, make_vault  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def wchar() -> int:
    return int(dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())["wchar"])


def layout_files(db: Path) -> dict[str, tuple[int, int, int]]:
    from search_core.index.layout import layout_path
    main = layout_path(db)
    return {p.name: (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns) for p in main.parent.glob(main.name + "*")}


def layout_bytes(before: dict, after: dict) -> int:
    """Bytes the update put into the layout files: nothing for a file as it was under any name (the small file
    renamed to `.prev`), the growth of a file appended to (its name and inode as before), the whole of any
    other (a new file; its inode may be one a removed file had). An in-place write that does not grow a file
    would go uncounted: none of ours does one."""
    same = set(before.values())
    total = 0
    for name, (ino, size, mtime) in after.items():
        old = before.get(name)
        if (ino, size, mtime) in same:
            continue
        total += size - old[1] if old is not None and old[0] == ino and size >= old[1] else size
    return total


def git_commit() -> str:
    import search_core
    root = Path(search_core.__file__).resolve().parent.parent
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--work", type=Path, default=Path("/work/cache/layout"))
    ap.add_argument("--edits", type=int, default=3)
    ap.add_argument("--nav", action="store_true", help="also measure the updates after a change of index-page flags")
    ap.add_argument("--label", default="after")
    ap.add_argument("--out", type=Path, default=RESULTS / "layout_update.json")
    args = ap.parse_args()
    from search_core.index.indexer import index_vault
    from search_core.index.store import backup_copy, connect
    from search_core.models import register_embedder
    from tests.helpers.fake_embedder import NAME, HashedNgramEmbedder
    register_embedder(NAME, HashedNgramEmbedder)

    vault = args.work / f"vault-{args.chunks}"
    made = make_vault(args.chunks, vault, DATA)
    cache = args.work / "embed-cache.sqlite"
    built = args.work / f"index-{args.chunks}" / "index.sqlite"
    if not built.exists():
        built.parent.mkdir(parents=True, exist_ok=True)
        index_vault(vault, built, embedder=NAME, cache=cache)
    db = args.work / f"run-{args.label}" / "index.sqlite"
    db.parent.mkdir(parents=True, exist_ok=True)
    for p in db.parent.iterdir():
        p.unlink()
    backup_copy(built, db)
    t = time.process_time()
    index_vault(vault, db, embedder=NAME, cache=cache)          # the layout files written whole, for this copy
    first = {"cpu_s": round(time.process_time() - t, 2),
             "layout_bytes": sum(size for _, size, _ in layout_files(db).values())}

    notes = sorted(vault.rglob("*.md"))
    runs = []
    for k in range(args.edits):
        note = notes[(k + 1) * len(notes) // (args.edits + 1)]
        text = note.read_text(encoding="utf-8")
        note.write_text(text + f"\n\n고친 줄 {k}: 레이아웃 파일에 쓰인 바이트.\n", encoding="utf-8")
        try:
            before, w0, c0, t0, load = layout_files(db), wchar(), time.process_time(), time.perf_counter(), os.getloadavg()[0]
            report = index_vault(vault, db, embedder=NAME, cache=cache)
            # no note name: the vault's names come from KorQuAD's titles too (CC BY-ND, nothing derived is kept)
            runs.append({"edit": k, "changed": report.changed,
                         "layout_bytes": layout_bytes(before, layout_files(db)), "wchar": wchar() - w0,
                         "cpu_s": round(time.process_time() - c0, 3), "wall_s": round(time.perf_counter() - t0, 3),
                         "load": round(load, 1)})
        finally:
            note.write_text(text, encoding="utf-8")
        print(json.dumps(runs[-1]), flush=True)
    nav_runs = []
    for k in range(args.edits if args.nav else 0):
        from search_core.index.indexer import NAV_RULE_KEY
        conn = connect(db)
        with conn:
            conn.execute("DELETE FROM meta WHERE key = ?", (NAV_RULE_KEY,))
            conn.execute("UPDATE notes SET nav_reason = ? WHERE rowid = (SELECT min(rowid) FROM notes)",
                         (f"a flag of an older rule {k}",))
        conn.close()
        before, w0, c0, t0, load = layout_files(db), wchar(), time.process_time(), time.perf_counter(), os.getloadavg()[0]
        index_vault(vault, db, embedder=NAME, cache=cache)
        nav_runs.append({"nav": k, "layout_bytes": layout_bytes(before, layout_files(db)), "wchar": wchar() - w0,
                         "cpu_s": round(time.process_time() - c0, 3), "wall_s": round(time.perf_counter() - t0, 3),
                         "load": round(load, 1)})
        print(json.dumps(nav_runs[-1]), flush=True)
    conn = connect(db, readonly=True)
    chunks, vectors = conn.execute("SELECT count(*), sum(has_vector) FROM chunks").fetchone()
    conn.close()
    result = {"label": args.label, "commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "chunks": chunks, "vectors": vectors, "notes": made.get("notes"), "first_write": first, "updates": runs,
              "median": {k: statistics.median(r[k] for r in runs) for k in ("layout_bytes", "wchar", "cpu_s", "wall_s")}}
    if nav_runs:
        result["nav_refresh"] = {"runs": nav_runs, "median": {k: statistics.median(r[k] for r in nav_runs)
                                                              for k in ("layout_bytes", "wchar", "cpu_s", "wall_s")}}
    print(json.dumps(result["median"]))
    out = json.loads(args.out.read_text()) if args.out.exists() else {}
    out[args.label] = result
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
