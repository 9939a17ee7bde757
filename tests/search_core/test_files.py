import pytest

from search_core.files import FolderLock, LockBusy, atomic_replace, atomic_write_text, folder_locked


def test_atomic_replace_puts_the_new_file_in_place_and_leaves_no_temp(tmp_path):
    dest = atomic_write_text(tmp_path / "a.json", "old")
    tmp = tmp_path / ".a.json.new"
    tmp.write_text("new")
    assert atomic_replace(tmp, dest) == dest
    assert dest.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_atomic_replace_that_fails_keeps_the_old_file_and_removes_the_temp(tmp_path):
    dest = tmp_path / "d"
    (dest / "inside").mkdir(parents=True)          # a non-empty folder cannot be replaced by a file
    tmp = tmp_path / ".d.new"
    tmp.write_text("new")
    with pytest.raises(OSError):
        atomic_replace(tmp, dest)
    assert not tmp.exists() and (dest / "inside").is_dir()


def test_folder_lock_keeps_a_second_holder_out_until_released(tmp_path):
    first = FolderLock(tmp_path).acquire()
    assert folder_locked(tmp_path)
    with pytest.raises(LockBusy) as e:              # flock is per open file: a second open in one process is kept out
        FolderLock(tmp_path).acquire()
    assert e.value.holder is None and str(tmp_path) in str(e.value)
    assert not first.replaced()
    first.release()
    assert not folder_locked(tmp_path)
    with FolderLock(tmp_path) as again:
        assert again.fd is not None
    assert not folder_locked(tmp_path / "missing")


def test_folder_lock_sees_its_folder_replaced(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    lock = FolderLock(runs).acquire()
    try:
        runs.rename(tmp_path / "runs-old")
        assert lock.replaced()                      # gone
        runs.mkdir()
        assert lock.replaced()                      # another folder under its name
    finally:
        lock.release()


def test_swap_folder_puts_the_new_folder_whole_in_the_old_ones_place(tmp_path):
    from search_core.files import swap_folder
    dest, staging = tmp_path / "set", tmp_path / "set.tmp"
    staging.mkdir()
    (staging / "a.txt").write_text("one")
    assert swap_folder(staging, dest) == dest and (dest / "a.txt").read_text() == "one"   # nothing there before
    staging.mkdir()
    (staging / "b.txt").write_text("two")
    swap_folder(staging, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["b.txt"]                  # the old folder's files are gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]                 # nor is anything left aside
