"""The daemon uses the vault's evidence: the night tunes on the hand-written set plus the questions the vault
supplies (made again only when the vault changed) and the labelled recall calls the weekly `labels` job keeps
beside the gold set; the holdout stays hand-written; the morning report says which evidence the night used
and which of it decided each kept change."""

import json
import shutil

import pytest
import yaml
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.recall.log import label_calls
from tests.helpers import DEMO_VAULT
from tests.helpers.daemon_proc import labelled_log
from tests.helpers.sweeps import DEMO_HOLD as HOLD
from tests.helpers.sweeps import DEMO_TUNE as TUNE
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tests.helpers.sweeps import FUSION_SPACE, HAND_SET_UNITS, hand_set_calibrations, small_gold
from tuner.cli import main
from tuner.daemon.config import DaemonConfigError, load_daemon_config
from tuner.data.gold import load_gold
from tuner.data.vault_questions import MADE_N, make_vault_questions


def write_config(tmp_path, db, *, vault=DEMO_VAULT, rounds=12, evidence="", holdout=True, jobs=None):
    (tmp_path / "space.toml").write_text(FUSION_SPACE)
    tune = small_gold(TUNE, tmp_path / "tune.yaml", 2)
    hold = small_gold(HOLD, tmp_path / "hold.yaml", 4)
    jobs = jobs or '[jobs.sweep]\nevery = "1d"\nbudget = "30m"\n[jobs.labels]\ncron = "0 4 * * 0"\n'
    text = (f'[daemon]\ntimezone = "UTC"\nruns = "runs"\n'
            f'[sweep]\nvault = "{vault}"\ndb = "{db}"\ngold = "{tune}"\n'
            + (f'holdout = "{hold}"\n' if holdout else "split = 0.5\n")
            + f'space = "space.toml"\nrounds = {rounds}\n' + (f"[evidence]\n{evidence}\n" if evidence else "") + jobs)
    p = tmp_path / "daemon.toml"
    p.write_text(text)
    return p


# -- the config --------------------------------------------------------------------------------------------
def test_evidence_keys_default_to_the_vaults_questions_and_are_checked(tmp_path, demo_db):
    cfg = load_daemon_config(write_config(tmp_path, demo_db))
    ev = cfg.evidence
    assert (ev.vault_questions, ev.kinds, ev.seed, ev.cloze) == (MADE_N, None, 0, 0)
    assert ev.from_log_path(cfg.sweep.gold) == tmp_path / "tune.from-log.yaml"      # beside the gold set
    cfg = load_daemon_config(write_config(tmp_path, demo_db, evidence='vault_questions = 0\nkinds = ["anchor"]\n'
                                                                      'seed = 3\nfrom_log = "labels.yaml"\ncloze = 50'))
    assert (cfg.evidence.vault_questions, cfg.evidence.kinds, cfg.evidence.seed) == (0, ("anchor",), 3)
    assert cfg.evidence.cloze == 50
    assert cfg.evidence.from_log_path(cfg.sweep.gold) == tmp_path / "labels.yaml"
    for bad, message in [('kinds = ["anchors"]', r"kinds \['anchors'\] must be one or more of anchor, heading"),
                         ("vault_questions = -1", "vault_questions = -1 .* an integer"),
                         ('cloze = "many"', "cloze = 'many' .* an integer"),
                         ('from_log = "tune.yaml"', "from_log = .*tune.yaml is the hand-written gold set; the labels "
                                                    "job would overwrite it"),
                         ("questions = 5", "unknown key.*'questions'")]:
        with pytest.raises(SearchCoreError, match=message):
            load_daemon_config(write_config(tmp_path, demo_db, evidence=bad))
    with pytest.raises(DaemonConfigError, match=r"unknown table\(s\) \['evidense'\]; valid: .*\[evidence\]"):
        p = write_config(tmp_path, demo_db)
        p.write_text(p.read_text() + "[evidense]\nseed = 1\n")
        load_daemon_config(p)


