"""The example reports in docs/examples/ are what the current code renders (`python docs/make_examples.py`)."""

from __future__ import annotations

import json
import re

import pytest

from tuner.reports.stamp import EXAMPLES_DIR, report_from_json, stamp_problems
from tuner.reports.ab import ab_report
from tuner.reports.render import to_html, to_markdown


def test_every_example_was_made_by_the_script_with_the_current_renderer():
    assert stamp_problems() == []


def _without_svg(html: str) -> str:
    # the drawings' coordinates depend on the fonts installed; everything else must match
    return re.sub(r"<svg.*?</svg>", "<svg/>", html, flags=re.S)


@pytest.mark.parametrize("path", sorted(p for p in EXAMPLES_DIR.glob("*.json") if p.name != "STAMP.json"),
                         ids=lambda p: p.stem)
def test_the_saved_report_renders_to_the_checked_in_text(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    md = path.with_suffix(".md").read_text(encoding="utf-8")
    assert to_markdown(report_from_json(doc)) == md
    if doc["kind"] == "ab":        # an A/B report is rebuilt from its data, plots included
        rebuilt = ab_report(doc["data"], generated=doc.get("generated", ""))
        assert to_markdown(rebuilt) == md
        assert _without_svg(to_html(rebuilt)) == _without_svg(path.with_suffix(".html").read_text(encoding="utf-8"))


def test_the_ab_quality_table_says_which_gate_decided_each_candidate():
    """minilm-l6 on AutoRAG-ko was decided by the cosine gate at its embedder's default, e5-small by the shipped
    model: the table once called both cut points "model default"."""
    doc = json.loads((EXAMPLES_DIR / "ab-autorag.json").read_text(encoding="utf-8"))
    md = to_markdown(ab_report(doc["data"], generated=doc.get("generated", "")))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md.splitlines() if line.startswith("| e5-small | 56")
            or line.startswith("| minilm-l6 | 56")}
    from search_core.gate.model import DEFAULT_GATE_FILE
    shipped = round(json.loads(DEFAULT_GATE_FILE.read_text(encoding="utf-8"))["threshold"], 4)
    assert f"| model: the shipped default | P ≥ {shipped} | the model's own |" in rows["e5-small"]
    assert "| cosine (no gate model fits this index) | cosine ≥ 0.45 | the embedder's default |" in rows["minilm-l6"]
