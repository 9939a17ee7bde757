"""Report -> Markdown | HTML | JSON, and writing it to stdout or a file without leaving half a file."""

from __future__ import annotations

import html
import json
import math
import sys
from pathlib import Path

from search_core import SearchCoreError
from search_core.files import atomic_write_text

from tuner.reports.doc import Para, Plot, Report, Table


def _cell(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


# -- Markdown -------------------------------------------------------------------------------------------
def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_block(b) -> str:
    if isinstance(b, Para):
        return f"**{b.text}**" if b.tone in ("good", "bad") else b.text
    if isinstance(b, Table):
        head = "| " + " | ".join(_md_escape(c) for c in b.columns) + " |"
        sep = "|" + "|".join("---" for _ in b.columns) + "|"
        rows = ["| " + " | ".join(_md_escape(_cell(v)) for v in r) + " |" for r in b.rows]
        cap = [f"*{b.caption}*", ""] if b.caption else []
        return "\n".join(cap + [head, sep] + rows)
    if isinstance(b, Plot):
        # Markdown viewers do not render inline SVG reliably: the words carry the plot here,
        # the HTML report carries the drawing.
        return f"*Plot: {b.title}* (drawn in the HTML report). {b.alt}"
    raise TypeError(f"unknown report block {type(b).__name__}")


def to_markdown(r: Report) -> str:
    out = [f"# {r.title}", "", f"**{r.verdict}**", ""]
    if r.generated:
        out += [f"_generated {r.generated}_", ""]
    for s in r.sections:
        out += [f"## {s.heading}", ""]
        for b in s.blocks:
            out += [_md_block(b), ""]
    return "\n".join(out).rstrip() + "\n"


# -- HTML -----------------------------------------------------------------------------------------------
# Self-contained: no script, no stylesheet, font or image from anywhere. Hangul renders through the
# system's CJK font (Noto Sans CJK on Debian: fonts-noto-cjk); SVG text stays text (svg.fonttype none).
CSS = """
body{font-family:"Noto Sans CJK KR","Noto Sans KR","Apple SD Gothic Neo","Malgun Gothic",system-ui,sans-serif;
max-width:1100px;margin:2em auto;padding:0 1em;color:#1d2430;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #d5dae1}
.verdict{font-size:1.1em;padding:.6em .8em;background:#f2f5f9;border-left:4px solid #5b6b82}
.good{color:#14692f} .bad{color:#a3231f} .note{color:#6a5400} .gen{color:#6b7480;font-size:.85em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em} caption{text-align:left;color:#4a5563;padding:.2em 0}
th,td{border:1px solid #d5dae1;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#eef1f5} td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0} figcaption{color:#4a5563;font-size:.9em} svg{max-width:100%;height:auto}
"""


def _html_block(b) -> str:
    if isinstance(b, Para):
        cls = f' class="{b.tone}"' if b.tone else ""
        return f"<p{cls}>{html.escape(b.text)}</p>"
    if isinstance(b, Table):
        cap = f"<caption>{html.escape(b.caption)}</caption>" if b.caption else ""
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in b.columns)
        rows = []
        for r in b.rows:
            tds = "".join(
                f'<td class="num">{html.escape(_cell(v))}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool)
                else f"<td>{html.escape(_cell(v))}</td>" for v in r)
            rows.append(f"<tr>{tds}</tr>")
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    if isinstance(b, Plot):
        return (f'<figure class="plot" data-title="{html.escape(b.title)}">{b.svg}'
                f"<figcaption>{html.escape(b.title)}: {html.escape(b.alt)}</figcaption></figure>")
    raise TypeError(f"unknown report block {type(b).__name__}")


def to_html(r: Report) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="ko"><head><meta charset="utf-8">',
             f"<title>{html.escape(r.title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{html.escape(r.title)}</h1>", f'<p class="verdict">{html.escape(r.verdict)}</p>']
    if r.generated:
        parts.append(f'<p class="gen">generated {html.escape(r.generated)}</p>')
    for s in r.sections:
        parts.append(f"<section><h2>{html.escape(s.heading)}</h2>")
        parts += [_html_block(b) for b in s.blocks]
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# -- JSON -----------------------------------------------------------------------------------------------
def _json_block(b) -> dict:
    if isinstance(b, Para):
        return {"type": "para", "text": b.text, **({"tone": b.tone} if b.tone else {})}
    if isinstance(b, Table):
        return {"type": "table", "caption": b.caption, "columns": list(b.columns), "rows": [list(r) for r in b.rows]}
    if isinstance(b, Plot):
        return {"type": "plot", "title": b.title, "alt": b.alt}   # the drawing is in the HTML report
    raise TypeError(f"unknown report block {type(b).__name__}")


def to_json(r: Report) -> str:
    doc = {"kind": r.kind, "title": r.title, "verdict": r.verdict, "generated": r.generated, "data": r.data,
           "sections": [{"heading": s.heading, "blocks": [_json_block(b) for b in s.blocks]} for s in r.sections]}
    return json.dumps(doc, ensure_ascii=False, indent=1, default=str) + "\n"


FORMATS = {"md": to_markdown, "html": to_html, "json": to_json}


def render(report: Report, fmt: str) -> str:
    try:
        fn = FORMATS[fmt]
    except KeyError:
        raise SearchCoreError(f"unknown report format {fmt!r}; formats: {', '.join(FORMATS)}") from None
    return fn(report)


def emit(report: Report, fmt: str, out: str | Path | None = None) -> str | None:
    """Print the report to stdout, or write it to `out` atomically (temp file + rename: a reader never
    sees half a report) and return the path."""
    text = render(report, fmt)
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    return save(text, out)


def save(text: str, out: str | Path) -> str:
    """Write a rendered report to `out` atomically and return the path (emit's write, for a caller that
    renders several reports before it writes any)."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, text)
    except OSError as e:
        raise SearchCoreError(f"cannot write the report to {out}: {e.strerror}; choose another --out") from None
    return str(out)
