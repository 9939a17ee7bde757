"""Cloze questions: a note's line blanked in a copy of the vault and asked of the copy's index, checked against the
lines chosen by hand for a small vault."""

import pytest

from search_core import SearchCoreError
from tests.helpers import write_vault
from tuner.data import cloze
from tuner.data.cloze import candidate_lines, choose_cloze, make_cloze, refresh_cloze, write_cloze_vault
from tuner.data.gold import load_gold

GC = ("---\ntitle: 가비지 컬렉션\n---\n# 가비지 컬렉션\n\n"                       # lines 1-5
      "자바의 가비지 컬렉터는 더 이상 참조되지 않는 객체의 메모리를 회수한다.\n\n"  # 6
      "## 세대\n\n"                                                                   # 8
      "Young 영역에서 살아남은 객체는 Old 영역으로 옮겨져 오래 머문다.\n"            # 10
      "```java\nSystem.gc(); // 이 줄은 코드라서 질문이 될 수 없는 긴 줄입니다 정말로요\n```\n"  # 11-13
      "| 영역 | 설명이 들어가는 표의 한 줄은 질문이 되지 않는다 |\n"                   # 14
      "짧은 줄.\n"                                                                    # 15
      "[[jvm]] 과 함께 읽으면 좋은 문서이며 링크가 있는 줄은 앵커가 된다.\n"          # 16
      "- Stop-the-world 동안 애플리케이션 스레드는 모두 멈추고 기다린다.\n")         # 17
JVM = ("# JVM\n\nJVM은 바이트코드를 읽어 각 플랫폼의 기계어로 옮겨 실행하는 가상 머신이다.\n"     # 3
       "클래스 로더는 필요한 클래스를 찾아 메모리에 올리고 링크하고 초기화한다.\n"               # 4
       "JIT 컴파일러는 자주 실행되는 메서드를 기계어로 미리 번역해 빠르게 돌린다.\n"             # 5
       "공통 문구: 이 문서는 공부하며 정리한 노트이며 틀린 내용이 있을 수 있다.\n")              # 6
SHORT = "# 메모\n\n공통 문구: 이 문서는 공부하며 정리한 노트이며 틀린 내용이 있을 수 있다.\n한 줄 더 있는 짧은 노트의 두번째 문장이다.\n"

# the lines each note could give, computed by reading: gc keeps 6, 10 and 17 (the list item read without its mark);
# 11-13 are code, 14 a table row, 15 too short, 16 holds a link; jvm keeps 3-6
GC_LINES = {6: "자바의 가비지 컬렉터는 더 이상 참조되지 않는 객체의 메모리를 회수한다.",
            10: "Young 영역에서 살아남은 객체는 Old 영역으로 옮겨져 오래 머문다.",
            17: "Stop-the-world 동안 애플리케이션 스레드는 모두 멈추고 기다린다."}


@pytest.fixture
def vault(tmp_path):
    return write_vault(tmp_path / "vault", {"java/gc.md": GC, "java/jvm.md": JVM, "memo.md": SHORT})


def test_the_candidate_lines_are_the_ones_read_by_hand():
    got = candidate_lines("java/gc", GC)
    assert {c.line: c.query for c in got} == GC_LINES
    assert [c.text for c in got][2] == "- Stop-the-world 동안 애플리케이션 스레드는 모두 멈추고 기다린다."
    assert [c.line for c in candidate_lines("java/jvm", JVM)] == [3, 4, 5, 6]


def test_one_line_a_note_none_from_a_short_note_nor_a_line_two_notes_hold(vault):
    lines, notes, dropped = choose_cloze(vault, n=None, seed=0)
    assert notes == 3
    by_note = {c.note_id: c for c in lines}
    assert set(by_note) == {"java/gc", "java/jvm"}                 # memo has 2 prose lines: fewer than 3
    assert by_note["java/gc"].line in GC_LINES
    assert by_note["java/jvm"].line in (3, 4, 5)                   # line 6 is memo's line too
    assert dropped == {"a note with fewer than 3 prose lines": 1, "a line another note holds too": 1}
    assert choose_cloze(vault, n=None, seed=0)[0] == lines          # seeded
    picks = {tuple(c.line for c in choose_cloze(vault, n=None, seed=s)[0]) for s in range(12)}
    assert len(picks) > 1                                          # and the seed chooses


