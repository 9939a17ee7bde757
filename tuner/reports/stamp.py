"""The stamp that ties docs/examples/ to the code that made them (`python docs/make_examples.py` writes
it; tests/test_examples.py checks it), and a report read back from its saved JSON.

The stamp holds the commit, a hash of the renderer's source (the report layer and the report builders)
and a hash of every example file. The check fails when an example was edited by hand, when a file is
in the folder that the script did not make, and when the renderer changed after the examples were made.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from tuner.reports import Para, Plot, Report, Section, Table

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = ROOT / "docs" / "examples"
STAMP = EXAMPLES_DIR / "STAMP.json"
# the example sets the script makes, and the files of each
EXAMPLES = {
    name: [f"{kind}-{name}.{fmt}" for kind in ("morning-report", "audit", "ab") for fmt in ("md", "html", "json")]
    for name in ("demo", "autorag")
}
# what turns ledger rows and A/B results into the report text
RENDERER_SOURCES = ("tuner/reports/*.py", "tuner/sweep/rejected_audit.py")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def renderer_hash() -> str:
    h = hashlib.sha256()
    for pattern in RENDERER_SOURCES:
        for p in sorted(ROOT.glob(pattern)):
            h.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def write_stamp(made: list[str]) -> Path:
    """Record the examples now in the folder; `made`: the sets regenerated in this run."""
    old = json.loads(STAMP.read_text(encoding="utf-8")) if STAMP.exists() else {"sets": {}}
    sets = dict(old.get("sets", {}))
    for name in made:
        sets[name] = {"commit": _commit(), "renderer": renderer_hash(),
                      "files": {f: _sha(EXAMPLES_DIR / f) for f in EXAMPLES[name]}}
    STAMP.write_text(json.dumps({"sets": sets}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return STAMP


def stamp_problems() -> list[str]:
    """What no longer matches, each with the command that fixes it; empty when the examples are current."""
    fix = "run python docs/make_examples.py"
    if not STAMP.exists():
        return [f"{STAMP.relative_to(ROOT)} is missing: {fix}"]
    sets = json.loads(STAMP.read_text(encoding="utf-8"))["sets"]
    problems = []
    listed = {f for s in sets.values() for f in s["files"]}
    present = {p.name for p in EXAMPLES_DIR.iterdir() if p.name != STAMP.name}
    problems += [f"docs/examples/{f} was not made by the script: remove it or {fix}" for f in sorted(present - listed)]
    now = renderer_hash()
    for name, s in sorted(sets.items()):
        if s["renderer"] != now:
            problems.append(f"the {name} examples were rendered by older report code ({s['commit']}): "
                            f"{fix} --only {name}")
        for f, sha in sorted(s["files"].items()):
            p = EXAMPLES_DIR / f
            if not p.exists() or _sha(p) != sha:
                problems.append(f"docs/examples/{f} differs from what the script wrote: {fix} --only {name}")
    return problems


def report_from_json(doc: dict) -> Report:
    """A report saved with --format json, read back. Plots come back without their drawing (the JSON keeps
    title and words only), which is all the Markdown form shows."""
    def block(b):
        if b["type"] == "para":
            return Para(b["text"], b.get("tone", ""))
        if b["type"] == "table":
            return Table(tuple(b["columns"]), tuple(tuple(r) for r in b["rows"]), b.get("caption", ""))
        if b["type"] == "plot":
            return Plot(b["title"], "", b["alt"])
        raise ValueError(f"unknown block type {b['type']!r}")
    return Report(doc["kind"], doc["title"], doc["verdict"],
                  tuple(Section(s["heading"], tuple(block(b) for b in s["blocks"])) for s in doc["sections"]),
                  doc.get("data", {}), doc.get("generated", ""))
