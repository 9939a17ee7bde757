"""Every value a user or a file hands us is checked here, where it enters: one set of rules for TOML
tables (`[search]`/active.toml, `[recall]`, `[daemon]`, `[sweep]`), gate files, label files and HTTP/MCP
bodies. A bad value is refused with one message that names the place (file or body), the key, what
was given and what is allowed; nothing bad reaches a search.

    v = Where("runs/active.toml", "[search]")
    top_k = v.integer("top_k", raw, lo=1, hi=100)
    v.known_keys(raw, ("top_k", ...))          # unknown key: "did you mean 'top_k'?"

Text: a lone UTF-16 surrogate (what a JavaScript host sends when it cuts a string inside an emoji, or
what a non-UTF-8 argv byte becomes) cannot be encoded to UTF-8 and broke SQLite and JSON writes far
from where it came in; clean_text turns each into U+FFFD at the door.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass

from search_core import SearchCoreError


class BadValue(SearchCoreError):
    """A value refused where it entered; the message names where, the key and what is allowed."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a valid pair never survives json.loads or
    Python's decoders as two code points, so any surrogate left in a str is a lone one)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def did_you_mean(name: str, valid) -> str:
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_field(given: dict, fields, where: str) -> str | None:
    """The refusal for the first key of a request (an HTTP body, an MCP tool's arguments) that is not one of
    `fields`, or None when every key is known. A misspelt field is otherwise dropped without a word: a
    "sesion_id" searched under an empty session and delivered the block to nobody."""
    fields = list(fields)
    for key in given:
        if key not in fields:
            return f'{where}: unknown field "{key}"{did_you_mean(key, fields)}; fields: {", ".join(fields)}'
    return None


def _kind(v) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table", type(None): "nothing"}.get(type(v), type(v).__name__)


def _range(lo, hi, lo_open=False, hi_open=False) -> str:
    if lo is not None and hi is not None:
        if not lo_open and not hi_open:
            return f"from {lo} to {hi}"
        return f"{'over' if lo_open else 'at least'} {lo} and {'under' if hi_open else 'at most'} {hi}"
    if lo is not None:
        return f"over {lo}" if lo_open else f"{lo} or more"
    if hi is not None:
        return f"under {hi}" if hi_open else f"at most {hi}"
    return "any"


@dataclass(frozen=True)
class Where:
    """The place values come from: a file (and table) or a request body; every message starts with it."""
    source: str
    table: str = ""

    def _name(self, key: str) -> str:
        return f"{self.source}: {self.table + ' ' if self.table else ''}{key}"

    def fail(self, key: str, given, allowed: str) -> BadValue:
        shown = repr(given)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return BadValue(f"{self._name(key)} = {shown} ({_kind(given)}) is not allowed; it must be {allowed}")

    def known_keys(self, given: dict, valid) -> None:
        valid = list(valid)
        unknown = [k for k in given if k not in valid]
        if unknown:
            hints = "; ".join(f"{k!r}{did_you_mean(k, valid)}" for k in unknown)
            raise BadValue(f"{self.source}: unknown key(s) in {self.table or 'it'}: {hints}; valid keys: "
                           f"{', '.join(valid)}")

    def table_of(self, given, key: str) -> dict:
        """`given` when it is a table; `key` names the table itself (so the message has no table prefix)."""
        if not isinstance(given, dict):
            raise Where(self.source).fail(key, given, "a table ([name] in TOML, an object in JSON)")
        return given

    def integer(self, key: str, v, *, lo: int | None = None, hi: int | None = None) -> int:
        """An int (not a bool, not 1.9, not "5", not 1e400)."""
        allowed = f"an integer {_range(lo, hi)}"
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(key, v, allowed)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise self.fail(key, v, allowed)
        return v

    def number(self, key: str, v, *, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False, hi_open: bool = False) -> float:
        """A finite int or float (not a bool, not nan or inf, not a string)."""
        allowed = f"a finite number {_range(lo, hi, lo_open, hi_open)}"
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(key, v, allowed)
        try:
            f = float(v)
        except OverflowError:
            raise self.fail(key, v, allowed) from None
        if not math.isfinite(f) or (lo is not None and (f <= lo if lo_open else f < lo)) or \
                (hi is not None and (f >= hi if hi_open else f > hi)):
            raise self.fail(key, v, allowed)
        return f

    def boolean(self, key: str, v) -> bool:
        if not isinstance(v, bool):
            raise self.fail(key, v, "true or false (a TOML/JSON boolean, not a string)")
        return v

    def string(self, key: str, v, *, choices=None, max_chars: int | None = None, min_chars: int = 0) -> str:
        if not isinstance(v, str):
            raise self.fail(key, v, "a string" + (f": one of {', '.join(choices)}" if choices else ""))
        if choices is not None and v not in choices:
            raise BadValue(f"{self._name(key)} = {v!r} is not one of {', '.join(choices)}{did_you_mean(v, choices)}")
        if max_chars is not None and len(v) > max_chars or len(v) < min_chars:
            raise BadValue(f"{self._name(key)} has {len(v):,} characters; it must have "
                           f"{_range(min_chars, max_chars)}")
        return clean_text(v)

    def model_name(self, key: str, v) -> str:
        """An embedder or reranker name the model table knows (or one of its forms: a URL, st:/ce:, a hub
        id); resolved without loading the model, so a misspelt name fails here, not at the first search."""
        from search_core.models import check_model_name
        name = self.string(key, v, min_chars=1, max_chars=200)
        try:
            check_model_name("embedder" if key == "embedder" else "reranker", name)
        except SearchCoreError as e:
            raise BadValue(f"{self._name(key)}: {e}") from None
        return name

    def string_list(self, key: str, v) -> tuple[str, ...]:
        """A list of strings; a bare string is refused (it would become a list of its characters)."""
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            raise self.fail(key, v, 'a list of strings, e.g. ["index", "*/index"]')
        return tuple(clean_text(x) for x in v)

    def regex_list(self, key: str, v) -> tuple[str, ...]:
        pats = self.string_list(key, v)
        for p in pats:
            try:
                re.compile(p)
            except re.error as e:
                raise BadValue(f"{self._name(key)}: {p!r} is not a valid regular expression ({e})") from None
        return pats