# -- the night's tuning set ---------------------------------------------------------------------------------
def test_the_nights_set_adds_the_vaults_questions_made_again_only_when_the_vault_changed(tmp_path, db_copy):
    from tuner.daemon.evidence import prepare_night_gold
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT, vault)
    cfg = load_daemon_config(write_config(tmp_path, db_copy, vault=vault, evidence="vault_questions = 40"))
    hand = (tmp_path / "tune.yaml").read_bytes()
    first = prepare_night_gold(cfg, db_copy)
    gs = load_gold(first.gold)
    by_source = {s: sum(q.source == s for q in gs.questions) for s in ("hand", "log", "vault")}
    assert by_source == {"hand": len(load_gold(tmp_path / "tune.yaml").questions), "log": 0, "vault": 40}
    assert first.vault.made and first.holdout == str(tmp_path / "hold.yaml")
    assert {k.source for k in first.tuning.kinds} == {"hand", "vault"}
    assert any(q.exclude for q in gs.questions if q.source == "vault")       # anchors keep their held-out note
    again = prepare_night_gold(cfg, db_copy)
    assert not again.vault.made and again.gold == first.gold                  # nothing changed: the same file
    note = next(vault.rglob("*.md"))
    note.write_text(note.read_text(encoding="utf-8") + "\n\n## 새 절\n\n덧붙인 문단.\n", encoding="utf-8")
    changed = prepare_night_gold(cfg, db_copy)
    assert changed.vault.made
    assert (tmp_path / "tune.yaml").read_bytes() == hand                      # the hand-written file is only read
    assert load_gold(first.gold).questions == gs.questions                    # an earlier night's file stays as it was


def test_the_nights_vault_questions_are_made_as_gold_make_makes_them(tmp_path, db_copy):
    """gold make's recipe (anchors first, each without its link), not the one before (every kind in turn,
    links kept); a set left by the recipe before is made again, since its stamp's options differ."""
    from tuner.daemon.evidence import prepare_night_gold
    from tuner.data.night_gold import refresh_vault_questions
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT, vault)
    before = refresh_vault_questions(vault, tmp_path / "runs" / "evidence", n=40, recipe_before=True)
    assert before.made and "heading" in before.by_kind          # every kind in turn: not anchors first
    cfg = load_daemon_config(write_config(tmp_path, db_copy, vault=vault, evidence="vault_questions = 40"))
    night = prepare_night_gold(cfg, db_copy)
    assert night.vault.made and night.vault.by_kind == {"anchor": 40}
    made = [(q.query, q.gold, q.exclude) for q in load_gold(night.gold).questions if q.source == "vault"]
    recipe = make_vault_questions(vault, n=40, seed=0, anchor_share=1.0, mask_link=True)
    assert made == [(q.query, q.gold, q.exclude) for q in recipe.questions]


def test_a_vault_that_gives_no_questions_leaves_the_night_its_hand_written_set(tmp_path, db_copy):
    """A corpus that is not markdown notes (AutoRAG-ko's BEIR folder) makes no vault questions: the night
    says why and tunes on the hand-written questions, rather than failing."""
    from tuner.daemon.evidence import prepare_night_gold
    corpus = tmp_path / "beir"
    corpus.mkdir()
    (corpus / "corpus.jsonl").write_text('{"_id": "d1", "title": "t", "text": "본문"}\n', encoding="utf-8")
    cfg = load_daemon_config(write_config(tmp_path, db_copy, vault=corpus, evidence="vault_questions = 40\ncloze = 40"))
    said = []
    night = prepare_night_gold(cfg, db_copy, progress=said.append)
    assert night.vault is None and "0 note(s)" in night.vault_skipped
    assert night.cloze is None and night.db is None and "prose lines" in night.cloze_skipped   # nor cloze ones
    assert night.to_json()["cloze"].startswith("not made: ")
    assert {q.source for q in load_gold(night.gold).questions} == {"hand"}
    assert night.to_json()["vault_set"].startswith("not made: ")
    assert any(x.startswith("vault questions: none (") for x in said)


