"""The report layer: one Report renders to Markdown, HTML and JSON; HTML is self-contained and draws
its plots in a real browser (headless Chromium), fetching nothing."""

import json

import pytest

from search_core import SearchCoreError
from tuner.reports import Para, Plot, Report, Section, Table, emit, render
from tuner.reports.browser import check_page
from tuner.reports.plots import histograms, progress_plot


def _report():
    svg = progress_plot([(1, 0.5, "rejected"), (2, 0.6, "kept"), (3, 0.4, "failed")],
                        [(0, 0.5), (2, 0.6), (3, 0.6)], [(2, 0.6, "w_sparse 0.4→0.95")], ylabel="점수")
    hist = histograms({"answerable": [0.8, 0.85, 0.9], "probes": [0.82, 0.84]}, xlabel="top cosine")
    return Report("sweep", "스윕 보고서 | test", "hit@5 0.900 -> 1.000",
                  (Section("진행", (Para("커뮤니티 요약 <b>raw</b>", "good"),
                                    Table(("변수", "값"), (("w_sparse", 0.95), ("rrf_k", None), ("a|b", 3)), "표"),
                                    Plot("progress", svg, "1 kept of 3"), Plot("scores", hist, "probes overlap"))),),
                  data={"rounds": 3})


def test_markdown_tables_escape_pipes_and_describe_plots():
    md = render(_report(), "md")
    assert md.startswith("# 스윕 보고서 | test\n\n**hit@5 0.900 -> 1.000**")
    assert "| w_sparse | 0.95 |" in md and "| rrf_k | – |" in md and "| a\\|b | 3 |" in md
    assert "*Plot: progress* (drawn in the HTML report). 1 kept of 3" in md
    assert "<svg" not in md


def test_json_carries_data_and_blocks_but_not_the_drawings():
    doc = json.loads(render(_report(), "json"))
    assert doc["kind"] == "sweep" and doc["data"] == {"rounds": 3}
    blocks = doc["sections"][0]["blocks"]
    assert [b["type"] for b in blocks] == ["para", "table", "plot", "plot"]
    assert blocks[1]["rows"][1] == ["rrf_k", None]
    assert "svg" not in json.dumps(doc)


def test_html_escapes_text_and_inlines_svg():
    page = render(_report(), "html")
    assert "&lt;b&gt;raw&lt;/b&gt;" in page and "<b>raw</b>" not in page
    assert page.count("<svg") == 2
    assert "<script" not in page and "<link" not in page


def test_unknown_format_lists_the_valid_ones():
    with pytest.raises(SearchCoreError, match="formats: md, html, json"):
        render(_report(), "pdf")


def test_emit_to_file_is_atomic_and_returns_the_path(tmp_path, capsys):
    out = tmp_path / "deep" / "r.md"
    assert emit(_report(), "md", out) == str(out)
    assert out.read_text(encoding="utf-8").startswith("# 스윕")
    assert [p.name for p in out.parent.iterdir()] == ["r.md"]       # no temp file left beside it
    emit(_report(), "md")
    assert capsys.readouterr().out.startswith("# 스윕")


def test_html_report_renders_every_plot_in_chromium_and_fetches_nothing(tmp_path):
    page = tmp_path / "r.html"
    emit(_report(), "html", page)
    check = check_page(page, tmp_path / "r.png", height=1400)
    assert check.svg_count == 2 and check.rendered_svgs == 2
    assert check.requests == ()
    # the check itself can fail: a page that pulls a stylesheet from the network is caught
    bad = tmp_path / "bad.html"
    bad.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", '<link rel="stylesheet" href="http://cdn.invalid/x.css"></body>'), encoding="utf-8")
    assert any("cdn.invalid" in r for r in check_page(bad, tmp_path / "bad.png", height=600).requests)


def test_a_machine_without_the_cjk_font_draws_hangul_quietly(monkeypatch, caplog, recwarn):
    # the fonts the plots ask for are missing: matplotlib falls back to DejaVu Sans and would log and warn once
    # per glyph and family; the SVG keeps the text as text, so the reader's font draws it
    import logging

    import tuner.reports.plots as plots
    monkeypatch.setitem(plots.RC, "font.family", ["No Such CJK Font", "DejaVu Sans"])
    caplog.set_level(logging.INFO, logger="matplotlib.font_manager")
    svg = progress_plot([(1, 0.5, "kept"), (2, 0.4, "rejected")], [(1, 0.5)], [(1, 0.5, "검색 가중치")],
                        ylabel="점수", title="밤새 실험")
    assert "점수" in svg and "밤새 실험" in svg
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")]
    assert not [w for w in recwarn if "missing from font" in str(w.message)]