def finite_numbers(where: str, obj, path: str = "") -> None:
    """Every number in a JSON-like tree is finite (a NaN weight makes every probability NaN)."""
    if isinstance(obj, bool):
        return
    if isinstance(obj, float) and not math.isfinite(obj):
        raise BadValue(f"{where}: {path or 'a value'} is {obj}; every number must be finite")
    if isinstance(obj, dict):
        for k, v in obj.items():
            finite_numbers(where, v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            finite_numbers(where, v, f"{path}[{i}]")


# -- the search config (--config, active.toml) ------------------------------------------------------------
MAX_TOP_K = 100          # the HTTP /search and MCP cap too
MAX_PAIR_TERMS = 10      # each added term is a few more query words: past 10 they outweigh the question
MAX_DEPTH = 10_000       # candidates per channel; the largest vault we know has 18,315 chunks


def check_search_values(data: dict, where: Where) -> dict:
    """The [search] keys of a config file, checked and normalised (a tuple for nav_globs). Unknown keys
    are refused by SearchConfig.replace, which names the valid ones."""
    out = dict(data)
    for k in ("w_dense", "w_sparse", "w_decomposed", "w_entity", "w_ngram", "w_ngram_lead", "w_dense_cross", "w_dense_lead",
              "community_boost"):
        if k in data:
            out[k] = where.number(k, data[k], lo=0.0)
    if "rrf_k" in data:
        out["rrf_k"] = where.integer("rrf_k", data["rrf_k"], lo=0, hi=100_000)
    if "depth" in data:
        out["depth"] = where.integer("depth", data["depth"], lo=1, hi=MAX_DEPTH)
    if "rerank_depth" in data:
        out["rerank_depth"] = where.integer("rerank_depth", data["rerank_depth"], lo=0, hi=MAX_DEPTH)
    if "top_k" in data:
        out["top_k"] = where.integer("top_k", data["top_k"], lo=1, hi=MAX_TOP_K)
    if "threshold" in data:
        out["threshold"] = where.number("threshold", data["threshold"], lo=-1.0, hi=1.0)
    if "gate_threshold" in data:
        out["gate_threshold"] = where.number("gate_threshold", data["gate_threshold"], lo=0.0, hi=1.0)
    if "fast_path_margin" in data:
        out["fast_path_margin"] = where.number("fast_path_margin", data["fast_path_margin"], lo=0.0, hi=1.0)
    if data.get("ngram_lead_margin") is not None:
        out["ngram_lead_margin"] = where.number("ngram_lead_margin", data["ngram_lead_margin"], lo=0.0, hi=1.0)
    if data.get("dense_lead_cos") is not None:
        out["dense_lead_cos"] = where.number("dense_lead_cos", data["dense_lead_cos"], lo=0.0, hi=2.0)
    if data.get("cross_lead_margin") is not None:
        out["cross_lead_margin"] = where.number("cross_lead_margin", data["cross_lead_margin"], lo=0.0, hi=1.0)
    if "pair_terms" in data:
        out["pair_terms"] = where.integer("pair_terms", data["pair_terms"], lo=0, hi=MAX_PAIR_TERMS)
    for k in ("embedder", "reranker"):
        if k in data:
            out[k] = where.model_name(k, data[k])
    if "keyword_index" in data:
        from search_core.search.channels import KEYWORD_INDEXES
        if data["keyword_index"] not in KEYWORD_INDEXES:
            raise BadValue(f"{where.source}: keyword_index = {data['keyword_index']!r} is not one of "
                           f"{', '.join(map(repr, KEYWORD_INDEXES))}")
    if "exclude_nav" in data:
        out["exclude_nav"] = where.boolean("exclude_nav", data["exclude_nav"])
    if "nav_globs" in data:
        out["nav_globs"] = where.string_list("nav_globs", data["nav_globs"])
    weights = [out.get(k) for k in ("w_dense", "w_sparse", "w_decomposed", "w_entity")]
    if all(w is not None for w in weights) and sum(weights) == 0:
        raise BadValue(f"{where.source}: every channel weight is 0; at least one of w_dense, w_sparse, "
                       "w_decomposed, w_entity must be over 0")
    return out
