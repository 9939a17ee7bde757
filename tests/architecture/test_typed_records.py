"""No dict with string keys crosses a module boundary inside `tuner/`: records between modules are frozen
dataclasses, which become JSON only at the edges (their `to_json`, `to_ledger`, a ledger row's `columns`).

tests/helpers/string_keys.py finds the crossings a static check can see: public functions annotated to
return a loose dict, and `["key"]` reads on what a function of another module returned. STILL_DICTS lists
the ones not yet typed; it is empty and only shrinks: a new crossing fails, and so does an entry that is gone.
A mapping (a name to a value of one type) is annotated as one (`dict[str, float]`) and is not a crossing.
"""

import textwrap

from tests.helpers import ROOT
from tests.helpers.string_keys import string_key_crossings

STILL_DICTS: frozenset[str] = frozenset()


def test_no_new_dict_crosses_a_module_boundary_in_the_tuner():
    found = string_key_crossings(ROOT, "tuner")
    new = sorted(found - STILL_DICTS)
    assert not new, ("dicts with string keys crossing modules (return a frozen dataclass instead, with to_json "
                     "where it is written out):\n" + "\n".join(new))
    gone = sorted(STILL_DICTS - found)
    assert not gone, "typed now (or moved): delete from STILL_DICTS:\n" + "\n".join(gone)


def test_the_finder_sees_a_dict_return_and_a_read_by_key(tmp_path):
    """Guards the guard: a planted `-> dict` and a `["key"]` read on another module's return are found; a typed
    mapping, a private helper, a JSON edge and a read of the module's own function are not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(textwrap.dedent("""
        from typing import Any
        def loose() -> dict: ...
        def loose_any() -> dict[str, Any] | None: ...
        def typed() -> dict[str, int]: ...
        def _private() -> dict: ...
        class R:
            def to_json(self) -> dict: ...
    """))
    (pkg / "b.py").write_text(textwrap.dedent("""
        from pkg.a import loose
        def own() -> "dict[str, float]": ...
        def reads():
            x = loose()
            y = own()
            return x["k"], loose()["j"], [r["i"] for r in loose()], y["mine"]
    """))
    assert string_key_crossings(tmp_path, "pkg") == {
        "pkg.a:loose: returns a dict", "pkg.a:loose_any: returns a dict",
        "pkg.b:reads: reads ['k']", "pkg.b:reads: reads ['j']", "pkg.b:reads: reads ['i']"}
