from search_core.ingest.note import Link
from search_core.ingest.parse import extract_inline_tags, extract_links, parse_note, split_sections


def test_frontmatter_fields_in_every_form():
    n = parse_note("a/b", "---\ntitle: 제목\naliases: 하나, two words\ntag: rag search  embedding\n"
                          "description: 한 줄 요약\nparent: [[/java/thread]]\n---\n본문\n")
    assert n.title == "제목"
    assert n.aliases == ("하나", "two words")
    assert n.tags == ("rag", "search", "embedding")
    assert n.summary == "한 줄 요약"
    assert n.links[0] == Link(target="/java/thread", kind="parent")


def test_tags_as_list_and_comma_string():
    assert parse_note("x", "---\ntags: [a, '#b']\n---\nx").tags == ("a", "b")
    assert parse_note("x", "---\ntags: \"rag, search\"\n---\nx").tags == ("rag", "search")


def test_malformed_frontmatter_is_dropped_from_text_with_a_warning():
    n = parse_note("bad", "---\ntitle: [unclosed\nsecret: value: x\n---\n# 제목\n본문 내용\n")
    assert any("malformed YAML frontmatter" in w for w in n.warnings)
    assert "secret" not in n.body and "unclosed" not in n.body
    assert n.title == "제목"     # falls back to the first heading
    assert "본문 내용" in n.body


def test_frontmatter_that_is_not_a_mapping():
    n = parse_note("x", "---\n- just\n- a list\n---\nbody\n")
    assert n.warnings and "not a mapping" in n.warnings[0]
    assert "just" not in n.body


def test_every_link_form():
    text = ("[[a]] [[b|shown]] [[c#Heading]] [[/abs/path]] ![[embed]] [[/x/y]]{kram text} [[d#h|both]]\n"
            "```\n[[in-code]]\n```\n`[[inline-code]]`\n")
    links = extract_links(text)
    assert [(l.target, l.anchor, l.display, l.kind) for l in links] == [
        ("a", "", "", "link"), ("b", "", "shown", "link"), ("c", "Heading", "", "link"),
        ("/abs/path", "", "", "link"), ("embed", "", "", "embed"), ("/x/y", "", "kram text", "link"),
        ("d", "h", "both", "link")]


def test_inline_tags_skip_code_headings_anchors_and_urls():
    text = "본문 #rag 와 #검색/한국어 그리고 [[note#anchor]] http://x.com/#frag #123\n" \
           "## 헤딩 #not-a-tag\n```bash\n# comment\necho #nope\n```\n"
    assert extract_inline_tags(text) == ["rag", "검색/한국어"]


def test_sections_ignore_hash_lines_in_code_and_strip_kramdown():
    body = "* TOC\n{:toc}\n\n# 설치 {#install}\n내용\n```python\n# not a heading\nx = 1\n```\n## 하위\n더 {: .class}\n"
    secs = split_sections(body)
    assert [s.heading_path for s in secs] == [("설치",), ("설치", "하위")]
    assert "# not a heading" in secs[0].text
    assert "{:toc}" not in secs[0].text and "TOC" not in secs[0].text


def test_link_text_is_rendered_readable_in_sections():
    secs = split_sections("[[a|보이는 글]] 와 [[/p/q]]{표시} 그리고 [[plain]]\n")
    assert secs[0].text == "보이는 글 와 표시 그리고 plain"


def test_title_falls_back_to_file_name():
    assert parse_note("dir/my-note", "no heading here").title == "my-note"


def test_navigation_flag():
    assert parse_note("m", "---\ntype: moc\n---\n- [[a]]").is_nav
    assert not parse_note("m", "---\ntype: note\n---\nx").is_nav


def _unbounded_repeats(pattern: str) -> list:
    """Repeats with no upper bound in a regex's parse tree (each can scan the rest of the line)."""
    import re._parser as sre_parse
    from re._constants import MAX_REPEAT, MIN_REPEAT, MAXREPEAT, SUBPATTERN, BRANCH

    found = []

    def walk(items):
        for op, av in items:
            if op in (MAX_REPEAT, MIN_REPEAT):
                lo, hi, sub = av
                if hi == MAXREPEAT:
                    found.append(str(sub))
                walk(sub)
            elif op == SUBPATTERN:
                walk(av[-1])
            elif op == BRANCH:
                for alt in av[1]:
                    walk(alt)

    walk(sre_parse.parse(pattern))
    return found


def test_link_patterns_have_bounded_parts_so_a_line_of_brackets_stays_linear():
    # an unbounded part let each "[[" scan the rest of the line: 20,000 "[" took 10 s in LINK_RE alone
    from search_core.ingest.parse import LINK_RE, MD_LINK_RE
    assert _unbounded_repeats(LINK_RE.pattern) == []
    assert _unbounded_repeats(MD_LINK_RE.pattern) == []


def test_heading_pattern_has_no_backtracking_tail_and_titles_drop_only_a_closing_sequence():
    from search_core.ingest.parse import HEADING_RE, heading_title, split_sections
    # one unbounded part, then the end of the line: nothing after it to backtrack over ("# ####…# x" took 7.6 s)
    assert HEADING_RE.pattern.endswith("(.*)$")
    assert [heading_title(t) for t in ("C#", "Notes ##", "##", "a  #  ", "F# and C#")] == [
        "C#", "Notes", "", "a", "F# and C#"]
    sections = split_sections("## C#\n본문 하나\n## Notes ##\n본문 둘\n")
    assert [s.heading_path for s in sections] == [("C#",), ("Notes",)]


def test_an_inline_base64_image_leaves_its_payload_out_of_the_sections():
    payload = "iVBORw0KGgoAAAANSUhEUgAAAecAAACoCAIAAABVFrEOAAAAAXNSR0IArs4c6QAAvUxJREFUeF7tvQegLWdZ7j" * 40
    n = parse_note("pics", f"# 멀티파트\n\n업로드 화면 ![](data:image/png;base64,{payload}) 아래 설명.\n"
                           f"<img src=\"data:image/*;base64,{payload}\">\n\n끝 문단.")
    text = " ".join(s.text for s in n.sections)
    assert payload[:16] not in text
    assert "업로드 화면 ![](data:image/png;base64,) 아래 설명." in text and 'src="data:image/*;base64,"' in text
    assert "끝 문단." in text
    # a short token after "base64," is no image: left as written
    assert "base64,abc" in " ".join(s.text for s in parse_note("x", "인코딩 예: base64,abc").sections)
