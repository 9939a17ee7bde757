import json

import pytest

from tests.helpers.gold import GOOD, write
from tuner.data.gold import GoldError, load_gold


def test_yaml_gold_loads(tmp_path):
    g = load_gold(write(tmp_path, GOOD))
    assert g.name == "t" and [q.id for q in g.questions] == ["Q1", "P1"]
    assert g.questions[0].gold == ("ai/graphrag",) and g.questions[0].line == 4
    assert [q.id for q in g.probes()] == ["P1"]


@pytest.mark.parametrize("text, match", [
    ("name: x\nquestions: [\n", r"g.yaml line \d+: not valid YAML"),
    ("- just a list\n", "a mapping with `name`"),
    ("name: x\nquestions: []\n", "no questions"),
    (GOOD.replace('    query: "GraphRAG"\n', ""), r"line 4: question Q1 has no `query`"),
    (GOOD.replace("id: P1", "id: Q1"), r"line 9: duplicate id 'Q1' \(first at line 4\)"),
    (GOOD.replace("level: L0", "level: L9"), r"unknown level 'L9'; levels: L0, L1, XL, L2, L3, probe"),
    (GOOD.replace('gold: ["ai/graphrag"]', "gold: []"), "has no gold ids; make it level `probe`"),
    (GOOD.replace("gold: []", 'gold: ["x"]'), "is a probe .* but lists gold"),
])
def test_bad_gold_files_name_file_and_line(tmp_path, text, match):
    with pytest.raises(GoldError, match=match):
        load_gold(write(tmp_path, text))


def test_missing_gold_ids_are_listed_or_warned(tmp_path):
    g = load_gold(write(tmp_path, GOOD))
    with pytest.raises(GoldError, match=r"1 gold id\(s\) are not notes in the index: Q1 \(line 4\): 'ai/graphrag'"):
        g.check_against({"other"})
    assert "ignored" in g.check_against({"other"}, allow_missing=True)[0]
    assert g.check_against({"ai/graphrag"}) == []


def _beir(tmp_path, qrels):
    d = tmp_path / "beir"
    d.mkdir()
    (d / "queries.jsonl").write_text('{"_id": "q1", "text": "질문 하나"}\n{"_id": "q2", "text": "질문 둘"}\n',
                                     encoding="utf-8")
    (d / "qrels_test.tsv").write_text(qrels, encoding="utf-8")
    return d


def test_beir_gold(tmp_path):
    g = load_gold(_beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq2\td3\t0\n"))
    assert [(q.id, q.gold) for q in g.questions] == [("q1", ("d1",)), ("q2", ("d2",))]


def test_qrels_naming_an_unknown_query(tmp_path):
    with pytest.raises(GoldError, match=r"qrels_test.tsv line 3: query 'q9' is not in queries.jsonl"):
        load_gold(_beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td2\t1\n"))


def test_korquad_gold(tmp_path):
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"version": "x", "data": [{"title": "A", "paragraphs": [
        {"context": "본문", "qas": [{"id": "1", "question": "질문?", "answers": []}]}]}]}), encoding="utf-8")
    g = load_gold(p)
    assert g.questions[0].gold == ("000-00",)
    assert g.questions[0].level == "L1"
    bad = write(tmp_path, '{"data": []}', "bad.json")
    with pytest.raises(GoldError, match="not a KorQuAD"):
        load_gold(bad)


def test_korquad_levels_follow_the_stated_rules(tmp_path):
    qas = [{"id": "a", "question": "세종대왕이 1443년에 만든 문자는?"},      # names the article: L0
           {"id": "b", "question": "1443년에 훈민정음을 만든 왕은 누구인가?"},      # paraphrase: L1
           {"id": "c", "question": "Which script did 세종대왕 create?"},     # Latin letters outnumber Hangul: XL
           {"id": "d", "question": "GDP 성장률이 가장 높았던 해는 언제인가?"}]  # an English term in Korean: L1
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"data": [{"title": "세종대왕", "paragraphs": [
        {"context": "본문", "qas": [{**q, "answers": []} for q in qas]}]}]}), encoding="utf-8")
    assert [q.level for q in load_gold(p).questions] == ["L0", "L1", "XL", "L1"]


def test_demo_gold_sets_have_the_promised_spread():
    from tests.helpers import ROOT
    tune = load_gold(ROOT / "experiments/gold/demo-tune.yaml")
    hold = load_gold(ROOT / "experiments/gold/demo-holdout.yaml")
    probes = load_gold(ROOT / "experiments/gold/demo-probes.yaml")
    count = lambda g, lv: sum(q.level == lv for q in g.questions)
    assert len(tune.answerable()) == 24 and len(hold.answerable()) == 48
    assert (count(tune, "L0"), count(tune, "L1") + count(tune, "XL"), count(tune, "L2"), count(tune, "L3")) == (6, 10, 5, 3)
    assert (count(hold, "L0"), count(hold, "L1") + count(hold, "XL"), count(hold, "L2"), count(hold, "L3")) == (12, 20, 10, 6)
    assert len(tune.probes()) + len(hold.probes()) + len(probes.probes()) >= 12
    assert not {q.query for q in tune.questions} & {q.query for q in hold.questions}
    assert all(q.why for g in (tune, hold, probes) for q in g.questions)
    vault = ROOT / "experiments/demo-vault"
    assert all((vault / f"{gid}.md").exists() for g in (tune, hold) for gid in g.gold_ids())


def test_exclude_is_read_and_checked(tmp_path):
    ok = GOOD.replace('    why: "title"\n', '    why: "title"\n    exclude: ["ai/rrf"]\n', 1)
    g = load_gold(write(tmp_path, ok))
    assert g.questions[0].exclude == ("ai/rrf",) and g.questions[1].exclude == ()
    with pytest.raises(GoldError, match=r"Q1 \(line 4\): 'ai/rrf' in `exclude`"):
        g.check_against({"ai/graphrag"})
    assert g.check_against({"ai/graphrag", "ai/rrf"}) == []


@pytest.mark.parametrize("value, match", [
    ('["ai/graphrag"]', r"question Q1 excludes its own gold \['ai/graphrag'\]"),
    ("{a: 1}", r"question Q1: `exclude` is a list of note ids"),
    ("[1]", r"question Q1: `exclude` is a list of note ids"),
])
def test_bad_exclude_is_refused(tmp_path, value, match):
    with pytest.raises(GoldError, match=match):
        load_gold(write(tmp_path, GOOD.replace('    why: "title"\n', f'    why: "title"\n    exclude: {value}\n', 1)))
