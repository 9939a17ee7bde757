"""Whether a process still holds its SQLite locks on a live file after some code of ours looked at it.

POSIX record locks belong to a process and a file, not to a descriptor: closing any descriptor of the file
(a raw open() to read its header, a second SQLite library's connection) drops every lock the process holds
on it. Another process that then closes its own connection believes itself the last one, checkpoints and
unlinks the -wal and -shm under our live connections. So the test is what the user would see: another
process opens and closes the file, and the -wal must still be there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_OPEN_AND_CLOSE = ("import sqlean, sys; c = sqlean.connect(sys.argv[1]); "
                   "c.execute('SELECT count(*) FROM sqlite_master').fetchone(); c.close()")


def another_process_opens_and_closes(db: str | Path) -> None:
    subprocess.run([sys.executable, "-c", _OPEN_AND_CLOSE, str(db)], check=True, timeout=120)


def wal_of(db: str | Path) -> Path:
    return Path(str(db) + "-wal")


def assert_look_keeps_the_locks(db: str | Path, look) -> None:
    """Hold a connection to `db` (WAL mode) in this process, call look(db), then let another process open
    and close the file: its -wal must survive, as it does when look is left out."""
    from search_core.index.store import connect
    holder = connect(db)
    try:
        holder.execute("SELECT count(*) FROM sqlite_master").fetchone()
        assert wal_of(db).exists(), "a WAL-mode connection keeps a -wal beside the file"
        look(db)
        another_process_opens_and_closes(db)
        assert wal_of(db).exists(), (f"{getattr(look, '__name__', look)} dropped this process's SQLite locks on {db}: "
                                     "another process's close unlinked the -wal under a live connection")
        holder.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        holder.close()
