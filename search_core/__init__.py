"""search_core: index a markdown vault into one SQLite file and answer hybrid queries."""

__version__ = "0.1.0"


class SearchCoreError(Exception):
    """An error a user can act on: the message says what is wrong and what to do."""


class StopRequested(KeyboardInterrupt):
    """A long run was asked to stop (the daemon got SIGTERM) and stopped between two batches. A kind of
    KeyboardInterrupt, so every layer cleans up as it does for Ctrl-C (a full build's temp file removed,
    an update's transaction never begun, a sweep marked interrupted and resumable) and none records it as
    a crash."""
