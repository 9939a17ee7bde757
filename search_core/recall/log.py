"""The recall log: one SQLite row per recall call, retention by age, stats, and labels.

A week of these rows is what the gate threshold is recalibrated from (`autoresearch calibrate` reads
`features`, `top_scores` and `label`), so every call is written, the ones that failed too.
Standard-library sqlite3 on purpose: the log needs no extension, and a writer must never wait on one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import sys
import threading
from array import array
from collections.abc import Mapping
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.hashing import hash_json
from search_core.paths import recall_log_file
from search_core.percentiles import percentile_or_none
from search_core.validate import clean_text

DEFAULT_RETENTION_DAYS = 30.0
PRUNE_EVERY = 1000            # writes between two retention passes (a DELETE on the ts index)
LABELS = ("relevant", "irrelevant")
PRIVACY = ("text", "hash")    # "hash": the query text is never written, only its sha256
# Our users' rule to retire the feature: p95 over 400 ms or injection under 20 %.
RETIRE_P95_MS = 400.0
RETIRE_MIN_INJECTION = 0.20

COLUMNS = ("ts", "session", "profile", "query", "query_hash", "query_chars", "top_scores", "features",
           "threshold", "index_fingerprint", "config_hash", "injected", "stopped_by", "chars_injected",
           "latency_ms", "stages_ms", "error")
JSON_COLUMNS = ("top_scores", "features", "stages_ms")

SCHEMA = """
CREATE TABLE IF NOT EXISTS recall_calls (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,                 -- unix seconds when the call was made
    session TEXT NOT NULL,
    profile TEXT NOT NULL,
    query TEXT,                       -- NULL under privacy = "hash"
    query_hash TEXT NOT NULL,
    query_chars INTEGER NOT NULL,
    top_scores TEXT NOT NULL DEFAULT '[]',   -- JSON: top-3 [{note_id, score, cosine}]
    features TEXT NOT NULL DEFAULT '{}',     -- JSON: the gate's features in force (top_score, ...)
    threshold REAL,
    index_fingerprint TEXT,
    config_hash TEXT,
    injected INTEGER NOT NULL,
    stopped_by TEXT,                  -- the gate that stopped it (or "error"); NULL when injected
    chars_injected INTEGER NOT NULL DEFAULT 0,
    latency_ms REAL,                  -- NULL when a gate stopped it before any search
    stages_ms TEXT NOT NULL DEFAULT '{}',    -- JSON: queue_wait, embed, dense, ..., total
    error TEXT,
    delivered_at REAL,                -- when prefetch handed the block to the agent
    chars_delivered INTEGER,
    label TEXT,                       -- relevant | irrelevant (the labelling path)
    labelled_at REAL
);
CREATE INDEX IF NOT EXISTS recall_calls_ts ON recall_calls(ts);
"""


def index_id(fingerprint: dict) -> str:
    """What a row's `index_fingerprint` holds: a hash of the index's build fingerprint (embedder, its weights
    and prefixes, chunking), which a re-index of changed notes keeps and another model or chunking changes.
    Features logged under one index id are only comparable with features of the same one."""
    return hash_json(fingerprint, 16, ascii=True)


def query_hash(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8", "replace")).hexdigest()[:16]


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=5.0)
    conn.execute("PRAGMA journal_mode = WAL")      # stats and labels read while the server writes
    conn.execute("PRAGMA synchronous = NORMAL")    # no fsync per row: a write costs ~0.1 ms, not ~5 ms
    return conn


class RecallLog:
    """Thread-safe appender. One connection, one lock; SQLite's own lock covers other processes."""

    def __init__(self, path: str | Path | None = None, *, retention_days: float | None = DEFAULT_RETENTION_DAYS,
                 privacy: str = "text"):
        if privacy not in PRIVACY:
            raise SearchCoreError(f"unknown recall-log privacy {privacy!r}; valid: {', '.join(PRIVACY)}")
        self.path = Path(path) if path is not None else recall_log_file()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.retention_days = retention_days
        self.privacy = privacy
        self._lock = threading.Lock()
        self.reopened = 0         # times the file was found deleted or replaced under us and opened again
        self._open()
        self._writes = 0
        self.prune()

    def _open(self) -> None:
        try:
            self.conn = _connect(self.path)
            for stmt in SCHEMA.split(";\n"):
                if stmt.strip():
                    self.conn.execute(stmt)
            st = os.stat(self.path)
        except (sqlite3.DatabaseError, OSError) as e:
            raise SearchCoreError(f"{self.path} is not a usable recall log ({e}); move it away or pass "
                                  "another --log path") from None
        self._ident = (st.st_dev, st.st_ino)

    def _same_file_locked(self) -> None:
        """Reopen when the file was deleted or replaced since we opened it (`rm`, a restore, log
        rotation): SQLite would go on writing into the unlinked inode and every later row would be lost.
        One stat per write, about a microsecond."""
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._ident
        except FileNotFoundError:
            same = False
        if same:
            return
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._open()
        self.reopened += 1

    def write(self, rec: dict) -> int:
        """Append one call; returns its id. Unknown keys are a programming error, so they raise."""
        unknown = set(rec) - set(COLUMNS)
        if unknown:
            raise SearchCoreError(f"unknown recall-log field(s) {sorted(unknown)}; fields: {', '.join(COLUMNS)}")
        row = {k: clean_text(v) if isinstance(v, str) else v for k, v in rec.items()}
        q = row.get("query") or ""
        row.setdefault("query_hash", query_hash(q))
        row.setdefault("query_chars", len(q))
        if self.privacy == "hash":
            row["query"] = None
        for c in JSON_COLUMNS:
            if c in row and not isinstance(row[c], str):
                row[c] = json.dumps(row[c], ensure_ascii=False, default=float)
        row["injected"] = int(bool(row.get("injected")))
        row.setdefault("ts", time.time())
        row.setdefault("profile", "default")
        cols = [c for c in COLUMNS if c in row]
        sql = f"INSERT INTO recall_calls ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        with self._lock:
            self._same_file_locked()
            cur = self.conn.execute(sql, [row[c] for c in cols])
            self._writes += 1
            if self._writes % PRUNE_EVERY == 0:
                self._prune_locked(time.time())
            return cur.lastrowid

    def mark_delivered(self, call_id: int, chars: int, at: float | None = None) -> None:
        with self._lock:
            self._same_file_locked()
            self.conn.execute("UPDATE recall_calls SET delivered_at = ?, chars_delivered = ? WHERE id = ?",
                              (at or time.time(), chars, call_id))

    def prune(self, now: float | None = None) -> int:
        with self._lock:
            return self._prune_locked(now or time.time())

    def _prune_locked(self, now: float) -> int:
        if not self.retention_days:
            return 0
        cur = self.conn.execute("DELETE FROM recall_calls WHERE ts < ?", (now - self.retention_days * 86400,))
        return cur.rowcount

    def close(self) -> None:
        with self._lock:
            self.conn.close()


