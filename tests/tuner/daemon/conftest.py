import shutil

import pytest


@pytest.fixture
def db_copy(demo_db, tmp_path):
    """The demo index for a daemon test to own (its night writes beside it)."""
    dst = tmp_path / "index.sqlite"
    shutil.copy(demo_db, dst)
    return dst
