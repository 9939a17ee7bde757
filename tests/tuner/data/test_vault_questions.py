"""`gold make`: questions cut from what a vault's author wrote about each note, checked against the set computed
by hand for a small vault (tests/helpers/vault_questions.py)."""

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from tests.helpers import write_vault
from tests.helpers.vault_questions import QUESTION_VAULT
from tuner.data import vault_questions as vqm
from tuner.data.gold import load_gold
from tuner.data.vault_questions import KINDS, make_vault_questions, write_vault_questions

# (kind, level, query, gold, exclude), computed by reading QUESTION_VAULT
BY_HAND = {
    # [[graphrag|그래프 RAG]] in ai/rrf; ai/rrf-draft holds the same sentence word for word: held out too
    ("anchor", "L1", "그래프 RAG 파이프라인에서도 마지막 단계로 쓴다.", ("ai/graphrag",), ("ai/rrf", "ai/rrf-draft")),
    # [[/ai/rrf]]{역순위 융합} in ai/graphrag
    ("anchor", "L1", "순위를 합칠 때는 역순위 융합 방식을 쓴다.", ("ai/rrf",), ("ai/graphrag",)),
    # [[life/kimchi]] in an English sentence of ai/rrf, about a Korean note: cross-lingual
    ("anchor", "XL", "Fusion tricks also apply when you cook kimchi for a team dinner.", ("life/kimchi",), ("ai/rrf",)),
    # [점수 합치는 공식](../ai/rrf.md) in life/kimchi: a markdown link, under a heading three notes share
    ("anchor", "L1", "점수 합치는 공식을 찌개 간 맞추기에 비유한 적이 있다.", ("ai/rrf",), ("life/kimchi",)),
    # [[kimchi]] (a bare file name) in the daily note, read as its name
    ("anchor", "L1", "오늘 kimchi 끓이는 법을 다시 정리했다, 묵은지가 핵심이다.", ("life/kimchi",), ("daily/2026-03-01",)),
    ("heading", "L0", "GraphRAG 커뮤니티 탐지", ("ai/graphrag",), ()),
    ("heading", "L0", "김치찌개 레시피 재료", ("life/kimchi",), ()),
    ("alias", "L0", "그래프 RAG", ("ai/graphrag",), ()),
    ("alias", "XL", "graph retrieval", ("ai/graphrag",), ()),
}
# left out, each for its reason: "## 참고" (three notes have it), the daily note's list of links and its
# "다음 문서: [[ai/rrf]]", the link inside a code block, the index note's sentence (an index note), and the
# daily note's "[[ai/graphrag]]는 엔티티와 관계를 추출해 커뮤니티 요약을 만든다." (ai/graphrag says it itself)
ECHO = "graphrag는 엔티티와 관계를 추출해 커뮤니티 요약을 만든다."


@pytest.fixture
def qvault(tmp_path):
    return write_vault(tmp_path / "vault", QUESTION_VAULT)


def _rows(vq):
    return {(q.kind, q.level, q.query, q.gold, q.exclude) for q in vq.questions}


def test_the_questions_are_the_ones_computed_by_hand(qvault):
    vq = make_vault_questions(qvault, n=None)
    assert _rows(vq) == BY_HAND
    assert vq.dropped["a line of links only"] == 3
    assert vq.dropped["a heading many notes share (it only echoes the title)"] == 3
    whys = {q.query: q.why for q in vq.questions}
    assert whys["순위를 합칠 때는 역순위 융합 방식을 쓴다."] == "anchor text in note ai/graphrag, line 12"
    assert whys["그래프 RAG"] == "alias '그래프 RAG' of note ai/graphrag"


def test_the_echo_filter_drops_a_sentence_the_gold_note_holds(qvault, monkeypatch):
    vq = make_vault_questions(qvault, n=None)
    assert vq.dropped["an anchor sentence its own note holds (an echo)"] == 1
    assert not any("엔티티와 관계를" in q.query for q in vq.questions)
    monkeypatch.setattr(vqm, "ECHO_SHARE", 1.01)          # the filter off: the echo comes back
    back = [q for q in make_vault_questions(qvault, n=None).questions if "엔티티와 관계를" in q.query]
    assert [(q.query, q.gold, q.exclude) for q in back] == [(ECHO, ("ai/graphrag",), ("daily/2026-03-01",))]


def test_nav_notes_and_link_lines_give_no_question(qvault):
    qs = make_vault_questions(qvault, n=None, kinds=KINDS).questions
    assert not any("index" in q.why or "여기서 시작한다" in q.query for q in qs)
    assert not any("다음 문서" in q.query or "코드 안의" in q.query for q in qs)
    assert all("index" not in q.gold for q in qs)