def log_search(path: str | Path, rows: list[dict]) -> None:
    """Append many finished searches at once, with a label when given: a log for tests, benchmarks and
    `calibrate` to read (the recall path writes one call at a time through RecallLog). Each row: ts,
    session, query, res (a SearchResult), label (optional: relevant | irrelevant), index_fingerprint
    (optional: the index's fingerprint key, as the recall path writes it)."""
    conn = sqlite3.connect(str(path))
    try:
        conn.executescript(SCHEMA)
        with conn:                                   # one transaction: all the rows or none
            conn.executemany(
                "INSERT INTO recall_calls (ts, session, profile, query, query_hash, query_chars, top_scores, "
                "features, threshold, index_fingerprint, injected, stopped_by, latency_ms, label) "
                "VALUES (?, ?, 'default', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(r["ts"], r["session"], r["query"], query_hash(r["query"]), len(r["query"]),
                  json.dumps([{"note_id": h.note_id, "score": h.score, "cosine": h.cosine} for h in r["res"].hits[:3]]),
                  json.dumps(r["res"].gate.features), r["res"].gate.threshold, r.get("index_fingerprint"),
                  int(r["res"].gate.inject),
                  None if r["res"].gate.inject else "gate", r["res"].timings_ms.get("total"), r.get("label"))
                 for r in rows])
    finally:
        conn.close()


FEATURE_CACHE_ROWS = 200_000     # distinct JSON texts remembered while reading a window (a bound on its memory)