def test_a_vault_with_no_anchor_leaves_its_lookups_out_of_the_night_and_the_report_says_why(tmp_path, db_copy):
    """The demo vault with every link taken out (what a wiki whose links sit only in lists gives `gold make`):
    its questions are lookups alone, which name their answer; the night tunes on the hand-written set, its
    file says what was left out and why, and the morning report says it."""
    import re
    from tests.helpers.sweeps import run_sweep
    from tuner.daemon.evidence import prepare_night_gold
    from tuner.data.night_gold import left_out_of
    from tuner.reports import render
    from tuner.reports.sweep import sweep_report
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT, vault)
    for note in vault.rglob("*.md"):
        text = note.read_text(encoding="utf-8")
        text = re.sub(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]", r"\1", text)        # [[note|words]] -> words
        note.write_text(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text), encoding="utf-8")
    cfg = load_daemon_config(write_config(tmp_path, db_copy, vault=vault, evidence="vault_questions = 40"))
    said = []
    night = prepare_night_gold(cfg, db_copy, progress=said.append)
    assert night.vault.made and night.vault.lookups_only and night.vault.questions == 40
    assert "anchor" not in night.vault.by_kind
    assert {q.source for q in load_gold(night.gold).questions} == {"hand"}
    why = night.vault.left_out_reason()
    assert why.startswith("The vault's 40 questions (") and "were left out of the night: none is an anchor" in why
    assert night.tuning.left_out == left_out_of(night.gold) == (why,)
    assert night.to_json()["vault_set"] == "made; left out of the night: no anchor question"
    assert f"vault questions left out: {why}" in said
    assert left_out_of(tmp_path / "tune.yaml") == () and left_out_of(tmp_path / "missing.yaml") == ()
    summary, _ = run_sweep(tmp_path, db_copy, FUSION_SPACE, 2, gold=night.gold)
    md = render(sweep_report(tmp_path / "l.sqlite", summary.sweep, tmp_path / "runs"), "md")
    section = md.split("## The evidence the night stood on", 1)[1].split("\n## ", 1)[0]
    assert why in section
    # a vault with anchors keeps its questions in the night, and its file says nothing was left out
    cfg = load_daemon_config(write_config(tmp_path, db_copy, evidence="vault_questions = 40"))
    with_anchors = prepare_night_gold(cfg, db_copy)
    assert not with_anchors.vault.lookups_only and left_out_of(with_anchors.gold) == ()
    assert sum(q.source == "vault" for q in load_gold(with_anchors.gold).questions) == 40


def test_with_a_split_the_holdout_is_the_hand_written_half_and_no_made_question(tmp_path, db_copy):
    from tuner.daemon.evidence import prepare_night_gold
    cfg = load_daemon_config(write_config(tmp_path, db_copy, holdout=False, evidence="vault_questions = 30"))
    night = prepare_night_gold(cfg, db_copy)
    hold, tune = load_gold(night.holdout), load_gold(night.gold)
    hand_ids = {q.id for q in load_gold(tmp_path / "tune.yaml").questions}
    assert {q.source for q in hold.questions} == {"hand"} and {q.id for q in hold.questions} < hand_ids
    tuned_hand = {q.id for q in tune.questions if q.source == "hand"}
    assert tuned_hand | {q.id for q in hold.questions} == hand_ids and not tuned_hand & {q.id for q in hold.questions}
    assert sum(q.source == "vault" for q in tune.questions) == 30


def test_a_made_question_about_a_note_the_index_lacks_is_left_out(tmp_path, db_copy):
    """The vault gained a note after the index was built (no index job): its questions wait for the index."""
    from tuner.daemon.evidence import prepare_night_gold
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT, vault)
    (vault / "ai" / "new-note.md").write_text("---\ntitle: 새 노트\naliases: [brand new note]\n---\n# 새 노트\n\n"
                                               "## 설정 방법\n\n본문.\n", encoding="utf-8")
    cfg = load_daemon_config(write_config(tmp_path, db_copy, vault=vault, evidence="vault_questions = 2000"))
    night = prepare_night_gold(cfg, db_copy)
    assert night.tuning.dropped == {"names a note the index does not hold": 2}     # its alias and its heading
    assert not any("ai/new-note" in q.gold for q in load_gold(night.gold).questions)


