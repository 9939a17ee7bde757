"""One layer renders every report (sweep, audit, A/B, calibration) as Markdown, self-contained HTML and JSON.

A report is built once as a `Report` of plain blocks (paragraphs, tables, plots); `render(report, fmt)`
turns it into text. Reports read the ledger and evaluations; they never search.
"""

from .doc import Para, Plot, Report, Section, Table
from .render import FORMATS, emit, render

__all__ = ["FORMATS", "Para", "Plot", "Report", "Section", "Table", "emit", "render"]