def test_notes_the_persons_questions_point_at_keep_every_line(vault):
    lines, _, dropped = choose_cloze(vault, n=None, keep_notes={"java/gc"})
    assert [c.note_id for c in lines] == ["java/jvm"]
    assert dropped["a note the hand-written or labelled questions point at"] == 1
    assert len(choose_cloze(vault, n=1)[0]) == 1


def test_the_copy_blanks_each_line_and_keeps_every_other(vault, tmp_path):
    lines, _, _ = choose_cloze(vault, n=None, seed=3)
    copy = write_cloze_vault(vault, lines, tmp_path / "copy")
    for c in lines:
        rel = c.note_id + ".md"
        before, after = (vault / rel).read_text().split("\n"), (copy / rel).read_text().split("\n")
        assert len(before) == len(after) and after[c.line - 1] == "" and before[c.line - 1] == c.text
        assert [a for i, a in enumerate(after) if i != c.line - 1] == [b for i, b in enumerate(before) if i != c.line - 1]
    assert (copy / "memo.md").read_text() == SHORT


def test_a_vault_that_changed_under_its_lines_is_an_error_and_leaves_no_copy(vault, tmp_path):
    lines, _, _ = choose_cloze(vault, n=None)
    gc = next(c for c in lines if c.note_id == "java/gc")
    (vault / "java/gc.md").write_text(GC.replace(gc.text, "바뀐 줄"), encoding="utf-8")
    with pytest.raises(SearchCoreError, match="changed while its cloze questions were made"):
        write_cloze_vault(vault, lines, tmp_path / "copy")
    assert not (tmp_path / "copy").exists() and not (tmp_path / "copy.tmp").exists()


def test_the_questions_are_asked_of_an_index_without_their_lines(vault, tmp_path, shared_cache):
    from search_core.search.pipeline import Searcher
    from tests.helpers.fake_embedder import NAME
    made = make_cloze(vault, tmp_path / "cloze", n=None, embedder=NAME, cache=shared_cache)
    gold = load_gold(made.gold)
    assert made.questions == len(gold.questions) == 2
    assert {q.source for q in gold.questions} == {"vault"} and {q.level for q in gold.questions} == {"L1"}
    assert all(q.id.startswith("cloze-") for q in gold.questions)
    from tuner.data.vault_questions import made_kind
    assert {made_kind(q.id) for q in gold.questions} == {"cloze"}       # the morning report counts them as such
    s = Searcher(made.db)
    try:
        texts = " ".join(r[0] for r in s.conn.execute("SELECT text FROM chunks"))
        asked = {q.query for q in gold.questions}
        assert not any(q in texts for q in asked)               # the copy's index holds not one of them
        kept = [line for line in GC_LINES.values() if line not in asked]
        assert len(kept) == 2 and all(line.split()[0] in texts for line in kept)   # and the note's other lines
    finally:
        s.close()


def test_refresh_makes_them_again_only_when_the_vault_changed(vault, tmp_path, shared_cache, monkeypatch):
    from tests.helpers.fake_embedder import NAME
    first, made = refresh_cloze(vault, tmp_path / "cloze", n=None, embedder=NAME, cache=shared_cache)
    assert made
    calls = []
    real = cloze.make_cloze
    monkeypatch.setattr(cloze, "make_cloze", lambda *a, **k: calls.append(1) or real(*a, **k))
    again, made = refresh_cloze(vault, tmp_path / "cloze", n=None, embedder=NAME, cache=shared_cache)
    assert not made and not calls and again.gold == first.gold and again.questions == first.questions
    (vault / "java/jvm.md").write_text(JVM + "새로 쓴 줄이 하나 더 있어서 노트의 내용이 바뀌었다고 알 수 있다.\n",
                                       encoding="utf-8")
    _, made = refresh_cloze(vault, tmp_path / "cloze", n=None, embedder=NAME, cache=shared_cache)
    assert made and calls