def test_cloze_questions_put_the_night_on_the_vaults_copy_and_spare_the_persons_notes(tmp_path, db_copy):
    from tuner.daemon.evidence import is_cloze_index, prepare_night_gold
    from tuner.data.vault_questions import _render
    from tuner.data.cloze import index_settings
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT, vault)
    cfg = load_daemon_config(write_config(tmp_path, db_copy, vault=vault, evidence="vault_questions = 0\ncloze = 30"))
    before = db_copy.read_bytes()
    said = []
    night = prepare_night_gold(cfg, db_copy, progress=said.append)
    assert night.cloze_made and night.cloze.questions == 30 and night.db == str(night.cloze.db)
    assert is_cloze_index(tmp_path / "runs", night.db) and not is_cloze_index(tmp_path / "runs", db_copy)
    assert index_settings(night.db) == index_settings(db_copy)
    gs = load_gold(night.gold)
    cloze = [q for q in gs.questions if q.id.startswith("cloze-")]
    assert len(cloze) == 30 and {q.source for q in gs.questions} == {"hand", "vault"}
    persons = {g for f in ("tune.yaml", "hold.yaml") for q in load_gold(tmp_path / f).questions for g in q.gold}
    assert persons and not {q.gold[0] for q in cloze} & persons          # their notes keep every line
    for q in cloze:                                                      # blanked in the copy, not in the vault
        rel = next(p for p in vault.rglob("*.md") if p.relative_to(vault).with_suffix("").as_posix() == q.gold[0])
        copy = night.cloze.vault / rel.relative_to(vault)
        line = int(q.why.split()[1])                                     # "line 12 of note ai/x, blanked in the copy"
        assert copy.read_text(encoding="utf-8").split("\n")[line - 1] == ""
        assert _render(rel.read_text(encoding="utf-8").split("\n")[line - 1]) == q.query
    assert db_copy.read_bytes() == before
    assert night.to_json()["cloze"]["questions"] == 30 and any(x.startswith("cloze questions: 30") for x in said)
    again = prepare_night_gold(cfg, db_copy)
    assert not again.cloze_made and again.gold == night.gold


