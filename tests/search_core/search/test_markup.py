"""Snippets as text: what clean_markup keeps and drops, on the markup johngrib's wiki and Obsidian vaults use."""

from search_core.recall.block import RecallBlock, compose_notes, header_for, hit_lines
from search_core.search.markup import clean_markup
from search_core.search.pipeline import Hit

NOTE = """# GraphRAG {#graphrag}
* TOC
{:toc}
커뮤니티 요약은 [[ai/rag|RAG 노트]]와 [[/java/thread]]{자바 스레드}, [논문](https://arxiv.org/abs/2404.16130)에서 **온다**[^1].
<!-- 나중에 고칠 것 -->

[repo]: https://github.com/microsoft/graphrag
[^1]: Edge et al. 2024
"""


def test_markup_is_reduced_to_the_words_it_shows():
    text = clean_markup(NOTE)
    assert "GraphRAG" in text and "RAG 노트" in text and "자바 스레드" in text and "논문" in text and "온다" in text
    for noise in ("#", "[[", "]]", "](", "https://", "{:toc}", "{#", "**", "[^1]", "Edge et al", "<!--",
                  "나중에", "[repo]"):
        assert noise not in text, noise
    assert clean_markup(text) == text          # idempotent: the block cleans a cleaned snippet again


def test_a_collapsed_snippet_loses_its_link_definitions_too():
    one_line = " ".join(NOTE.split())
    text = clean_markup(one_line)
    assert "https://" not in text and "[repo]" not in text and "[^1]" not in text and "온다" in text


def test_one_line_is_the_cleaned_text_with_its_whitespace_collapsed():
    """clean_markup(one_line=True) skips the line-keeping whitespace patterns: the same words and spaces as
    collapsing the kept lines, on the note and on random mixes of its markup and every kind of whitespace."""
    import random
    import sys
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    pieces = [*NOTE.split(" "), "# 제목", "## x", "```py", "~~~", "**굵게**", "<b>x</b>", "[a][b]", "[^2]: y",
              "{:toc}", "[[a|b]]", "", "#", "a#b"]
    rng = random.Random(5)
    texts = [NOTE, " ".join(NOTE.split()), "", " \t\n ", "\u3000단어\u2028끝\x1c"]
    for _ in range(500):
        texts.append("".join(rng.choice(pieces) + "".join(rng.choices(spaces, k=rng.randint(0, 3)))
                             for _ in range(rng.randint(1, 12))))
    for text in texts:
        assert clean_markup(text, one_line=True) == " ".join(clean_markup(text).split()), repr(text)


def test_inline_headings_match_as_the_plain_pattern_says():
    """_HEADING_INLINE starts at its "#" for speed: the same substitutions as the pattern written plainly."""
    import random
    import re

    from search_core.search.markup import _HEADING_INLINE
    plain = re.compile(r"(?:(?<=\s)|^)#{1,6}\s+(?=\S)")
    rng = random.Random(2)
    alphabet = ["#", "##", "###### ", "#######", " ", "\n", "\t", "\u3000", "a", "가", ".", "x#"]
    texts = [NOTE, " ".join(NOTE.split())] + ["".join(rng.choices(alphabet, k=rng.randint(0, 20))) for _ in range(20000)]
    for text in texts:
        assert _HEADING_INLINE.sub("", text) == plain.sub("", text), repr(text)


def test_block_lines_name_the_file_and_a_narrow_pass_is_marked():
    hit = Hit("ai/graphrag", "GraphRAG", 1.0, "[[ai/rag|RAG]] 요약 [x]: https://x.org", {}, 1, 0.9, 0.1,
              "ai/graphrag.md", "/vault/ai/graphrag.md")
    (line,) = hit_lines([hit])
    assert line == "- GraphRAG (ai/graphrag.md): RAG 요약"
    plain, _ = compose_notes([line], 1200, header=header_for({"band": "inject"}))
    narrow, _ = compose_notes([line], 1200, header=header_for({"band": "caveat"}))
    assert "low confidence" not in plain and narrow.startswith("Possibly related") and "low confidence" in narrow
    assert RecallBlock(narrow, True, {"band": "caveat"}, None).as_dict()["caveat"] is True
    assert RecallBlock(plain, True, {"band": "inject"}, None).as_dict()["caveat"] is False


def test_a_snippet_starts_before_the_first_query_word_it_holds():
    """snippet_start looks for each word only up to the first place found so far and stops in the lead: the start
    the plain rule gives (SNIPPET_LEAD before the smallest place of any word, else 0), on random texts and words."""
    import random

    from search_core.search.pipeline import SNIPPET_LEAD, snippet_start
    rng = random.Random(4)
    alphabet = "ab가나 "
    for _ in range(20000):
        low = "".join(rng.choices(alphabet, k=rng.randint(0, 120)))
        words = ["".join(rng.choices(alphabet[:4], k=rng.randint(1, 4))) for _ in range(rng.randint(0, 6))]
        places = [p for p in (low.find(w) for w in words) if p >= 0]
        assert snippet_start(low, words) == (max(min(places) - SNIPPET_LEAD, 0) if places else 0), (low, words)


def test_a_text_is_cleaned_alike_with_or_without_the_markup_character_scan(monkeypatch):
    """The scan for markup characters only skips texts no check would match: every kind of markup alone in a line
    of words is cleaned as with every check run (a scan that matches anywhere)."""
    import re

    from search_core.search import markup
    pieces = ["<!-- note -->", "[repo]: https://x.org", "[^1]: foot", "see[^1]", "[[ai/rag|RAG]]", "[[/java]]{자바}",
              "![img](a.png)", "[link](https://x.org)", "[ref][1]", "{:toc}", "{#id}", "```py", "~~~", "# 제목",
              "text ## heading", "**bold**", "__under__", "~~gone~~", "<b>tag</b>", "a_b", "x*y", "2 < 3", "a]b", "c[d"]
    texts = [f"앞 {p} 뒤" for p in pieces] + [f"{p}\n다음 줄 {q}" for p in pieces for q in pieces]
    plain = [clean_markup(t, one_line=one) for t in texts for one in (False, True)]
    monkeypatch.setattr(markup, "_MARKUP_CHARS", re.compile(""))
    assert [clean_markup(t, one_line=one) for t in texts for one in (False, True)] == plain
