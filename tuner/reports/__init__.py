"""One layer renders every report (sweep, audit, A/B, calibration) as Markdown, self-contained HTML and JSON.

A report is built once as a `Report` of plain blocks (paragraphs, tables, plots); `render(report, fmt)`
turns it into text. Reports read the ledger and evaluations; they never search.
"""

from tuner.reports.doc import Para, Plot, Report, Section, Table
from tuner.reports.render import FORMATS, emit, render

__all__ = ["FORMATS", "Para", "Plot", "Report", "Section", "Table", "emit", "render"]
