"""Terms a vault pairs across scripts, mined from its text and added to a query (hand-computed expectations)."""

from search_core.ingest.term_pairs import expand_query, mine_pairs, pair_counts


def test_a_pair_is_read_both_ways_with_as_many_korean_words_as_the_latin_side_has():
    text = ("네트워크의 지연 시간(latency)은 응답 시간과 다르다. Throughput(처리율)도 본다. "
            "이러한 제어의 역전(Inversion of Control)이 핵심이다. C(일관성)와 p(선택)는 짧아서 뺀다.")
    assert pair_counts(text) == {("latency", "지연 시간"): 1, ("throughput", "처리율"): 1,
                                 ("inversion of control", "제어의 역전"): 1}


def test_pairs_are_counted_over_texts_most_often_first_and_filtered_by_count():
    texts = ["지연 시간(latency)", "지연시간(latency)", "지연 시간(latency)", "대역폭(bandwidth)"]
    assert mine_pairs(texts) == {"latency": ("지연 시간", "지연시간"), "bandwidth": ("대역폭",)}
    assert mine_pairs(texts, min_count=2) == {"latency": ("지연 시간",)}


def test_a_query_gets_the_paired_terms_longest_phrase_first_and_at_most_max_terms():
    pairs = {"inversion of control": ("제어의 역전",), "control": ("제어",), "latency": ("지연 시간", "지연시간"),
             "bandwidth": ("대역폭",)}
    assert expand_query("What is Inversion of Control?", pairs) == "What is Inversion of Control? 제어의 역전"
    assert expand_query("latency vs bandwidth", pairs) == "latency vs bandwidth 지연 시간 대역폭"
    assert expand_query("latency vs bandwidth", pairs, max_terms=1) == "latency vs bandwidth 지연 시간"
    assert expand_query("latency and 지연 시간", pairs) == "latency and 지연 시간"     # already there
    assert expand_query("캐시 무효화", pairs) == "캐시 무효화"