class Features(Mapping):
    """A logged call's numeric gate features, read-only. The names are shared by every row logged with the same
    ones and the values sit in one array: a dict per row held 2-3 KB, 100,000 rows 300 MB."""
    __slots__ = ("_index", "_values")

    def __init__(self, index: dict, values: array):
        self._index, self._values = index, values

    def __getitem__(self, name):
        return self._values[self._index[name]]

    def get(self, name, default=None):
        i = self._index.get(name)
        return default if i is None else self._values[i]

    def __contains__(self, name) -> bool:
        return name in self._index

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    __hash__ = None


def feature_matrix(feature_rows, names) -> "np.ndarray":
    """The rows' values of `names` as a float64 matrix (a missing feature 0.0): what a gate model reads. Rows read
    from the log (Features) are gathered a block at a time, one block per set of logged names."""
    import numpy as np
    rows = list(feature_rows)
    X = np.zeros((len(rows), len(names)), dtype=np.float64)
    groups: dict[int, tuple[dict, list[int]]] = {}
    for i, f in enumerate(rows):
        if type(f) is Features:
            groups.setdefault(id(f._index), (f._index, []))[1].append(i)
        else:
            X[i] = [f.get(n, 0.0) for n in names]
    for index, members in groups.values():
        have = [(j, index[n]) for j, n in enumerate(names) if n in index]
        if not have:
            continue
        flat = array("d")
        for i in members:                      # one C-level copy a row (np.array over array objects: 9 s a week)
            flat.extend(rows[i]._values)
        block = np.frombuffer(flat, dtype=np.float64).reshape(len(members), len(index))
        cols, pos = zip(*have)
        X[np.ix_(members, list(cols))] = block[:, list(pos)]
    return X


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _RowReader:
    """Decodes the recall log's JSON columns into LoggedCall parts, sharing what repeats between rows: the same
    text decoded once (a question asked again logs the same features and hits), one name index per set of
    feature names, one dict per set of non-numeric gate fields."""

    def __init__(self):
        self.layouts: dict[tuple, tuple] = {}
        self.gates: dict[tuple, dict] = {}
        self.feature_cache: dict[str, tuple] = {}
        self.tops_cache: dict[str, tuple] = {}
        self.strings: dict[str, str] = {}

    def share(self, v):
        return v if v is None else self.strings.setdefault(v, v)

    def features(self, text) -> tuple[Features, dict]:
        digest = _digest(text) if text else None       # the text itself would hold 1.4 KB a row in memory
        hit = self.feature_cache.get(digest) if text else None
        if hit is not None:
            return hit
        raw = json.loads(text) if text else None
        if not isinstance(raw, dict):
            out = (Features({}, array("d")), {})
        else:
            values = list(raw.values())
            key = (tuple(raw), tuple(map(type, values)))
            layout = self.layouts.get(key)
            if layout is None:
                layout = self.layouts[key] = self._layout(*key)
            index, numeric, other_keys = layout
            nums = array("d", [values[i] for i in numeric])
            total = sum(nums)
            if total - total != 0.0:           # a NaN or inf (json writes them) is no evidence: left out
                finite = [(n, v) for n, v in zip(index, nums) if v - v == 0.0]
                index = {sys.intern(n): i for i, (n, _) in enumerate(finite)}
                nums = array("d", [v for _, v in finite])
            other = {k: raw[k] for k in other_keys if type(raw[k]) is not float}
            if other:
                try:
                    gkey = tuple((k, tuple(v.items()) if isinstance(v, dict) else v) for k, v in other.items())
                    other = self.gates.setdefault(gkey, other)
                except TypeError:              # an unhashable value: kept as it is, unshared
                    pass
            out = (Features(index, nums), other)
        if text and len(self.feature_cache) < FEATURE_CACHE_ROWS:
            self.feature_cache[digest] = out
        return out

    @staticmethod
    def _layout(names: tuple, types: tuple) -> tuple:
        numeric = [i for i, t in enumerate(types) if t is float or t is int]
        index = {sys.intern(names[i]): j for j, i in enumerate(numeric)}
        return index, numeric, [names[i] for i, t in enumerate(types) if not (t is float or t is int)]

    def top_scores(self, text) -> tuple:
        digest = _digest(text) if text else None
        hit = self.tops_cache.get(digest) if text else None
        if hit is not None:
            return hit
        raw = json.loads(text) if text else None
        out = tuple(t for t in raw if isinstance(t, dict)) if isinstance(raw, list) else ()
        for t in out:
            if isinstance(t.get("note_id"), str):
                t["note_id"] = self.share(t["note_id"])
        if text and len(self.tops_cache) < FEATURE_CACHE_ROWS:
            self.tops_cache[digest] = out
        return out


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One recall-log row as the gate's tools read it: `features` holds the numeric gate features (what a
    gate model reads), `gate` the rest of what the gate said (kind, band, reason)."""
    id: int
    ts: float
    session: str
    profile: str
    query: str | None            # None under privacy = "hash"
    query_hash: str
    top_scores: tuple            # the top 3 hits: {note_id, score, cosine}
    features: dict
    gate: dict
    threshold: float | None
    index_fingerprint: str | None
    injected: bool
    stopped_by: str | None
    latency_ms: float | None
    error: str | None
    label: str | None
    labelled_at: float | None

    @classmethod
    def from_row(cls, row: dict) -> "LoggedCall":
        raw = row.get("features") or {}
        # NaN or inf (json writes them) is no evidence: left out like a missing feature
        numeric = {k: float(v) for k, v in raw.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        tops = tuple(t for t in (row.get("top_scores") or ()) if isinstance(t, dict))
        return cls(int(row["id"]), float(row["ts"]), row.get("session") or "", row.get("profile") or "default",
                   row.get("query"), row.get("query_hash") or "", tops, numeric,
                   {k: v for k, v in raw.items() if k not in numeric}, row.get("threshold"),
                   row.get("index_fingerprint"), bool(row.get("injected")), row.get("stopped_by"),
                   None if row.get("latency_ms") is None else float(row["latency_ms"]), row.get("error"),
                   row.get("label"), row.get("labelled_at"))

    @property
    def top_score(self) -> float | None:
        """The top hit's cosine (the cosine gate's score)."""
        if "hit_cos" in self.features:
            return self.features["hit_cos"]
        if self.top_scores:
            v = self.top_scores[0].get("cosine", self.top_scores[0].get("score"))
            return None if v is None else float(v)
        return None

    @property
    def top_note(self) -> str | None:
        """The note the block led with (or would have, had the gate let it through)."""
        return self.top_scores[0].get("note_id") if self.top_scores else None

    @property
    def searched(self) -> bool:
        """The call reached the gate: a search ran and its features were logged (has_search)."""
        return bool(self.features) and self.error is None


LOGGED_CALL_COLUMNS = ("id", "ts", "session", "profile", "query", "query_hash", "top_scores", "features", "threshold",
                       "index_fingerprint", "injected", "stopped_by", "latency_ms", "error", "label", "labelled_at")


@dataclass(frozen=True, slots=True)
class CallHead:
    """What a recall-log row says without its JSON columns decoded: enough to fold near-duplicates and count
    what cannot be labelled (read_call_heads)."""
    id: int
    ts: float
    query: str | None
    label: str | None
    index_fingerprint: str | None
    searched: bool


# a numeric JSON value as json.dumps writes one (`"name": 0.8`, `"name": -3`); NaN and Infinity do not match
_NUMBER_GLOB = "(features GLOB '*\": [0-9]*' OR features GLOB '*\": -[0-9]*')"


def read_call_heads(path: str | Path, since_s: float | None = None, now: float | None = None) -> list[CallHead]:
    """The window's rows (oldest first) as CallHead, without decoding features or hits: whether a call searched
    (has_search) is read off the features text in SQLite; a text written otherwise than json.dumps writes it
    is decoded here to decide."""
    out = []
    with _reading(path) as conn:
        cutoff = (now or time.time()) - since_s if since_s else 0.0
        cur = conn.execute(
            f"SELECT id, ts, query, label, index_fingerprint, error IS NULL, {_NUMBER_GLOB}, "
            f"CASE WHEN error IS NULL AND NOT {_NUMBER_GLOB} AND features NOT IN ('', '{{}}') THEN features END "
            "FROM recall_calls WHERE ts >= ? ORDER BY id", (cutoff,))
        for call_id, ts, query, label, fingerprint, ok, numeric, other in cur:
            if other is not None:
                try:
                    numeric = has_search(json.loads(other), None)
                except ValueError:
                    numeric = False
            out.append(CallHead(int(call_id), float(ts), query, label, fingerprint, bool(ok and numeric)))
    return out


def read_logged_calls(path: str | Path, since_s: float | None = None, now: float | None = None, *,
                      ids=None) -> list[LoggedCall]:
    """The window's rows (oldest first) as LoggedCall: what calibrate and suggest read; with `ids`, those rows
    only (whatever their age). One row at a time, only the columns a LoggedCall holds, what repeats between
    rows shared (_RowReader): a week of 100,000 calls is read in proportion to its rows, without a second copy
    of the window as dicts."""
    reader = _RowReader()
    share = reader.share
    out = []
    with _reading(path) as conn:
        cutoff = (now or time.time()) - since_s if since_s else 0.0
        sql = f"SELECT {', '.join(LOGGED_CALL_COLUMNS)} FROM recall_calls "
        if ids is None:
            rows = conn.execute(sql + "WHERE ts >= ? ORDER BY id", (cutoff,))
        else:
            ids = sorted(set(ids))
            rows = (r for start in range(0, len(ids), 500) for r in conn.execute(
                sql + f"WHERE id IN ({', '.join('?' * len(ids[start:start + 500]))}) ORDER BY id",
                ids[start:start + 500]))
        for (call_id, ts, session, profile, query, qhash, tops, feats, threshold, fingerprint, injected, stopped,
             latency, error, label, labelled_at) in rows:
            numeric, gate = reader.features(feats)
            out.append(LoggedCall(int(call_id), float(ts), share(session or ""), share(profile or "default"), query,
                                  qhash or "", reader.top_scores(tops), numeric, gate, threshold, share(fingerprint),
                                  bool(injected), share(stopped), None if latency is None else float(latency),
                                  error, share(label), labelled_at))
    return out


def read_gate_inputs(path: str | Path, ids, names) -> tuple[list[int], "np.ndarray"]:
    """For the calls `ids`: the ids of those that reached the gate (has_search), in id order, and their values of
    `names` as a float64 matrix, what a gate model reads (feature_matrix of their LoggedCall features: a missing,
    non-numeric or non-finite value is 0.0). Only the features column is read and nothing of it is kept: scoring
    the 30,000 calls `suggest` can pick in a week of 100,000 went through LoggedCall rows, their hits decoded too,
    for the one number each needs."""
    import numpy as np
    names = list(names)
    searched, flat = [], array("d")
    ids = sorted(set(ids))
    with _reading(path) as conn:
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            for call_id, text, error in conn.execute(
                    f"SELECT id, features, error FROM recall_calls WHERE id IN ({', '.join('?' * len(part))}) "
                    "ORDER BY id", part):
                raw = json.loads(text) if text and error is None else None
                if not isinstance(raw, dict) or not any(
                        (type(v) is float or type(v) is int) and v - v == 0 for v in raw.values()):
                    continue
                searched.append(int(call_id))
                for n in names:
                    v = raw.get(n)
                    flat.append(v if (type(v) is float or type(v) is int) and v - v == 0 else 0.0)
    X = np.frombuffer(flat, dtype=np.float64).reshape(len(searched), len(names)) if searched else \
        np.zeros((0, len(names)))
    return searched, X


def read_calls(path: str | Path, since_s: float | None = None, now: float | None = None) -> list[dict]:
    """Every row of the window (oldest first) as a dict with JSON columns decoded: the one reader of the log."""
    with _reading(path) as conn:
        conn.row_factory = sqlite3.Row
        cutoff = (now or time.time()) - since_s if since_s else 0.0
        rows = [dict(r) for r in conn.execute("SELECT * FROM recall_calls WHERE ts >= ? ORDER BY id", (cutoff,))]
    for r in rows:
        for c in JSON_COLUMNS:
            r[c] = json.loads(r[c]) if r[c] else None
    return rows


def _open_existing(path: str | Path) -> sqlite3.Connection:
    p = Path(path)
    if not p.exists():
        raise SearchCoreError(f"no recall log at {p}; it is written by `autoresearch serve` / `mcp` "
                              "(or pass --log PATH)")
    conn = None
    try:      # a text file, a folder or a damaged file fails in connect or its first pragma, not here only
        conn = _connect(p)
        conn.execute("SELECT 1 FROM recall_calls LIMIT 1")
    except sqlite3.DatabaseError as e:
        if conn is not None:
            conn.close()
        raise _not_a_log(p, e) from None
    return conn


def _not_a_log(p, e) -> SearchCoreError:
    return SearchCoreError(f"{p} is not a readable recall log ({e}); pass the --log that `serve` writes, or move "
                           "the damaged file away (a new log starts empty)")


@contextmanager
def _reading(path: str | Path):
    """The log opened for reading; a page found damaged mid-read is the same clear error as a bad header."""
    conn = _open_existing(path)
    try:
        yield conn
    except sqlite3.DatabaseError as e:
        raise _not_a_log(path, e) from None
    finally:
        conn.close()


def recall_stats(path: str | Path, since_s: float | None = None, now: float | None = None) -> dict:
    """Calls, injection rate, p50/p95 of calls that searched, calls stopped per gate, mean characters
    injected, and the retirement rule's verdict."""
    cutoff = (now or time.time()) - since_s if since_s else 0.0
    with _reading(path) as conn:
        rows = conn.execute("SELECT injected, stopped_by, chars_injected, latency_ms FROM recall_calls "
                            "WHERE ts >= ?", (cutoff,)).fetchall()
    calls = len(rows)
    injected = sum(r[0] for r in rows)
    latencies = sorted(r[3] for r in rows if r[3] is not None)
    stopped: dict[str, int] = {}
    for r in rows:
        if r[1]:
            stopped[r[1]] = stopped.get(r[1], 0) + 1
    chars = [r[2] for r in rows if r[0]]
    rate = injected / calls if calls else None
    p50, p95 = percentile_or_none(latencies, 50), percentile_or_none(latencies, 95)
    reasons = []
    if p95 is not None and p95 > RETIRE_P95_MS:
        reasons.append(f"p95 {p95:.0f} ms is over {RETIRE_P95_MS:.0f} ms")
    if rate is not None and rate < RETIRE_MIN_INJECTION:
        reasons.append(f"injection rate {rate:.0%} is under {RETIRE_MIN_INJECTION:.0%}")
    verdict = "no_data" if not calls else ("retire" if reasons else "keep")
    return {
        "calls": calls,
        "injected": injected,
        "injection_rate": round(rate, 4) if rate is not None else None,
        "latency_ms": {"p50": round(p50, 2) if p50 is not None else None,
                       "p95": round(p95, 2) if p95 is not None else None},
        "stopped_by": dict(sorted(stopped.items(), key=lambda kv: -kv[1])),
        "mean_chars_injected": round(sum(chars) / len(chars), 1) if chars else 0.0,
        "retire": {"verdict": verdict, "reasons": reasons},
        "since_s": since_s,
    }


