"""What a message shows of a path: the home folder as ~, nothing else changed."""

from search_core.paths import shown_path


def test_a_path_under_home_is_shown_from_tilde(monkeypatch, tmp_path):
    home = tmp_path / "alice"
    monkeypatch.setenv("HOME", str(home))
    assert shown_path(home / ".cache" / "huggingface" / "hub") == "~/.cache/huggingface/hub"
    assert shown_path(home) == "~"
    # a sibling whose name starts like the home folder's is not under it
    assert shown_path(tmp_path / "alice2" / "x") == str(tmp_path / "alice2" / "x")
    assert shown_path("/opt/models") == "/opt/models"