def test_the_copy_is_indexed_as_the_index_it_stands_in_for(vault, tmp_path, shared_cache):
    from search_core.config import ChunkConfig
    from search_core.index.indexer import index_vault
    from tests.helpers.fake_embedder import NAME
    from tuner.data.cloze import index_settings
    like = tmp_path / "like.sqlite"
    index_vault(vault, like, embedder=NAME, chunk_cfg=ChunkConfig(target_chars=200, max_chars=300, min_chars=40), cache=shared_cache)
    made = make_cloze(vault, tmp_path / "cloze", n=None, like=like, cache=shared_cache)
    assert index_settings(made.db) == index_settings(like)
    assert index_settings(like)[1].max_chars == 300 != ChunkConfig().max_chars


def test_gold_cloze_from_an_index_builds_the_copy_as_that_index_was_built(vault, tmp_path, shared_cache):
    import json

    from click.testing import CliRunner

    from search_core.index.indexer import index_vault
    from tests.helpers.fake_embedder import NAME
    from tuner.cli.main import main
    from tuner.data.cloze import index_settings
    db = tmp_path / "index.sqlite"
    index_vault(vault, db, embedder=NAME, cache=shared_cache)
    hand = write_vault(tmp_path / "hand", {"gold.yaml": "name: mine\nquestions:\n- {id: q1, level: L1, query: 'JIT 이란', "
                                                        "gold: [java/jvm]}\n"}) / "gold.yaml"
    r = CliRunner().invoke(main, ["gold", "cloze", str(db), "--out", str(tmp_path / "c"), "--keep-notes-of", str(hand),
                                  "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["questions"] == 1 and load_gold(out["gold"]).questions[0].gold == ("java/gc",)   # jvm keeps its lines
    assert index_settings(out["db"]) == index_settings(db)
    r = CliRunner().invoke(main, ["gold", "cloze", str(tmp_path / "nowhere"), "--out", str(tmp_path / "d")])
    assert r.exit_code != 0 and "nowhere" in r.output


def test_a_question_is_its_lines_first_words_and_the_copy_blanks_the_whole_line(vault, tmp_path):
    from tuner.data.cloze import cloze_questions, first_words
    lines, _, _ = choose_cloze(vault, n=None, seed=0)
    gc = next(c for c in lines if c.note_id == "java/gc")
    cut = {q.gold[0]: q.query for q in cloze_questions(lines, words=3)}
    assert cut["java/gc"] == " ".join(gc.query.split()[:3]) and len(cut["java/gc"].split()) == 3
    assert {q.gold[0]: q.query for q in cloze_questions(lines, words=None)}["java/gc"] == gc.query
    assert first_words("자바의 가비지 컬렉터는", 8) == "자바의 가비지 컬렉터는"      # a shorter line stays whole
    made = make_cloze(vault, tmp_path / "cloze", n=None, words=3, index=False)
    asked = {q.gold[0]: q.query for q in load_gold(made.gold).questions}
    assert asked["java/gc"] == cut["java/gc"]
    assert (made.vault / "java/gc.md").read_text().split("\n")[gc.line - 1] == ""       # the whole line is blanked


def test_refresh_makes_them_again_when_the_question_length_changes(vault, tmp_path, shared_cache):
    from tests.helpers.fake_embedder import NAME
    first, made = refresh_cloze(vault, tmp_path / "cloze", n=None, words=3, embedder=NAME, cache=shared_cache)
    assert made and all(len(q.query.split()) <= 3 for q in load_gold(first.gold).questions)
    again, made = refresh_cloze(vault, tmp_path / "cloze", n=None, words=None, embedder=NAME, cache=shared_cache)
    assert made and any(len(q.query.split()) > 3 for q in load_gold(again.gold).questions)
