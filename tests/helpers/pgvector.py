"""The PostgreSQL + pgvector server the dense backend's tests search, and the two dense backends side by side.

The server is a real one: `bash .ci/postgres.sh start DIR` starts it and prints its DSN; tests read the DSN
from $AUTORESEARCH_TEST_PGVECTOR_DSN and skip, saying so, without it. `.ci/run` starts one and sets
$AUTORESEARCH_TEST_PGVECTOR_REQUIRED=1, which turns that skip into a failure: under CI the pgvector tests run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

DSN_ENV = "AUTORESEARCH_TEST_PGVECTOR_DSN"
REQUIRED_ENV = "AUTORESEARCH_TEST_PGVECTOR_REQUIRED"
BACKENDS = ("numpy", "pgvector")


def why_no_server() -> str | None:
    """Why the pgvector tests cannot run here, or None."""
    if not os.environ.get(DSN_ENV):
        return f"no PostgreSQL with pgvector: set {DSN_ENV} (`bash .ci/postgres.sh start DIR` prints one)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the [pgvector] extra is not installed: pip install -e '.[pgvector]'"
    return None


def dsn_or_skip() -> str:
    why = why_no_server()
    if why is not None:
        if os.environ.get(REQUIRED_ENV) == "1":
            pytest.fail(f"{REQUIRED_ENV}=1 (set by .ci/run) but {why}", pytrace=False)
        pytest.skip(why)
    return os.environ[DSN_ENV]


def copy_index(src: Path, dst: Path) -> Path:
    """A copy of an index and its layout file (SQLite's backup: a WAL not yet checkpointed comes along), for a
    test that writes beside it (a session index is shared)."""
    from search_core.index.layout import companion_files, layout_path
    from search_core.index.store import backup_copy
    backup_copy(src, dst)
    for p in companion_files(src):           # the small file and its rows files, named after the index
        shutil.copy(p, layout_path(dst).with_name(layout_path(dst).name + p.name[len(layout_path(src).name):]))
    return dst


class DenseBackend:
    """One of the dense channel's backends. `use(db)`: from now on `db` searches through it (numpy: as it is;
    pgvector: its vectors synced to a table of the test server, the settings file written beside it)."""

    def __init__(self, name: str, dsn: str | None = None):
        self.name, self.dsn, self.tables = name, dsn, []

    def use(self, db: Path, **settings) -> Path:
        if self.name == "pgvector":
            from search_core.index import pgvector as pv
            table = pv.default_table(db)
            pv.sync(db, pv.PgvectorSettings(dsn=self.dsn, table=table, **settings))
            self.tables.append(table)
        return db

    def copy_of(self, db: Path, tmp: Path, **settings) -> Path:
        """`db` itself for numpy; a copy under `tmp` that searches through pgvector for pgvector."""
        return db if self.name == "numpy" else self.use(copy_index(db, tmp / "pg-index" / db.name), **settings)

    def check_used(self, view) -> None:
        """The view searches through this backend (a pgvector test that fell back to numpy would prove nothing)."""
        assert (view.dense_backend is not None) == (self.name == "pgvector"), (self.name, view.dense_backend)

    def drop_tables(self) -> None:
        if not self.tables:
            return
        from search_core.index import pgvector as pv
        pg = pv.connect(self.dsn)
        try:
            for t in self.tables:
                pg.execute(pv._sql("DROP TABLE IF EXISTS {t}", t=t))
                pg.execute(f"DELETE FROM {pv.META_TABLE} WHERE name = %s", (t,))
        finally:
            pg.close()


# Two engines' float32 inner products of one pair of vectors may differ in the last bit (numpy's BLAS and
# pgvector sum the 384 products in other orders): on the demo vault under e5-small, 1 query in 40 has two notes
# 6e-8 apart in numpy that pgvector scores equal. Their order is the only thing allowed to differ.
FLOAT_TIE = 1e-6


def ranking_difference(got: list, want: list, tol: float = FLOAT_TIE) -> str | None:
    """The first difference between two ranked lists of (note id, chunk id, score), or None. Runs of scores
    within `tol` of the run's first count as ties (their order is read in note id, chunk id order); a run at the
    end of the lists, which the depth may cut inside, is left out; scores must agree within `tol`."""
    def runs(items):
        out, i = [], 0
        while i < len(items):
            j = i
            while j < len(items) and items[i][2] - items[j][2] <= tol:
                j += 1
            out.append(sorted(items[i:j], key=lambda x: (x[0], x[1])))
            i = j
        return out
    g, w = runs(got), runs(want)
    if len(g) > 1 and len(w) > 1 and len(g[-1]) + len(w[-1]) > 2:
        g, w = g[:-1], w[:-1]              # a tie at the cut: either side of it may be kept
    flat_g, flat_w = [x for r in g for x in r], [x for r in w for x in r]
    if len(flat_g) != len(flat_w):
        return f"{len(flat_g)} entries before the last tie != {len(flat_w)}"
    for i, (a, b) in enumerate(zip(flat_g, flat_w)):
        if a[:2] != b[:2] or abs(a[2] - b[2]) > tol:
            return f"at {i}: {a} != {b}"
    return None
