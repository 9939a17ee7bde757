"""The one percentile definition: linear interpolation between closest ranks (numpy's default method).

Every p50/p95 the project reports (evaluation latency, the A/B, the recall log's retirement rule,
calibration windows) comes from here, so two reports of the same timings agree.
"""

from __future__ import annotations

import numpy as np


def percentile(values, q: float) -> float:
    """The q-th percentile (q in 0..100) of `values`; nan when there are none."""
    v = np.asarray(list(values), dtype=float)
    return float(np.percentile(v, q)) if v.size else float("nan")


def percentile_or_none(values, q: float) -> float | None:
    """As percentile, but None when there are no values (for JSON: null, not NaN)."""
    v = list(values)
    return percentile(v, q) if v else None
