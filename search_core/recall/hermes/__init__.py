"""The autoresearch memory provider for the Hermes agent (a Hermes MemoryProvider), standard library only.

Hermes runs in its own interpreter, which has none of our dependencies, so this folder talks to
`autoresearch serve` on loopback and imports nothing but the standard library (and Hermes itself,
when it is there). `autoresearch hermes install` copies it, with the stdlib client beside it, to
$HERMES_HOME/plugins/autoresearch/ and writes config.json there; Hermes loads it when
`memory.provider` is `autoresearch` and calls register_memory_provider through register(ctx).

    end of turn N     queue_prefetch(message, session_id)  -> POST /queue: returns at once, the server searches
    start of turn N+1 prefetch(message)                    -> POST /prefetch: the block of turn N, or ""

What it guarantees Hermes:
- prefetch returns within the timeout (default 150 ms; Hermes itself would wait 8 s) and never raises:
  a dead server, a timeout or a bad answer all give "";
- prefetch gets an empty session id from Hermes 0.19.0, so the id from initialize() / on_session_switch()
  is used instead; queue_prefetch gets the real one;
- Hermes replays earlier turns' blocks from its session database, so a note given once in a session is
  not given again (the server is told which notes to leave out);
- Hermes runs queue_prefetch and prefetch on its own threads, which do not carry the caller's
  contextvars (a profile chosen through Hermes's ContextVar, for one): the context captured in
  initialize() is the one our calls run in;
- AUTORESEARCH_RECALL=0 (or "enabled": false in config.json) turns the recall off without a restart;
- with "wrap": "holographic" it holds Hermes's bundled local provider as a member (Hermes allows one
  external provider): its tools, prompt block and lifecycle hooks pass through, and the two recall
  calls share one character budget;
- the text it returns is plain; Hermes adds its own <memory-context> fence and system note (fence
  markers found inside a note are defused, so Hermes never strips a note's text as a fence).
"""

from __future__ import annotations

import contextvars
import inspect
import json
import os
import re
import threading
import time
from pathlib import Path

try:                                   # installed: the client copied beside this file
    from . import client as _client
except ImportError:                    # in the repository: the package's own stdlib client
    from .. import client as _client

try:                                   # inside Hermes: its ABC, so isinstance checks hold
    from agent.memory_provider import MemoryProvider as _Base
except ImportError:                    # anywhere else (our tests, the benchmark): a plain object
    _Base = object

__version__ = "0.1.0"
NAME = "autoresearch"
CONFIG_FILE = "config.json"
LOG_FILE = "autoresearch-provider.jsonl"   # under $HERMES_HOME/logs/, read by `autoresearch hermes status`
LOG_MAX_BYTES = 256 * 1024                 # ~1,000 calls; past this the older half is dropped
RECALL_ENV = "AUTORESEARCH_RECALL"         # the server's kill switch, read here too: "0" turns recall off
TOKEN_ENV = "AUTORESEARCH_TOKEN"
DEFAULTS = {
    "server": _client.DEFAULT_URL,
    "token": None,
    "timeout_ms": 150,       # a loopback round trip is ~1 ms; 150 ms is what a turn can lose unnoticed
    "enabled": True,
    "char_budget": 1200,     # for everything this provider returns in a turn, a wrapped provider included
    "wrap": "",              # "holographic": hold Hermes's bundled local provider and delegate to it
}
WRAPPABLE = {"holographic": ("plugins.memory.holographic", "HolographicMemoryProvider")}
# Hermes strips these from a provider's text (and everything between two fences): defused, not removed.
_FENCE_RE = re.compile(r"<(/?)\s*(memory-context)\s*>", re.IGNORECASE)
_NOTE_RE = re.compile(r"\[(\s*System note\s*:)", re.IGNORECASE)


def load_config(plugin_dir: str | Path) -> tuple[dict, str | None]:
    """config.json onto DEFAULTS; (config, the error when the file is unreadable, else None)."""
    cfg, error = dict(DEFAULTS), None
    path = Path(plugin_dir) / CONFIG_FILE
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            unknown = set(data) - set(DEFAULTS)
            if unknown:
                raise ValueError(f"unknown key(s) {sorted(unknown)}; valid keys: {', '.join(DEFAULTS)}")
            cfg.update(data)
        except (OSError, ValueError) as e:
            error = f"{path}: {e}; using the defaults"
    cfg["token"] = cfg["token"] or os.environ.get(TOKEN_ENV) or None
    return cfg, error


def kill_switch_on(cfg: dict) -> bool:
    off = os.environ.get(RECALL_ENV, "1").strip().lower() in ("0", "false", "off", "no")
    return off or not cfg.get("enabled", True)


def defuse(text: str) -> str:
    return _NOTE_RE.sub(r"(\1", _FENCE_RE.sub(r"(\1\2)", text))