def test_other_kinds_on_request(qvault):
    rows = _rows(make_vault_questions(qvault, n=None, kinds=("summary", "title")))
    assert ("summary", "L1", "지식 그래프로 커뮤니티 요약을 만드는 검색 증강 생성", ("ai/graphrag",), ()) in rows
    assert ("title", "L0", "GraphRAG", ("ai/graphrag",), ()) in rows      # a title names its note: never XL
    with pytest.raises(SearchCoreError, match="unknown question kind"):
        make_vault_questions(qvault, kinds=("anchors",))


def test_n_spreads_over_notes_and_a_seed_repeats(qvault):
    a = make_vault_questions(qvault, n=3, seed=1)
    assert len(a.questions) == 3 and len({q.gold for q in a.questions}) == 3
    assert a.questions == make_vault_questions(qvault, n=3, seed=1).questions
    assert {q.query for q in a.questions} <= {row[2] for row in BY_HAND}


def test_an_anchor_share_takes_anchors_first_and_the_other_kinds_fill_the_rest(qvault):
    kinds = lambda vq: sorted(q.kind for q in vq.questions)     # noqa: E731
    assert kinds(make_vault_questions(qvault, n=4, seed=0, anchor_share=1.0)) == ["anchor"] * 4
    assert kinds(make_vault_questions(qvault, n=4, seed=0, anchor_share=0.5)).count("anchor") == 2
    # 5 anchors in the vault: asked for 9 at share 1.0, the 4 others fill what anchors lack
    assert _rows(make_vault_questions(qvault, n=9, seed=0, anchor_share=1.0)) == BY_HAND
    with pytest.raises(SearchCoreError, match="from 0 to 1"):
        make_vault_questions(qvault, n=9, anchor_share=75)


def test_mask_link_leaves_the_link_that_names_the_note_out_of_its_anchor_question(qvault):
    anchors = {q.query: (q.gold, q.exclude) for q in make_vault_questions(qvault, n=None, mask_link=True).questions
               if q.kind == "anchor"}
    assert anchors == {
        "Fusion tricks also apply when you cook for a team dinner.": (("life/kimchi",), ("ai/rrf",)),
        "순위를 합칠 때는 방식을 쓴다.": (("ai/rrf",), ("ai/graphrag",)),
        "을 찌개 간 맞추기에 비유한 적이 있다.": (("ai/rrf",), ("life/kimchi",)),
        "오늘 끓이는 법을 다시 정리했다, 묵은지가 핵심이다.": (("life/kimchi",), ("daily/2026-03-01",)),
        "파이프라인에서도 마지막 단계로 쓴다.": (("ai/graphrag",), ("ai/rrf", "ai/rrf-draft")),
    }


def test_the_written_file_loads_as_gold_with_its_exclusions(qvault, tmp_path):
    out = tmp_path / "made.yaml"
    vq = write_vault_questions(qvault, out, n=None)
    g = load_gold(out)
    assert len(g.questions) == len(vq.questions) == len(BY_HAND)
    assert {q.source for q in g.questions} == {"vault"}      # the keep rule's guard reads hand-written ones apart
    by_query = {q.query: q for q in g.questions}
    assert by_query["그래프 RAG 파이프라인에서도 마지막 단계로 쓴다."].exclude == ("ai/rrf", "ai/rrf-draft")
    assert by_query["그래프 RAG"].exclude == ()
    assert "probes make" in out.read_text(encoding="utf-8")


def test_cli_writes_the_set_and_says_how_to_make_probes(qvault, tmp_path):
    from tuner.cli import main
    out = tmp_path / "made.yaml"
    r = CliRunner().invoke(main, ["gold", "make", str(qvault), "--out", str(out), "-n", "4", "--seed", "2"])
    assert r.exit_code == 0, r.output
    assert "wrote 4 questions" in r.output and "autoresearch probes make" in r.output
    assert len(load_gold(out).questions) == 4
    bad = CliRunner().invoke(main, ["gold", "make", str(tmp_path / "nowhere"), "--out", str(out)])
    assert bad.exit_code == 2 and "does not exist" in bad.output


def test_probes_come_through_probes_make(qvault, tmp_path, shared_cache):
    vq = write_vault_questions(qvault, tmp_path / "made.yaml", n=None)
    m = vqm.make_probes_for(vq, tmp_path / "made.yaml", 5, seed=0, cache=shared_cache)   # half the notes
    g = load_gold(m.gold)
    held, gold_of = set(m.held_out), {q.id: q.gold[0] for q in vq.questions}
    assert m.made_probes >= 1
    for q in g.questions:
        assert (q.level == "probe") == (gold_of[q.id] in held)
        assert not set(q.exclude) & held          # a held-out note is not in the index to hold out


