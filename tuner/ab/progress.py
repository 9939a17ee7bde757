"""Progress of an A/B on stderr: each index build's stages and each evaluation pass (tuner.progress: bars
on a terminal, plain lines otherwise)."""

from __future__ import annotations

from tuner.progress import StageProgress


class ABProgress(StageProgress):
    """One line or bar per index build stage ("build e5-small: embed") and per evaluation pass."""

    def index_callback(self, desc: str):
        return lambda stage, done, total: self(f"{desc}: {stage}", done, total)