def profile_of(home: str | Path | None) -> str:
    """Hermes keeps a profile in $HERMES_HOME/profiles/<name>/ (hermes -p NAME); any other home is "default"."""
    if not home:
        return "default"
    p = Path(home)
    return p.name if p.parent.name == "profiles" and p.name else "default"


def _call_with(fn, *args, **kwargs):
    """Call fn with the keyword arguments its signature accepts (Hermes's hooks grew keywords over time)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn(*args, **kwargs)
    if not any(p.kind == p.VAR_KEYWORD for p in params):
        names = {p.name for p in params}
        kwargs = {k: v for k, v in kwargs.items() if k in names}
    return fn(*args, **kwargs)


def _trim_lines(text: str, budget: int) -> str:
    """Whole lines of `text` up to `budget` characters; "" when no line after the first (a header) fits."""
    if len(text) <= budget:
        return text
    out: list[str] = []
    for line in text.splitlines():
        if len("\n".join([*out, line])) > budget:
            break
        out.append(line)
    return "\n".join(out) if len(out) > 1 else ""


class AutoresearchMemoryProvider(_Base):
    """Vault recall from `autoresearch serve`, one turn late, for Hermes's single external provider slot."""

    def __init__(self, config: dict | None = None, plugin_dir: str | Path | None = None):
        self._plugin_dir = Path(plugin_dir) if plugin_dir else Path(__file__).resolve().parent
        if config is None:
            self._cfg, self.config_error = load_config(self._plugin_dir)
        else:
            self._cfg, self.config_error = {**DEFAULTS, **config}, None
        self._client = _client.RecallClient(self._cfg["server"], self._cfg["token"],
                                            timeout=float(self._cfg["timeout_ms"]) / 1000)
        self._session_id = ""
        self._hermes_home = ""
        self._ctx: contextvars.Context | None = None
        self._given: dict[str, set[str]] = {}      # session id -> note ids already injected
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self.inner = None
        self.inner_error: str | None = None
        wrap = self._cfg.get("wrap") or ""
        if wrap:   # built now: Hermes reads the tool schemas when it registers us, before initialize()
            try:
                module, cls = WRAPPABLE[wrap]
                self.inner = getattr(__import__(module, fromlist=[cls]), cls)()
            except KeyError:
                self.inner_error = f"cannot wrap {wrap!r}; wrappable: {', '.join(WRAPPABLE)}"
            except Exception as e:
                self.inner_error = f"cannot load {wrap!r}: {type(e).__name__}: {e}"

    # -- identity --------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return NAME

    def is_available(self) -> bool:
        # No network here (Hermes's rule): a server that is down costs recall, never the session.
        return True

    # -- lifecycle -------------------------------------------------------------------------------------
    def initialize(self, session_id: str, **kwargs) -> None:
        self._session_id = session_id or ""
        self._hermes_home = str(kwargs.get("hermes_home") or "")
        self._ctx = contextvars.copy_context()
        self._log({"call": "initialize", "session": self._session_id, "profile": self._profile(),
                   "ok": self.config_error is None and self.inner_error is None,
                   "error": self.config_error or self.inner_error, "wrap": self._cfg.get("wrap") or None,
                   "version": __version__})
        self._inner("initialize", session_id, **kwargs)

    def on_session_switch(self, new_session_id: str, *, parent_session_id: str = "", reset: bool = False,
                          **kwargs) -> None:
        if new_session_id:
            self._session_id = new_session_id
        self._inner("on_session_switch", new_session_id, parent_session_id=parent_session_id, reset=reset,
                    **kwargs)

    def shutdown(self) -> None:
        self._inner("shutdown")

    # -- the two recall calls --------------------------------------------------------------------------
    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Start the server's background search for the next turn; returns after one loopback POST."""
        try:
            self._in_context(self._queue, query, session_id or self._session_id)
        except Exception:
            pass
        self._inner("queue_prefetch", query, session_id=session_id)

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """The block queued at the previous turn (and the wrapped provider's, within one budget), or ""."""
        try:
            return self._in_context(self._prefetch, query, session_id, session_id or self._session_id)
        except Exception:
            return ""

    def _queue(self, query: str, sid: str) -> None:
        t0 = time.perf_counter()
        profile = self._profile()
        if kill_switch_on(self._cfg):
            self._log({"call": "queue", "session": sid, "profile": profile, "ok": True, "stopped_by": "kill_switch",
                       "ms": _ms(t0)})
            return
        queued = self._client.queue(query if isinstance(query, str) else "", sid, profile)
        self._log({"call": "queue", "session": sid, "profile": profile, "ok": self._client.last_error is None,
                   "queued": queued, "error": self._client.last_error, "ms": _ms(t0)})

    def _prefetch(self, query: str, given_sid: str, sid: str) -> str:
        t0 = time.perf_counter()
        budget = int(self._cfg["char_budget"])
        local = ""
        if self.inner is not None:
            try:
                local = self.inner.prefetch(query, session_id=given_sid) or ""
            except Exception:
                local = ""
            local = _trim_lines(local.strip(), budget // 2)     # half the budget when both have something
        profile = self._profile()
        if kill_switch_on(self._cfg):
            self._log({"call": "prefetch", "session": sid, "profile": profile, "ok": True,
                       "stopped_by": "kill_switch", "chars": 0, "ms": _ms(t0)})
            return local
        room = max(1, budget - (len(local) + 2 if local else 0))
        with self._lock:
            given = sorted(self._given.get(sid, ()))
        res = self._client.prefetch_result(sid, exclude_notes=given, char_budget=room, profile=profile)
        block = res.get("block") if isinstance(res, dict) else ""
        block = defuse(block) if isinstance(block, str) else ""
        notes = [n for n in (res.get("notes") or []) if isinstance(n, str)] if block else []
        if notes:
            with self._lock:
                self._given.setdefault(sid, set()).update(notes)
        if len(block) > room:     # a server that ignored char_budget (an older one): never over the budget
            block = _trim_lines(block, room)
        self._log({"call": "prefetch", "session": sid, "profile": profile, "ok": self._client.last_error is None,
                   "stopped_by": res.get("stopped_by"), "chars": len(block), "notes": notes,
                   "error": self._client.last_error, "ms": _ms(t0)})
        return "\n\n".join(p for p in (block, local) if p)

    # -- delegated to the wrapped provider -------------------------------------------------------------
    def system_prompt_block(self) -> str:
        return self._inner("system_prompt_block") or ""

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "", messages=None) -> None:
        self._inner("sync_turn", user_content, assistant_content, session_id=session_id, messages=messages)

    def get_tool_schemas(self) -> list:
        return list(self._inner("get_tool_schemas") or [])

    def handle_tool_call(self, tool_name: str, args: dict, **kwargs) -> str:
        if self.inner is None:
            return json.dumps({"error": f"autoresearch has no tool {tool_name!r}"})
        return self.inner.handle_tool_call(tool_name, args, **kwargs)    # Hermes turns a raise into a tool error

    def on_turn_start(self, turn_number: int, message: str, **kwargs) -> None:
        self._inner("on_turn_start", turn_number, message, **kwargs)

    def on_session_end(self, messages) -> None:
        self._inner("on_session_end", messages)

    def on_pre_compress(self, messages) -> str:
        return self._inner("on_pre_compress", messages) or ""

    def on_memory_write(self, action: str, target: str, content: str, metadata=None) -> None:
        self._inner("on_memory_write", action, target, content, metadata=metadata)

    def on_delegation(self, task: str, result: str, *, child_session_id: str = "", **kwargs) -> None:
        self._inner("on_delegation", task, result, child_session_id=child_session_id, **kwargs)

    def get_config_schema(self) -> list:
        return list(self._inner("get_config_schema") or [])

    def save_config(self, values: dict, hermes_home: str) -> None:
        self._inner("save_config", values, hermes_home)

    def backup_paths(self) -> list:
        return list(self._inner("backup_paths") or [])

    # -- helpers ---------------------------------------------------------------------------------------
    def _inner(self, method: str, *args, **kwargs):
        fn = getattr(self.inner, method, None)
        if fn is None:
            return None
        try:
            return _call_with(fn, *args, **kwargs)
        except Exception as e:
            self._log({"call": f"{self._cfg.get('wrap')}.{method}", "ok": False, "error": f"{type(e).__name__}: {e}"})
            return None

    def _in_context(self, fn, *args):
        # A copy per call: one Context cannot be entered by two threads at once, and Hermes runs prefetch
        # and queue_prefetch on different threads.
        return fn(*args) if self._ctx is None else self._ctx.copy().run(fn, *args)

    def _profile(self) -> str:
        try:                        # Hermes's own answer in the current context (its ContextVar first)
            from hermes_constants import get_hermes_home
            return profile_of(get_hermes_home())
        except ImportError:
            return profile_of(self._hermes_home)

    def _log(self, rec: dict) -> None:
        if not self._hermes_home:
            return
        try:
            path = Path(self._hermes_home) / "logs" / LOG_FILE
            line = json.dumps({"ts": round(time.time(), 3), **{k: v for k, v in rec.items() if v is not None}},
                              ensure_ascii=False)
            with self._log_lock:
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
                    kept = path.read_text(encoding="utf-8", errors="replace").splitlines()[-500:]
                    # the kept lines go to a new file renamed into place: a full disk mid-write must not
                    # leave the log cut (this file runs inside Hermes and imports nothing of ours)
                    tmp = path.with_name(path.name + ".trim")
                    tmp.write_text("\n".join(kept) + "\n", encoding="utf-8")
                    os.replace(tmp, path)
                with path.open("a", encoding="utf-8") as f:
                    f.write(line + "\n")
        except Exception:           # a full disk must not break the agent's turn
            pass


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def register(ctx) -> None:
    """Hermes's plugin hook: ctx.register_memory_provider(...)."""
    ctx.register_memory_provider(AutoresearchMemoryProvider())
