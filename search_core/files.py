"""Writing files so that nobody sees half of one, and one-writer locks: one implementation of each.

atomic_write_text: a temp file beside the target, flushed to disk, then os.replace (atomic on POSIX);
a crash leaves the old file or the new one, never a mix, and the temp file is removed on failure.
atomic_replace: the same last step for a temp file written by someone else (a SQLite backup).
PidLock: an exclusive flock on a small file holding the owner's pid; the kernel drops the lock when the
process dies, so a lock file left by `kill -9` holds nothing and the next run takes it over.
FolderLock: an exclusive flock on a folder itself, which deleting a lock file inside cannot take away.
tests/architecture/test_files_mechanisms.py keeps every flock and os.replace in this file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
from pathlib import Path


def is_disk_full(e: BaseException) -> bool:
    """A full disk, a file-size or quota limit, or SQLite's word for them ("database or disk is full",
    "disk I/O error" when its journal cannot grow): the machine's fault, not the input's."""
    text = str(e).lower()
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) \
        or "disk is full" in text or "disk i/o error" in text or "file too large" in text or "no space" in text


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Replace `path` with `text` (UTF-8) in one step. The folder must exist."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return atomic_replace(tmp, path)


def atomic_replace(tmp: str | Path, dest: str | Path) -> Path:
    """Put the finished file `tmp` in `dest`'s place in one step. `tmp` must be in dest's folder (a rename
    across file systems is a copy). It is flushed to disk first, so a crash leaves the old file or the whole
    new one; `tmp` is removed if anything fails."""
    dest = Path(dest)
    try:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest


def swap_folder(staging: str | Path, dest: str | Path) -> Path:
    """Put the finished folder `staging` in `dest`'s place: the old folder is renamed aside first, the new one
    renamed in, then the old one removed; a crash leaves the old folder or the new one whole at `dest` (and at
    worst a `.NAME.old-PID` folder beside it). `staging` must be in dest's folder."""
    import shutil
    staging, dest = Path(staging), Path(dest)
    old = dest.parent / f".{dest.name}.old-{os.getpid()}"
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest


class LockBusy(Exception):
    """Another live process holds the lock; `holder` is its pid when the lock file names one."""

    def __init__(self, path: Path, holder: int | None):
        super().__init__(f"{path} is held by pid {holder if holder is not None else 'unknown'}")
        self.path, self.holder = path, holder


def _pid_in(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


class PidLock:
    """One holder at a time of `path`. remove_on_release: the lock file is deleted when released (an
    index's lock), else it stays with the last pid in it (the daemon's, read by `status`)."""

    def __init__(self, path: str | Path, *, remove_on_release: bool = False):
        self.path = Path(path)
        self.remove_on_release = remove_on_release
        self.fd: int | None = None

    def acquire(self) -> PidLock:
        """Raises LockBusy when held, OSError when the folder is not writable."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = _pid_in(fd)
                os.close(fd)
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise LockBusy(self.path, holder) from None
            try:   # the holder before us may have removed the file between our open and our lock: lock the new one
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        if self.remove_on_release:
            self.path.unlink(missing_ok=True)
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> PidLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class FolderLock:
    """One holder at a time of the folder `path` itself, not of a file in it: `rm folder/x.lock` cannot
    take it away. A folder holds no pid, so pair it with a PidLock on a file inside when the holder must
    be named (the daemon's runs folder)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.fd: int | None = None

    def acquire(self) -> FolderLock:
        """Raises LockBusy (holder None) when held, OSError when the folder cannot be opened."""
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LockBusy(self.path, None) from None
        self.fd = fd
        return self

    def replaced(self) -> bool:
        """True when the folder we hold is gone or another one now has its name."""
        try:
            return os.stat(self.path).st_ino != os.fstat(self.fd).st_ino
        except FileNotFoundError:
            return True

    def release(self) -> None:
        if self.fd is None:
            return
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _held_by_other(fd: int) -> bool:
    """Whether another open file holds an exclusive flock on fd's file (probed with a shared one)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def folder_locked(path: str | Path) -> bool:
    """Whether a FolderLock on `path` is held (False when the folder cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        return _held_by_other(fd)
    finally:
        os.close(fd)


def lock_holder(path: str | Path) -> int | None:
    """The pid holding the lock at `path` (-1 when held but the file names none), or None when free."""
    path = Path(path)
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        if _held_by_other(fd):
            holder = _pid_in(fd)
            return holder if holder is not None else -1
        return None
    finally:
        os.close(fd)
