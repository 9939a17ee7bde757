"""Progress on stderr whether or not it is a terminal: plain lines in a pipe, bars that end at 100 %."""

import io

from click.testing import CliRunner

from search_core.index.indexer import index_vault
from tests.helpers import write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tuner.cli import main
from tuner.progress import StageProgress


def _vault(tmp_path, n=40):
    """n notes, each a title and two tags: more chunks and entities than one embedding batch holds."""
    return write_vault(tmp_path / "vault", {
        f"n{i:02d}.md": f"---\ntitle: 노트 {i}\ntags: [태그{i}, topic{i}]\n---\n# 노트 {i}\n\n검색 엔진 단락 {i}.\n"
        for i in range(n)})


def test_index_in_a_pipe_prints_plain_progress_lines(tmp_path):
    r = CliRunner().invoke(main, ["index", str(_vault(tmp_path)), "--db", str(tmp_path / "i.sqlite"),
                                  "--embedder", FAKE_EMBEDDER])
    assert r.exit_code == 0, r.output
    err = r.stderr.splitlines()
    for stage in ("parse", "embed", "entities"):
        assert any(x.startswith(f"{stage}: ") and x.endswith("(100%) done") for x in err), (stage, err)
    assert "\r" not in r.stderr, "a bar was drawn into a pipe"
    quiet = CliRunner().invoke(main, ["index", str(_vault(tmp_path / "q")), "--db", str(tmp_path / "q.sqlite"),
                                      "--embedder", FAKE_EMBEDDER, "--no-progress"])
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr


def test_every_bar_of_an_index_build_ends_at_100_percent(tmp_path):
    out = io.StringIO()
    bars = StageProgress(stream=out, tty=True)
    index_vault(_vault(tmp_path), tmp_path / "i.sqlite", embedder=FAKE_EMBEDDER, progress=bars)
    ends = {name: (bar.n, bar.total) for name, bar in bars.bars.items()}
    bars.close()
    assert set(ends) >= {"parse", "embed", "entities"}
    for name, (n, total) in ends.items():
        assert total and n == total, f"the {name} bar stopped at {n}/{total}"