MAX_CALL_ID = 2 ** 63 - 1     # SQLite's INTEGER PRIMARY KEY; a larger id cannot name a call


def _label_text(p: Path) -> str:
    """The label file as text: UTF-8 (a BOM is dropped); UTF-16 or another encoding is a clear error."""
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise SearchCoreError(f"label file {p} does not exist") from None
    except IsADirectoryError:
        raise SearchCoreError(f"label file {p} is a folder; give a file of `ID relevant|irrelevant` lines") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SearchCoreError(f"label file {p} is UTF-16; save it as UTF-8 (e.g. `iconv -f UTF-16 -t UTF-8`)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise SearchCoreError(f"label file {p} is not UTF-8 (line {line}, byte {e.start}: {e.reason}); save it as "
                              "UTF-8 (from latin-1: `iconv -f latin1 -t UTF-8`)") from None


def parse_label_file(path: str | Path) -> list[tuple[int, str]]:
    """Lines `ID LABEL` (space, tab or comma separated; `#` starts a comment) or JSON lines
    {"id": ..., "label": ...}. Every bad line is reported at once, with its number; an id must be a whole
    number that can name a call (not 1.9, true or 1e400); the same id twice with two labels is refused,
    the same id twice with one label counts once."""
    from search_core.validate import BadValue, Where
    p = Path(path)
    text = _label_text(p)
    pairs, bad, seen = [], [], {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            if line.startswith("{"):
                obj = json.loads(line)
                call_id, label = obj["id"], obj["label"]
            else:
                call_id, label = line.replace(",", " ").replace("\t", " ").split()
            if isinstance(call_id, str) and call_id.strip().isascii() and call_id.strip().isdigit():
                call_id = int(call_id)
            call_id = Where(f"{p} line {n}").integer("id", call_id, lo=1, hi=MAX_CALL_ID)
            if not isinstance(label, str):
                raise TypeError(label)
        except (ValueError, KeyError, TypeError, BadValue, json.JSONDecodeError):
            bad.append(f"line {n}: {line[:60]!r}")
            continue
        label = label.strip()
        if call_id in seen:
            if seen[call_id][0] != label:
                bad.append(f"line {n}: call {call_id} is labelled {label!r} here and {seen[call_id][0]!r} on "
                           f"line {seen[call_id][1]}")
            continue
        seen[call_id] = (label, n)
        pairs.append((call_id, label))
    if bad:
        raise SearchCoreError(f"{p}: {len(bad)} line(s) are not `ID relevant|irrelevant` (ID a call id from 1), "
                              "or contradict another: " + "; ".join(bad[:10]))
    return pairs


def has_search(features, error) -> bool:
    """A call reached the gate: a search ran and its numeric gate features were logged (a call that timed out,
    failed or was stopped before the search has none). `features` is the decoded JSON column."""
    return error is None and isinstance(features, dict) and any(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in features.values())


def _unsearched(conn, ids: list[int]) -> list[str]:
    """Why each of `ids` that has no search cannot be labelled ("call 7: timed out (timeout: ...)")."""
    out = []
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        for call_id, feats, error, stopped in conn.execute(
                f"SELECT id, features, error, stopped_by FROM recall_calls WHERE id IN ({', '.join('?' * len(part))})",
                part):
            try:
                decoded = json.loads(feats) if feats else None
            except ValueError:
                decoded = None
            if not has_search(decoded, error):
                why = (f"it failed ({error[:80]})" if error else
                       f"it was stopped by {stopped} before any search" if stopped else "it logged no gate features")
                out.append(f"call {call_id}: {why}")
    return out


def label_calls(path: str | Path, pairs: list[tuple[int, str]], now: float | None = None) -> dict:
    """Label calls relevant/irrelevant, all or nothing: one bad label or unknown id changes no row."""
    wrong = [f"{i}: {lab!r}" for i, lab in pairs if lab not in LABELS]
    if wrong:
        raise SearchCoreError(f"unknown label(s) {', '.join(wrong[:10])}; valid labels: {', '.join(LABELS)}")
    with _reading(path) as conn:
        ids = [i for i, _ in pairs]
        known = set()
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            known |= {r[0] for r in conn.execute(
                f"SELECT id FROM recall_calls WHERE id IN ({', '.join('?' * len(part))})", part)}
        missing = [i for i in ids if i not in known]
        if missing:
            raise SearchCoreError(f"no recall call with id {', '.join(map(str, missing[:10]))} in {path}; "
                                  "`autoresearch recall-log list` shows the ids")
        unsearched = _unsearched(conn, ids)
        if unsearched:
            raise SearchCoreError(
                f"{len(unsearched)} call(s) have no search to label: " + "; ".join(unsearched[:10]) +
                ". A label is evidence about what a search found (calibrate reads the call's gate features), "
                "so only calls that searched can be labelled; nothing was labelled. "
                "`autoresearch recall-log suggest` lists calls that can be")
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("UPDATE recall_calls SET label = ?, labelled_at = ? WHERE id = ?",
                         [(lab, now or time.time(), i) for i, lab in pairs])
        conn.execute("COMMIT")
        counts = dict(conn.execute("SELECT label, COUNT(*) FROM recall_calls WHERE label IS NOT NULL "
                                   "GROUP BY label").fetchall())
    return {"labelled": len({i for i, _ in pairs}), "totals": {lab: counts.get(lab, 0) for lab in LABELS}}
