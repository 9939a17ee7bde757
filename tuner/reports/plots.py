"""Plots as inline SVG, drawn with matplotlib's object API (`Figure`, never pyplot: a long-lived daemon
must not keep global figure state). Text stays text in the SVG (`svg.fonttype: none`), so Hangul labels
render with the reader's CJK font instead of being turned into DejaVu paths with missing glyphs."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import warnings
from typing import Sequence

RC = {"svg.fonttype": "none", "svg.hashsalt": "autoresearch",   # fixed ids: the same data, the same SVG
      "font.family": ["Noto Sans CJK KR", "Noto Sans CJK JP", "DejaVu Sans", "sans-serif"],
      "font.size": 9, "axes.spines.top": False, "axes.spines.right": False}

GREY, GREEN, RED, BLUE, AMBER = "#9aa3ad", "#1f8a3b", "#c0392b", "#2f5d9e", "#c98a00"


@contextlib.contextmanager
def _drawing():
    """matplotlib with RC, quiet about fonts: without a CJK font it measures Hangul with DejaVu Sans and says so
    once per glyph and per missing family (thousands of log lines for one report), though the SVG keeps its
    text as text and the reader's CJK font draws it (_font_family_text names it)."""
    import matplotlib

    fonts = logging.getLogger("matplotlib.font_manager")
    level = fonts.level
    fonts.setLevel(logging.ERROR)
    try:
        with matplotlib.rc_context(RC), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
            yield
    finally:
        fonts.setLevel(level)


def load() -> None:
    """Import what drawing a figure needs: 3.1 s of the morning report's 4.8 s at load 18 on 2 cores (cold),
    so a job that must stop within seconds (the daemon's report job) imports it as a step of its own."""
    import matplotlib.backends.backend_svg  # noqa: F401
    import matplotlib.figure  # noqa: F401


def new_figure(width: float = 7.5, height: float = 3.2):
    from matplotlib.figure import Figure

    with _drawing():
        fig = Figure(figsize=(width, height), layout="constrained")
        fig.add_subplot()
    return fig


def figure_svg(fig) -> str:
    """The figure as an <svg> element (no XML prolog, no DOCTYPE), ready to inline in HTML."""
    buf = io.StringIO()
    with _drawing():
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # the RDF metadata block only names namespaces, but a reader (or a test) looking for network
    # addresses in a self-contained report should find none besides the SVG namespace itself
    return re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)


def _font_family_text(svg: str) -> str:
    return re.sub(r"font-family:[^;\"]*", "font-family:'Noto Sans CJK KR','Noto Sans KR',sans-serif", svg)


def progress_plot(points: Sequence[tuple[int, float, str]], best: Sequence[tuple[int, float]],
                  labels: Sequence[tuple[int, float, str]] = (), *, ylabel: str = "score", title: str = "") -> str:
    """Every round a dot (kept green, rejected grey, crashed/unavailable red), the running best as a
    step line, each kept change labelled. points: (round, value, "kept"|"rejected"|"failed")."""
    fig = new_figure()
    ax = fig.axes[0]
    with _drawing():
        colour = {"kept": GREEN, "rejected": GREY, "failed": RED}
        for kind in ("rejected", "failed", "kept"):
            xs = [p[0] for p in points if p[2] == kind]
            ys = [p[1] for p in points if p[2] == kind]
            if xs:
                ax.scatter(xs, ys, s=14 if kind != "kept" else 26, c=colour[kind], label=kind, zorder=3 if kind == "kept" else 2)
        if best:
            ax.step([b[0] for b in best], [b[1] for b in best], where="post", color=GREEN, lw=1.4, label="running best")
        for x, y, text in labels:
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(3, 6), fontsize=7, color="#14692f")
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title, loc="left")
        ax.legend(loc="lower right", fontsize=7, frameon=False)
    return _font_family_text(figure_svg(fig))


def histograms(series: dict[str, Sequence[float]], *, xlabel: str, title: str = "", bins: int = 20,
               colours: dict[str, str] | None = None) -> str:
    """Overlaid histograms, e.g. top scores of answerable questions vs probes."""
    fig = new_figure(6.0, 2.8)
    ax = fig.axes[0]
    palette = colours or {}
    defaults = [BLUE, RED, AMBER, GREEN, GREY]
    with _drawing():
        allv = [v for vs in series.values() for v in vs]
        if allv:
            lo, hi = min(allv), max(allv)
            edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)] if hi > lo else bins
            for i, (name, vs) in enumerate(series.items()):
                if vs:
                    ax.hist(list(vs), bins=edges, alpha=0.55, label=f"{name} ({len(vs)})",
                            color=palette.get(name, defaults[i % len(defaults)]))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("questions")
        if title:
            ax.set_title(title, loc="left")
        ax.legend(fontsize=7, frameon=False)
    return _font_family_text(figure_svg(fig))


def labelled_scatter(points: Sequence[tuple[float, float, float, str]], *, xlabel: str, ylabel: str,
                     title: str = "", size_label: str = "") -> str:
    """One marker per item: (x, y, size, label); marker area scales with size (e.g. index MB)."""
    fig = new_figure(6.0, 3.2)
    ax = fig.axes[0]
    with _drawing():
        top = max((p[2] for p in points), default=1.0) or 1.0
        for i, (x, y, size, label) in enumerate(points):
            ax.scatter([x], [y], s=40 + 400 * (size / top), alpha=0.6, color=[BLUE, AMBER, GREEN, RED, GREY][i % 5])
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title + (f" (marker size: {size_label})" if size_label else ""), loc="left")
        ax.margins(0.2)
    return _font_family_text(figure_svg(fig))


def line_plot(series: dict[str, Sequence[tuple[float, float]]], *, xlabel: str, ylabel: str, title: str = "") -> str:
    """Lines through (x, y) points, one per series (e.g. risk-coverage curves)."""
    fig = new_figure(6.0, 3.0)
    ax = fig.axes[0]
    with _drawing():
        for i, (name, pts) in enumerate(series.items()):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name, color=[BLUE, RED, AMBER, GREEN][i % 4])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title, loc="left")
        ax.legend(fontsize=7, frameon=False)
    return _font_family_text(figure_svg(fig))