def test_a_night_on_the_copy_promotes_the_vaults_own_index(tmp_path, db_copy):
    from tuner.ledger.ledger import Ledger
    from tuner.promotion.promote import read_active
    cfg_path = write_config(tmp_path, db_copy, evidence="vault_questions = 0\ncloze = 40", rounds=8)
    runs = tmp_path / "runs"
    hand_set_calibrations(runs / "cost-model", units_by_embedder={FAKE_EMBEDDER: HAND_SET_UNITS["e5-small"]})
    r = CliRunner().invoke(main, ["daemon", "--config", str(cfg_path), "--once", "sweep"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["evidence"]["cloze"]["questions"] == 40
    lg = Ledger(runs / "ledger.sqlite")
    try:
        info = lg.sweep(res["sweep"])
    finally:
        lg.close()
    assert info.params.sweep.db == res["evidence"]["cloze"]["index"] != str(db_copy)    # tuned on the copy
    assert res["promotion"]["promoted"], res["promotion"]
    from search_core.index.store import connect

    def chunk_texts(db):
        conn = connect(db, readonly=True)
        try:
            return sorted(t for (t,) in conn.execute("SELECT text FROM chunks"))
        finally:
            conn.close()
    promoted = chunk_texts(read_active(runs).index)
    assert promoted == chunk_texts(db_copy) != chunk_texts(info.params.sweep.db)   # the vault's, not the copy's


# -- the weekly labels job ------------------------------------------------------------------------------------
def test_the_weekly_labels_job_adds_labelled_calls_beside_the_gold_set_once(tmp_path, db_copy):
    cfg_path = write_config(tmp_path, db_copy, jobs='[jobs.labels]\ncron = "0 4 * * 0"\n')
    runs, out = tmp_path / "runs", tmp_path / "tune.from-log.yaml"
    hand = (tmp_path / "tune.yaml").read_bytes()
    r = CliRunner().invoke(main, ["daemon", "--config", str(cfg_path), "--once", "labels"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["added"] == 0 and "no recall log" in json.loads(r.output)["why"]
    asked = load_gold(tmp_path / "tune.yaml").answerable()[0]
    ids = labelled_log(runs, [("리랭커 모델 비교한 결과 어디 적어뒀지", "ai/rag/reranker", "relevant"),
                               ("부대찌개 끓이는 법 알려줘", "life/cooking/bulgogi", "irrelevant"),
                               (asked.query, asked.gold[0], "relevant"),            # the hand-written set asks it
                               ("GraphRAG 커뮤니티 요약", "ai/rag/graphrag", None)])  # not labelled
    r = CliRunner().invoke(main, ["daemon", "--config", str(cfg_path), "--once", "labels"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert (res["added"], res["questions"], res["probes"]) == (2, 1, 1), res
    assert res["left_out"] == {"asks what an existing gold set asks": 1}
    kept = load_gold(out)
    assert [(q.id, q.level, q.source) for q in kept.questions] == [(f"log-{ids[0]}", "L1", "log"),
                                                                   (f"log-{ids[1]}", "probe", "log")]
    assert (tmp_path / "tune.yaml").read_bytes() == hand
    # next week: what was kept stays (a person may have edited it), a call already kept is not added again,
    # a newly labelled one is
    out.write_text(out.read_text(encoding="utf-8").replace("level: L1", "level: L0"), encoding="utf-8")
    label_calls(runs / "recall-log.sqlite", [(ids[3], "relevant")])
    res = json.loads(CliRunner().invoke(main, ["daemon", "--config", str(cfg_path), "--once", "labels"]).output)
    assert res["added"] == 1 and res["total"] == 3, res
    assert [(q.id, q.level) for q in load_gold(out).questions] == [(f"log-{ids[0]}", "L0"), (f"log-{ids[1]}", "probe"),
                                                                   (f"log-{ids[3]}", "L1")]
    res = json.loads(CliRunner().invoke(main, ["daemon", "--config", str(cfg_path), "--once", "labels"]).output)
    assert res["added"] == 0 and "do not already ask" in res["why"]
    assert len(load_gold(out).questions) == 3


# -- a real night --------------------------------------------------------------------------------------------
def test_a_night_tunes_on_every_kind_and_its_report_says_which_evidence(tmp_path, db_copy):
    cfg_path = write_config(tmp_path, db_copy, evidence="vault_questions = 60", rounds=10)
    runs = tmp_path / "runs"
    hand_set_calibrations(runs / "cost-model", units_by_embedder={FAKE_EMBEDDER: HAND_SET_UNITS["e5-small"]})
    labelled_log(runs, [("리랭커 모델 비교한 결과 어디 적어뒀지", "ai/rag/reranker", "relevant"),
                         ("부대찌개 끓이는 법 알려줘", "life/cooking/bulgogi", "irrelevant")])
    assert json.loads(CliRunner().invoke(main, ["daemon", "--config", str(cfg_path), "--once", "labels"]).output)["added"] == 2
    r = CliRunner().invoke(main, ["daemon", "--config", str(cfg_path), "--once", "sweep"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    n_hand = len(load_gold(tmp_path / "tune.yaml").answerable())
    assert res["evidence"]["by_kind"] == {"hand": {"answerable": n_hand, "probes": len(load_gold(tmp_path / "tune.yaml").probes())},
                                          "log": {"answerable": 1, "probes": 1},
                                          "vault": {"answerable": 60, "probes": 0}}, res
    assert res["evidence"]["vault_set"] == "made"
    from tuner.ledger.ledger import Ledger
    lg = Ledger(runs / "ledger.sqlite")
    try:
        info = lg.sweep(res["sweep"])
        start = lg.rounds(res["sweep"])[0]
    finally:
        lg.close()
    assert info.params.sweep.holdout == str(tmp_path / "hold.yaml")           # hand-written, untouched
    # 60 of the vault's questions cannot tell the pilot changes' gains from noise: the 30-minute window buys more
    # before round 1 (tuner/sweep/evidence_budget.py), and the night stands on the grown set
    step = res["evidence"]["step"]
    assert step["outcome"] == "grown" and step["vault_before"] == 60 and step["vault_after"] > 60, step
    assert info.params.sweep.gold == step["gold_after"]
    sources = [q.source for q in start.result.per_query]
    assert (sources.count("hand"), sources.count("log"), sources.count("vault")) == \
        (len(load_gold(tmp_path / "tune.yaml").questions), 2, step["vault_after"])
    md = (runs / "reports" / f"sweep-{res['sweep']}.md").read_text(encoding="utf-8")
    assert "## The evidence the night stood on" in md
    assert f"| hand-written | {n_hand} |" in md and "| labelled recall calls | 1 | 1 |" in md
    assert f"| from the vault's text | {step['vault_after']} | 0 |" in md
    # the report says how the window was spent: making questions, then the rounds
    assert "How the night was spent: before the rounds, " in md and "s making questions from the vault: " in md
    assert "then 10 rounds: " in md and "s budget" in md
    data = json.loads((runs / "reports" / f"sweep-{res['sweep']}.json").read_text(encoding="utf-8"))["data"]
    kept = [r for r in data["kept"]]
    assert len(data["evidence"]["kept"]) == len(kept)
    for k in data["evidence"]["kept"]:
        assert k["decided_by"] and k["why"]
