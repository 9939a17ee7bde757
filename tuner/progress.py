"""Progress of long steps on stderr, whether or not it is a terminal: tqdm bars on a terminal, plain lines
otherwise (a log file, `autoresearch demo | tee`, a CI job), so a run of minutes is never silent.

One object serves the index build's callback (`progress(stage, done, total)`, stage by stage) and loops
over questions (`iter(items, desc)`). Lines: one when a stage starts, then at most one per LINE_EVERY_S,
and one when it is done.
"""

from __future__ import annotations

import sys
import time

LINE_EVERY_S = 5.0     # "a step over a few seconds" says something at least this often


class StageProgress:
    def __init__(self, enabled: bool = True, stream=None, *, tty: bool | None = None, prefix: str = ""):
        self.enabled = enabled
        self.stream = stream
        self.tty = tty
        self.prefix = prefix
        self.bars: dict = {}
        self.lines: dict = {}           # stage -> (last line's time, last done), in line mode

    @property
    def _stream(self):
        return self.stream if self.stream is not None else sys.stderr   # read late: click's runner swaps it

    @property
    def _bars(self) -> bool:
        if self.tty is not None:
            return self.tty
        isatty = getattr(self._stream, "isatty", None)
        return bool(isatty and isatty())

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        name = f"{self.prefix}{stage}"
        if self._bars:
            self._bar(name, done, total)
        else:
            self._line(name, done, total)

    def _bar(self, name: str, done: int, total: int) -> None:
        from tqdm import tqdm
        bar = self.bars.get(name)
        if bar is None:
            bar = self.bars[name] = tqdm(total=total, desc=f"{name:<8}", unit=" items", file=self._stream,
                                         leave=True, dynamic_ncols=True)
        bar.total = max(total, done)
        bar.n = done
        bar.refresh()

    def _line(self, name: str, done: int, total: int) -> None:
        if total <= 0:
            return                                  # nothing to do in this stage (all from the cache)
        now = time.monotonic()
        last = self.lines.get(name)
        finished = done >= total
        if last is not None and last[1] >= total:
            return                                  # said already that it is done
        if last is None or finished or now - last[0] >= LINE_EVERY_S:
            self.lines[name] = (now, done)
            pct = 100 * done // total
            print(f"{name}: {done}/{total} ({pct}%)" + (" done" if finished else ""), file=self._stream, flush=True)

    def iter(self, items, desc: str):
        """Yield items, reporting progress as `desc: i/n`."""
        if not self.enabled:
            yield from items
            return
        items = list(items)
        self(desc, 0, len(items))
        for i, x in enumerate(items, 1):
            yield x
            self(desc, i, len(items))

    def close(self) -> None:
        for b in self.bars.values():
            b.close()
        self.bars = {}
        self.lines = {}
