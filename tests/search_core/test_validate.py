"""search_core.validate and the files it guards: active.toml / --config [search], [recall]. Each bad value
is refused where it enters, naming the file, the key and what is allowed."""

import pytest

from search_core import SearchCoreError
from search_core.config import load_config
from search_core.recall.config import load_recall_config
from search_core.validate import BadValue, Where, clean_text


@pytest.mark.parametrize("body, key, allowed", [
    ("top_k = 0", "top_k", "from 1 to 100"),
    ('top_k = "5"', "top_k", "an integer"),
    ("depth = 0", "depth", "from 1 to"),
    ("w_sparse = nan", "w_sparse", "finite"),
    ('w_dense = "high"', "w_dense", "finite number"),
    ("rrf_k = -2", "rrf_k", "from 0"),
    ('nav_globs = "index"', "nav_globs", "list of strings"),
    ('exclude_nav = "no"', "exclude_nav", "true or false"),
    ("gate_threshold = 1.5", "gate_threshold", "from 0.0 to 1.0"),
    ("fast_path_margin = -0.1", "fast_path_margin", "from 0.0 to 1.0"),
    ("ngram_lead_margin = 1.5", "ngram_lead_margin", "from 0.0 to 1.0"),
    ("cross_lead_margin = 1.5", "cross_lead_margin", "from 0.0 to 1.0"),
    ("w_dense_cross = -0.1", "w_dense_cross", "0.0"),
    ("w_ngram_lead = -0.2", "w_ngram_lead", "0.0 or more"),
    # a misspelt model name was kept and ignored: search used the index's embedder without a word
    ('embedder = "nope"', "embedder", "known: e5-small"),
    ('reranker = "bge"', "reranker", "known: none"),
    ('keyword_index = "bm25"', "keyword_index", "'ngram', 'fts5'"),
    ("w_dense = 0\nw_sparse = 0\nw_decomposed = 0\nw_entity = 0", "every channel weight", "over 0"),
])
def test_a_bad_search_value_is_refused_naming_file_key_and_range(tmp_path, body, key, allowed):
    f = tmp_path / "active.toml"
    f.write_text(f"[search]\n{body}\n[active]\nsource = \"x\"\n", encoding="utf-8")
    with pytest.raises(BadValue) as e:
        load_config(f)
    assert str(f) in str(e.value) and key in str(e.value) and allowed in str(e.value)


def test_unknown_search_key_gets_a_did_you_mean(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[search]\ntopk = 3\n", encoding="utf-8")
    with pytest.raises(BadValue, match="did you mean 'top_k'"):
        load_config(f)


def test_good_values_still_load(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[search]\ntop_k = 7\nw_dense = 1\nnav_globs = ["index"]\nthreshold = 0.8\nkeyword_index = "ngram"\n',
                 encoding="utf-8")
    cfg = load_config(f)
    assert cfg.top_k == 7 and cfg.w_dense == 1.0 and cfg.nav_globs == ("index",) and cfg.keyword_index == "ngram"


@pytest.mark.parametrize("raw", [b"[search]\ntop_k = 5 # \xe9t\xe9\n", "\ufeff[search]\n".encode("utf-16")])
def test_a_config_that_is_not_utf8_is_a_clear_error(tmp_path, raw):
    f = tmp_path / "c.toml"
    f.write_bytes(raw)
    with pytest.raises(SearchCoreError, match="not UTF-8"):
        load_config(f)


@pytest.mark.parametrize("body, key", [
    ('min_chars = "8"', "min_chars"),
    ('small_talk = ["(unclosed"]', "small_talk"),
    ('small_talk = "hi"', "small_talk"),
    ("timeout_s = 0", "timeout_s"),
    ("timeout_s = nan", "timeout_s"),
    ('enabled = "yes"', "enabled"),
    ('query_log = "sha"', "query_log"),
    ("char_budget = -1", "char_budget"),
    ("min_char = 3", "did you mean 'min_chars'"),
])
def test_a_bad_recall_value_is_refused(tmp_path, body, key):
    f = tmp_path / "c.toml"
    f.write_text(f"[recall]\n{body}\n", encoding="utf-8")
    with pytest.raises(BadValue) as e:
        load_recall_config(f)
    assert str(f) in str(e.value) and key in str(e.value)


def test_where_refuses_the_values_a_hostile_file_or_body_sends():
    w = Where("body")
    for v in (1.9, True, "1", 10 ** 20, float("nan")):
        with pytest.raises(BadValue):
            w.integer("id", v, lo=1, hi=2 ** 63 - 1)
    for v in (float("inf"), float("nan"), "1", None, True):
        with pytest.raises(BadValue):
            w.number("x", v)
    assert w.integer("id", 3, lo=1) == 3 and w.number("x", 2) == 2.0


def test_clean_text_turns_lone_surrogates_into_replacement_characters():
    assert clean_text("emoji cut \ud83d here") == "emoji cut \ufffd here"
    assert clean_text("\udc80\udcff") == "\ufffd\ufffd"
    assert clean_text("fine 😀 text") == "fine 😀 text"
    clean_text("x\ud83d").encode("utf-8")        # what SQLite and JSON writers need


def test_a_config_file_holding_an_old_default_of_nav_globs_reads_as_todays_and_a_choice_is_kept(tmp_path):
    from search_core.config import NAV_GLOBS, SUPERSEDED_NAV_GLOBS
    f = tmp_path / "c.toml"
    for old in SUPERSEDED_NAV_GLOBS:             # a promoted config wrote the default out in full
        f.write_text(f"[search]\nnav_globs = {list(old)!r}\n".replace("'", '"'), encoding="utf-8")
        assert load_config(f).nav_globs == NAV_GLOBS
    f.write_text('[search]\nnav_globs = ["index", "*moc*"]\n', encoding="utf-8")
    assert load_config(f).nav_globs == ("index", "*moc*")
