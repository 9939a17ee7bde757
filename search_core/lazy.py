"""Package re-exports resolved on first use (PEP 562), so `import search_core.<pkg>` stays cheap.

A package's `__init__` names its main classes and functions and the module each lives in; the module is
imported only when a name is read. That keeps the heavy optional libraries (optuna, scikit-learn,
matplotlib, starlette, mcp) out of `import search_core` and out of the index and search verbs.
"""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]):
    """exports: submodule -> names it defines. Returns (__getattr__, __dir__, __all__) for the package."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str):
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__():
        return sorted(where)

    return __getattr__, __dir__, sorted(where)
