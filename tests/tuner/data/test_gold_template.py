"""`gold init`: a template of notes across the vault's folders, one commented slot per level, that loads as a
gold set once a slot is filled."""

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from tests.helpers import write_vault
from tests.helpers.vault_questions import QUESTION_VAULT
from tuner.data.gold import GoldError, load_gold
from tuner.data.gold_template import write_gold_template


@pytest.fixture
def qvault(tmp_path):
    return write_vault(tmp_path / "vault", QUESTION_VAULT)


def test_notes_come_from_every_folder_and_never_an_index_note(qvault, tmp_path):
    picked = write_gold_template(qvault, tmp_path / "t.yaml", n=3)
    assert {p.split("/")[0] for p in picked} == {"ai", "life", "daily"} and "index" not in picked
    text = (tmp_path / "t.yaml").read_text(encoding="utf-8")
    assert "# ---- life/kimchi: 김치찌개 레시피" in text
    for level in ("L0", "L1", "XL", "L2", "probe"):
        assert text.count(f"#   level: {level} ") == 3


def test_unfilled_it_says_so_and_filled_it_loads(qvault, tmp_path):
    out = tmp_path / "t.yaml"
    write_gold_template(qvault, out, n=3)
    with pytest.raises(GoldError, match="no question is filled in yet"):
        load_gold(out)
    lines = out.read_text(encoding="utf-8").split("\n")
    start = lines.index('  # - id: "kimchi-L0"')
    for i in range(start, start + 5):                  # fill one slot: uncomment it, write its query
        lines[i] = lines[i].replace("  # ", "  ", 1)
    lines[start + 2] = '    query: "김치찌개 재료"'
    out.write_text("\n".join(lines), encoding="utf-8")
    g = load_gold(out)
    assert [(q.id, q.level, q.query, q.gold) for q in g.questions] == [("kimchi-L0", "L0", "김치찌개 재료", ("life/kimchi",))]


def test_an_l2_slot_names_a_linked_note_and_an_existing_file_is_kept(qvault, tmp_path):
    out = tmp_path / "t.yaml"
    write_gold_template(qvault, out, n=10)
    assert '#   gold: ["ai/rrf", "ai/graphrag"]' in out.read_text(encoding="utf-8")
    with pytest.raises(SearchCoreError, match="exists"):
        write_gold_template(qvault, out)
    from tuner.cli import main
    r = CliRunner().invoke(main, ["gold", "init", str(qvault), "--out", str(tmp_path / "c.yaml"), "-n", "2"])
    assert r.exit_code == 0 and "wrote a template for 2 notes" in r.output


def test_a_stub_is_offered_only_once_the_other_notes_are_used_up(tmp_path):
    """An empty tag page and a two-word note show under STUB_CHARS; a template of 2 takes the two real notes,
    one of 4 adds the stubs."""
    body = "벡터 검색과 키워드 검색을 섞어 쓰는 이유를 적어 둔다. " * 8          # ~250 characters shown
    vault = write_vault(tmp_path / "v", {"tags/건강.md": "---\npublish: true\n---\n# 건강\n",
                                         "tags/짧은.md": "# 짧은\n\n두 단어.\n",
                                         "ai/hybrid.md": f"# 하이브리드 검색\n\n{body}\n",
                                         "life/run.md": f"# 달리기\n\n{body.replace('검색', '달리기')}\n"})
    from tuner.data.gold_template import STUB_CHARS, shown_chars
    from tuner.data.vault_questions import read_vault
    notes, _ = read_vault(vault)
    assert shown_chars(notes["tags/건강"]) < STUB_CHARS <= shown_chars(notes["ai/hybrid"])
    assert sorted(write_gold_template(vault, tmp_path / "two.yaml", n=2)) == ["ai/hybrid", "life/run"]
    assert sorted(write_gold_template(vault, tmp_path / "four.yaml", n=4)[2:]) == ["tags/건강", "tags/짧은"]
