"""search_core: index a markdown vault into one SQLite file and answer hybrid queries."""

__version__ = "0.1.0"


class SearchCoreError(Exception):
    """An error a user can act on: the message says what is wrong and what to do."""