def test_an_index_file_stands_for_the_vault_it_was_built_from(qvault, tmp_path, shared_cache):
    from search_core.index.indexer import index_vault
    from tests.helpers.fake_embedder import NAME
    index_vault(qvault, tmp_path / "index.sqlite", embedder=NAME, cache=shared_cache)
    assert _rows(make_vault_questions(tmp_path / "index.sqlite", n=None)) == BY_HAND
    (tmp_path / "notes.txt").write_text("not an index", encoding="utf-8")
    with pytest.raises(SearchCoreError, match="neither a vault folder nor a readable index"):
        make_vault_questions(tmp_path / "notes.txt")


def test_only_notes_keeps_questions_about_those_notes_and_holds_out_only_those(qvault):
    # a vault larger than the index: its other notes still give anchors about the indexed ones, and a note the
    # index lacks is never a gold note nor a held-out one (the index could not drop it)
    only = {"ai/graphrag", "ai/rrf", "life/kimchi"}
    vq = make_vault_questions(qvault, n=None, only_notes=only)
    expected = {(k, lv, q, g, tuple(x for x in ex if x in only)) for k, lv, q, g, ex in BY_HAND}
    assert _rows(vq) == expected
    assert vq.dropped["about a note outside the notes asked for"] == 0
    vq = make_vault_questions(qvault, n=None, only_notes={"ai/rrf"})
    assert {q.gold for q in vq.questions} == {("ai/rrf",)} and len(vq.questions) == 2
    assert vq.dropped["about a note outside the notes asked for"] > 0


def test_gold_makes_recipe_is_anchors_first_without_their_links_and_the_flags_give_the_one_before(qvault, tmp_path):
    from tuner.cli import main
    out, old = tmp_path / "made.yaml", tmp_path / "old.yaml"
    r = CliRunner().invoke(main, ["gold", "make", str(qvault), "--out", str(out), "-n", "4"])
    assert r.exit_code == 0, r.output
    made = load_gold(out).questions
    # the vault has 5 anchors: 4 questions are all anchors, each without the link that names its note
    assert all(q.id.startswith("anchor-") for q in made) and len(made) == 4
    masked = {q.query for q in make_vault_questions(qvault, n=None, mask_link=True).questions}
    assert {q.query for q in made} <= masked and "순위를 합칠 때는 역순위 융합 방식을 쓴다." not in {q.query for q in made}
    r = CliRunner().invoke(main, ["gold", "make", str(qvault), "--out", str(old), "-n", "4", "--keep-link",
                                  "--kinds-in-turn"])
    assert r.exit_code == 0, r.output
    assert [q.query for q in load_gold(old).questions] == [q.query for q in make_vault_questions(qvault, n=4).questions]
    # heading questions carry their note's title; --heading-alone leaves it out
    r = CliRunner().invoke(main, ["gold", "make", str(qvault), "--out", str(out), "-n", "20", "--kinds", "heading"])
    assert r.exit_code == 0, r.output
    assert sorted(q.query for q in load_gold(out).questions) == ["GraphRAG 커뮤니티 탐지", "김치찌개 레시피 재료"]
    r = CliRunner().invoke(main, ["gold", "make", str(qvault), "--out", str(out), "-n", "20", "--kinds", "heading",
                                  "--heading-alone"])
    assert r.exit_code == 0, r.output
    assert [q.query for q in load_gold(out).questions] == ["커뮤니티 탐지"]


def test_a_set_without_anchors_says_it_is_lookups_only(qvault, tmp_path):
    """A vault whose links sit in no sentence (lists only) gives heading and alias lookups alone: gold make
    says so, a set with anchors says nothing."""
    from tuner.cli import main
    assert make_vault_questions(qvault).lookups_only() is None
    lookups = make_vault_questions(qvault, kinds=("heading", "alias"))
    assert lookups.questions and "no anchor question" in lookups.lookups_only()
    r = CliRunner().invoke(main, ["gold", "make", str(qvault), "--out", str(tmp_path / "m.yaml"),
                                  "--kinds", "heading,alias"])
    assert r.exit_code == 0, r.output
    assert "warning: no anchor question" in r.output and "gold init" in r.output
    r = CliRunner().invoke(main, ["gold", "make", str(qvault), "--out", str(tmp_path / "m.yaml")])
    assert "warning" not in r.output


def test_a_heading_question_without_its_title_is_the_heading_alone_when_it_says_something(qvault):
    vq = make_vault_questions(qvault, n=None, kinds=("heading",), heading_title=False)
    # "커뮤니티 탐지" says something alone; "재료" (one word, two letters) needs "김치찌개 레시피" to mean anything
    assert _rows(vq) == {("heading", "L0", "커뮤니티 탐지", ("ai/graphrag",), ())}
    assert vq.dropped["a heading that says nothing without its note's title"] == 1
    titled = make_vault_questions(qvault, n=None, kinds=("heading",))
    assert {q.query for q in titled.questions} == {"GraphRAG 커뮤니티 탐지", "김치찌개 레시피 재료"}


