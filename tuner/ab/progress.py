"""Progress of an A/B on stderr: a bar per index build stage and per evaluation pass."""

from __future__ import annotations

import sys


class ABProgress:
    """tqdm bars on stderr, one per index build and one per evaluation pass, each with its ETA."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.bars: dict = {}

    def index_callback(self, desc: str):
        def cb(stage, done, total):
            if not self.enabled:
                return
            from tqdm import tqdm
            bar = self.bars.get(stage)
            if bar is None:
                bar = self.bars[stage] = tqdm(total=total, desc=f"{desc}: {stage}", unit=" items",
                                              file=sys.stderr, dynamic_ncols=True)
            bar.total = total
            bar.n = done
            bar.refresh()
        return cb

    def iter(self, items, desc: str):
        if not self.enabled:
            return items
        from tqdm import tqdm
        return tqdm(items, desc=desc, unit=" q", file=sys.stderr, dynamic_ncols=True)

    def close(self):
        for b in self.bars.values():
            b.close()
        self.bars = {}
