"""The sample daemon config, copied and filled in as the README says, loads and uses the index one has."""

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from search_core.index.indexer import index_vault
from search_core.paths import record_default_index
from tests.helpers import ROOT, SMALL_VAULT, write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tuner.cli import main
from tuner.daemon.config import DaemonConfigError, load_daemon_config, sample_config_text
from tuner.data.bundled import default_space, demo_gold, demo_vault

SAMPLE = ROOT / "experiments" / "daemon.toml"


def keys_the_readme_names() -> list[str]:
    """The keys the README's daemon section tells a user to set after copying the sample."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("# then in my-daemon.toml set "))
    return re.findall(r"\b(vault|db|gold|holdout|timezone|runs|space|split)\b", line.split("(", 1)[0])


def filled_in(tmp_path, values: dict) -> str:
    text = sample_config_text()         # what `autoresearch daemon --sample` prints
    for key in keys_the_readme_names():
        text, n = re.subn(rf"(?m)^{key} = .*$", f'{key} = "{values[key]}"', text)
        assert n == 1, f"the sample has no line `{key} = ...` to set"
    return text


def test_the_sample_filled_in_as_the_readme_says_loads_and_uses_the_index_one_built(tmp_path):
    assert keys_the_readme_names() == ["vault", "gold", "holdout", "timezone", "runs"]
    vault = write_vault(tmp_path / "notes", SMALL_VAULT)
    mine = tmp_path / "my-index" / "index.sqlite"
    index_vault(vault, mine, embedder=FAKE_EMBEDDER)
    record_default_index(mine)                      # what `autoresearch index` does
    gold = tmp_path / "gold.yaml"
    shutil.copy(ROOT / "experiments" / "gold" / "demo-tune.yaml", gold)
    conf = tmp_path / "elsewhere" / "my-daemon.toml"      # copied away from experiments/: no bundled file beside it
    conf.parent.mkdir()
    conf.write_text(filled_in(tmp_path, {"vault": vault, "gold": gold, "holdout": gold, "timezone": "UTC",
                                         "runs": tmp_path / "daemon-runs"}), encoding="utf-8")
    cfg = load_daemon_config(conf)
    assert cfg.sweep.db == str(mine), "the daemon would build (and embed) a second index of the vault"
    assert cfg.sweep.space == str(default_space())
    assert {j.name for j in cfg.jobs} >= {"index", "sweep", "report"}
    # labelled calls are kept beside the user's gold set, not in a folder named after the demo
    assert cfg.evidence.from_log_path(cfg.sweep.gold) == tmp_path / "gold.from-log.yaml"


def test_the_sample_as_shipped_keeps_the_demos_labelled_calls_in_its_runs_folder():
    cfg = load_daemon_config(SAMPLE)
    assert cfg.evidence.from_log_path(cfg.sweep.gold).resolve() == (SAMPLE.parent.parent / "runs" / "daemon-demo" /
                                                                       "demo-tune.from-log.yaml")


def test_an_index_of_another_vault_is_never_taken(tmp_path, monkeypatch):
    other = write_vault(tmp_path / "other", SMALL_VAULT)
    theirs = tmp_path / "other-index.sqlite"
    index_vault(other, theirs, embedder=FAKE_EMBEDDER)
    monkeypatch.setenv("AUTORESEARCH_DB", str(theirs))
    vault = write_vault(tmp_path / "notes", SMALL_VAULT)
    conf = tmp_path / "my-daemon.toml"
    gold = ROOT / "experiments" / "gold" / "demo-tune.yaml"
    conf.write_text(filled_in(tmp_path, {"vault": vault, "gold": gold, "holdout": gold, "timezone": "UTC",
                                         "runs": tmp_path / "daemon-runs"}), encoding="utf-8")
    cfg = load_daemon_config(conf)
    assert cfg.sweep.db == str(tmp_path / "daemon-runs" / "index.sqlite")


def test_the_sample_documents_every_key_it_defaults():
    text = SAMPLE.read_text(encoding="utf-8")
    for key in ("db", "space", "ledger"):
        assert re.search(rf"(?m)^# {key} = .*default", text), f"the sample does not say what {key} defaults to"


def test_a_split_set_beside_the_samples_holdout_line_is_refused_naming_both(tmp_path):
    """The README says holdout or split; a user who adds `split = 0.5` and leaves the sample's holdout line is
    told to keep one, not that the demo's holdout file is missing (nor is split ignored when it exists)."""
    vault = write_vault(tmp_path / "notes", SMALL_VAULT)
    gold = tmp_path / "gold.yaml"
    shutil.copy(ROOT / "experiments" / "gold" / "demo-tune.yaml", gold)
    for holdout in ("gold/demo-holdout.yaml", str(gold)):        # the sample's line as shipped; a file that exists
        text = filled_in(tmp_path, {"vault": vault, "gold": gold, "holdout": holdout, "timezone": "UTC",
                                    "runs": tmp_path / "daemon-runs"})
        conf = tmp_path / "my-daemon.toml"
        conf.write_text(text.replace("[sweep]\n", "[sweep]\nsplit = 0.5\n", 1), encoding="utf-8")
        with pytest.raises(DaemonConfigError) as e:
            load_daemon_config(conf)
        assert "sets both holdout" in str(e.value) and "keep one" in str(e.value), str(e.value)
        assert "does not exist" not in str(e.value)


def test_the_printed_sample_saved_in_any_folder_runs_the_demo_as_it_is(tmp_path):
    """Outside a checkout there is no experiments/ to copy from: `daemon --sample > my-daemon.toml` gives a copy
    whose demo files are found from wherever it is saved, its runs folder beside it."""
    conf = tmp_path / "anywhere" / "my-daemon.toml"
    conf.parent.mkdir()
    result = CliRunner().invoke(main, ["daemon", "--sample"])
    assert result.exit_code == 0, result.output
    assert result.output == sample_config_text()
    conf.write_text(result.output, encoding="utf-8")
    cfg = load_daemon_config(conf)
    assert Path(cfg.sweep.vault) == demo_vault() and Path(cfg.sweep.gold) == demo_gold("demo-tune.yaml")
    assert Path(cfg.runs) == conf.parent / "runs" / "daemon-demo"
    assert cfg.evidence.from_log_path(cfg.sweep.gold) == conf.parent / "runs" / "daemon-demo" / "demo-tune.from-log.yaml"


def test_the_daemon_without_a_config_names_the_way_to_get_one():
    result = CliRunner().invoke(main, ["daemon"])
    assert result.exit_code == 2
    assert "Missing option '--config'" in result.output and "autoresearch daemon --sample > my-daemon.toml" in result.output


def test_the_docs_a_new_user_reads_give_the_nights_default_number_of_vault_questions():
    from tuner.daemon.config import DEFAULT_VAULT_QUESTIONS
    for doc in ("README.md", "docs/first-gold-set.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        said = re.findall(r"plus up to ([\d,]+) questions `gold make`", text)
        assert said and all(int(n.replace(",", "")) == DEFAULT_VAULT_QUESTIONS for n in said), (doc, said)