def test_a_heading_alone_that_two_notes_share_is_no_question(tmp_path):
    from tests.helpers import write_vault
    vault = write_vault(tmp_path / "v", {
        "a.md": "---\ntitle: 알파\n---\n## 설치 방법 정리\n\n알파를 설치한다.\n",
        "b.md": "---\ntitle: 베타\n---\n## 설치 방법 정리\n\n베타를 설치한다.\n",
        "c.md": "---\ntitle: 감마\n---\n## 감마만의 고유한 설정\n\n감마를 설정한다.\n"})
    vq = make_vault_questions(vault, n=None, kinds=("heading",), heading_title=False)
    assert [q.query for q in vq.questions] == ["감마만의 고유한 설정"]
    titled = make_vault_questions(vault, n=None, kinds=("heading",))
    assert {q.query for q in titled.questions} == {"알파 설치 방법 정리", "베타 설치 방법 정리", "감마 감마만의 고유한 설정"}


def test_a_list_item_with_words_of_its_own_is_an_anchor_and_a_bare_one_is_not(tmp_path):
    from tests.helpers import write_vault
    vault = write_vault(tmp_path / "v", {
        "a.md": "---\ntitle: 알파\n---\n알파 노트의 본문이다.\n",
        "b.md": "---\ntitle: 베타\n---\n베타 노트의 본문이다.\n",
        "list.md": ("---\ntitle: 목록\n---\n읽은 것들을 모았다.\n\n"
                    "- [[a]]\n- [[b]]: 캐시 무효화 전략을 처음 정리한 글, 다시 읽을 만하다\n")})
    anchors = [q for q in make_vault_questions(vault, n=None, kinds=("anchor",), mask_link=True).questions]
    assert [(q.query, q.gold, q.exclude) for q in anchors] == [
        ("캐시 무효화 전략을 처음 정리한 글, 다시 읽을 만하다", ("b",), ("list",))]


def test_findable_in_keeps_the_questions_some_fusion_list_alone_finds_within_its_top_n(qvault, tmp_path, shared_cache):
    # each question searched by evaluation's own path (run_queries: its `exclude` held out) with each list alone;
    # within the top 1, some questions are found by a list and some by none, so the filter has both to sort
    from search_core.config import SearchConfig
    from search_core.index.indexer import index_vault
    from search_core.search.pipeline import Searcher
    from tests.helpers.fake_embedder import NAME
    from tuner.data.gold import GoldSet, Question
    from tuner.evaluation.evaluate import run_queries
    db = tmp_path / "index.sqlite"
    index_vault(qvault, db, embedder=NAME, cache=shared_cache)
    every = make_vault_questions(qvault, n=None)
    gold = GoldSet("made", "test", tuple(Question(q.id, q.level, q.query, q.gold, source="vault", exclude=q.exclude)
                                         for q in every.questions))
    searcher = Searcher(db)
    try:
        found = set()
        for weights in vqm.FINDABLE_LISTS.values():
            cfg = SearchConfig().replace(w_decomposed=0.0, w_entity=0.0, **weights)
            found |= {r.id for r in run_queries(searcher, gold, cfg) if r.first_rank == 1}
    finally:
        searcher.close()
    assert found and found != {q.id for q in every.questions}
    vq = make_vault_questions(qvault, n=None, findable_in=db, findable_within=1)
    assert {q.id for q in vq.questions} == found
    assert vq.dropped["no fusion list alone finds its note in its top 1"] == len(every.questions) - len(found)
    # n is filled from the questions that pass
    assert len(make_vault_questions(qvault, n=len(found), findable_in=db, findable_within=1).questions) == len(found)
    # a deeper rank lets more through: every question found at 1 is found within 10
    assert {q.id for q in make_vault_questions(qvault, n=None, findable_in=db).questions} >= found
    with pytest.raises(SearchCoreError, match="give a rank of 1 or more"):
        make_vault_questions(qvault, n=None, findable_in=db, findable_within=0)
    # the CLI (the library's own defaults: --keep-link --kinds-in-turn) makes the same set
    from tuner.cli import main
    out = tmp_path / "findable.yaml"
    r = CliRunner().invoke(main, ["gold", "make", str(qvault), "--out", str(out), "-n", "600",
                                  "--keep-link", "--kinds-in-turn", "--findable-in", str(db), "--findable-within", "1"])
    assert r.exit_code == 0, r.output
    assert {q.id for q in load_gold(out).questions} == found
