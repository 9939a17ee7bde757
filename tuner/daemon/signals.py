"""Signals the daemon's main loop waits for, taken in the loop's own time rather than inside a handler.

A Python signal handler runs in the main thread at whatever instruction it was at: inside a log call's write
(a second write into the same buffered file is refused, "reentrant call", and the line is lost) or inside
threading.Event.wait holding the Event's lock (Event.set from the handler then waits for that lock forever).
So the handler does nothing: the C-level handler writes the signal's number into a socket (signal.set_wakeup_fd)
whichever thread the kernel delivered it to, and `wait()` wakes on that byte at once.
"""

from __future__ import annotations

import select
import signal
import socket


class SignalInbox:
    """While open, SIGTERM/SIGINT (or the given signals) neither kill the process nor run code in a handler:
    each arrives as a byte that `wait()` returns. `close()` puts the previous handlers and wakeup fd back."""

    def __init__(self, signals=(signal.SIGTERM, signal.SIGINT)):
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        self._previous_fd = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        self._previous = {s: signal.signal(s, _ignore) for s in signals}
        self._signals = frozenset(int(s) for s in signals)

    def wait(self, timeout: float) -> int | None:
        """The first of our signals that arrived (waiting up to `timeout` seconds for one), or None."""
        ready, _, _ = select.select([self._read], [], [], timeout)
        if not ready:
            return None
        try:
            data = self._read.recv(4096)
        except BlockingIOError:
            return None
        return next((b for b in data if b in self._signals), None)

    def close(self) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(self._previous_fd)
        self._read.close()
        self._write.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _ignore(signum, frame):
    """Installed so the signal does not end the process; the wakeup byte is what the daemon reads."""
