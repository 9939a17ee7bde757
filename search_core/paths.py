"""Where things live by default, in one place: the runs folder and the files in it that the engine reads.

The runs folder is the argument when one is given, else $AUTORESEARCH_RUNS, else ./runs. The tuner
writes there (ledger, active config, reports); the engine reads the promoted config and writes the
recall log there, so `serve` and `search` see what the daemon promoted wherever the runs folder is.
"""

from __future__ import annotations

import os
from pathlib import Path

RUNS_ENV = "AUTORESEARCH_RUNS"
ACTIVE_CONFIG = "active.toml"          # the promoted config (tuner.promotion writes it)
RECALL_LOG = "recall-log.sqlite"       # one row per recall call (search_core.recall.log)
LEDGER = "ledger.sqlite"               # every sweep and round (tuner.ledger)
EVALS = "evals"                        # `eval` results
AB_WORK = "ab"                         # the A/B's candidate indexes and embedding cache
DEMO = "demo"                          # the `demo` run's index, ledger and reports
DEFAULT_INDEX = "default-index"        # the path of the index `index` built last: used when no --db is given
DB_ENV = "AUTORESEARCH_DB"             # the index every verb uses when --db is not given
CACHE_ENV = "AUTORESEARCH_CACHE_DIR"   # the per-user cache folder (the embedding cache), when set
CACHE_MAX_ENV = "AUTORESEARCH_CACHE_MAX_MB"   # the embedding cache's bound, in MB of vectors, when set
# 512 MB of vectors: 350,000 e5-small texts (384 floats each), about 20,000 notes at 16 chunks a note. The
# file is about 1.05x the vectors and opening it reads its header only: 500,000 e5-small texts are an 800 MB
# file, opened in under 0.05 s (BENCHMARKS.md, the embedding cache)
CACHE_MAX_MB = 512
EMBED_CACHE = "embed-cache.sqlite"     # vectors by (model fingerprint, text hash), shared by every index


def runs_dir(runs: str | Path | None = None) -> Path:
    """The runs folder: the argument, else $AUTORESEARCH_RUNS, else ./runs."""
    return Path(runs if runs is not None else os.environ.get(RUNS_ENV, "runs"))


def runs_path(name: str, runs: str | Path | None = None) -> Path:
    """A file or folder in the runs folder (LEDGER, EVALS, ...)."""
    return runs_dir(runs) / name


def active_config_file(runs: str | Path | None = None) -> Path:
    """The promoted config's path (it may not exist: then the built-in defaults apply)."""
    return runs_path(ACTIVE_CONFIG, runs)


def recall_log_file(runs: str | Path | None = None) -> Path:
    """The recall log's default path."""
    return runs_path(RECALL_LOG, runs)


def default_index_file(runs: str | Path | None = None) -> Path:
    """Where `index` records the default index (one absolute path, one line)."""
    return runs_path(DEFAULT_INDEX, runs)


def default_index(runs: str | Path | None = None) -> Path | None:
    """The index `index` recorded as the default, or None when none is recorded."""
    f = default_index_file(runs)
    try:
        text = f.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    return Path(text) if text else None


def record_default_index(db: str | Path, runs: str | Path | None = None) -> Path:
    """Make `db` the default index (written atomically); returns the file that records it."""
    from search_core.files import atomic_write_text
    f = default_index_file(runs)
    f.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(f, f"{Path(db).resolve()}\n")


def no_index_message(runs: str | Path | None = None) -> str:
    """What to do when no index is named: the three ways, in the order they are read."""
    return (f"no index given: pass --db FILE, or set {DB_ENV}=FILE, or build one with "
            f"`autoresearch index VAULT --db FILE` (the index built last is the default, recorded in "
            f"{shown_path(default_index_file(runs))})")


def cache_dir() -> Path:
    """The per-user cache folder: $AUTORESEARCH_CACHE_DIR, else $XDG_CACHE_HOME/autoresearch, else
    ~/.cache/autoresearch. Per user, not per index: every index on the machine shares what is in it."""
    own = os.environ.get(CACHE_ENV)
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "autoresearch"


def embed_cache_max_bytes() -> int:
    """The embedding cache's bound in bytes of vectors: $AUTORESEARCH_CACHE_MAX_MB, else CACHE_MAX_MB. Past it
    the texts used least recently are evicted (embedded again if a vault needs them back)."""
    from search_core import SearchCoreError
    raw = os.environ.get(CACHE_MAX_ENV)
    if raw is None or not raw.strip():
        return CACHE_MAX_MB * 2**20
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not mb > 0 or mb == float("inf"):
        raise SearchCoreError(f"{CACHE_MAX_ENV}={raw!r} is not a size; set it to the embedding cache's bound in MB "
                              f"(a number above 0, e.g. {CACHE_MAX_MB}) or unset it for {CACHE_MAX_MB} MB")
    return int(mb * 2**20)


def embed_cache_file() -> Path:
    """The embedding cache every index uses unless given another (`index --cache FILE`): a vault indexed
    into a second file, by `ab`, a sweep's model round or the daemon, embeds no text the first one did."""
    return cache_dir() / EMBED_CACHE


def shown_path(p: str | Path) -> str:
    """A path as a message shows it: under the home folder as ~/..., so a saved report names no one's home."""
    s, home = str(p), str(Path.home())
    return "~" + s[len(home):] if home not in ("", "/") and (s == home or s.startswith(home + os.sep)) else s
