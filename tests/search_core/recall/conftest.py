import pytest

from tests.helpers import SMALL_VAULT, write_vault


@pytest.fixture(scope="module")
def index_db(tmp_path_factory, shared_cache):
    """The small vault indexed with the default embedder, once per test module."""
    from search_core.index.indexer import index_vault
    root = tmp_path_factory.mktemp("recall")
    db = root / "index.sqlite"
    index_vault(write_vault(root / "vault", SMALL_VAULT), db, cache=shared_cache)
    return db
