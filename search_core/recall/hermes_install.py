"""Install the Hermes memory provider into a Hermes home, and report on it (`autoresearch hermes install|status`).

The provider folder is copied as it is, with the stdlib client beside it, to $HERMES_HOME/plugins/autoresearch/
(where Hermes 0.19.0 discovers memory providers); config.json there says which server to call. Standard
library only, like the provider.

A reinstall loses nothing the user made: a config.json it cannot parse is kept beside the new one and
what is legible in it read back (a token dropped without a word made every call a 401); a provider file
edited since the last install (.installed.json records each file's sha256) is kept as NAME.bak-STAMP.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from search_core import SearchCoreError
from search_core.files import swap_folder
from search_core.recall import client as _client
from search_core.recall import hermes as _provider

PROVIDER_DIR = Path(_provider.__file__).resolve().parent     # the one place that says where the provider lives
PROVIDER_FILES = ("plugin.yaml", "__init__.py")
CLIENT_FILE = Path(_client.__file__).resolve()              # copied beside it as client.py
NAME = _provider.NAME
SELECT_LINE = f"hermes config set memory.provider {NAME}"
RESTART_NOTE = ("Hermes reads memory.provider when a session starts: a session opened before the switch keeps "
                "its old provider and system prompt. Start a new one (`hermes`, or /new), and restart a running "
                "`hermes gateway`.")


def hermes_home(explicit: str | Path | None = None) -> Path:
    """--hermes-home, else $HERMES_HOME, else ~/.hermes (Hermes's own order, less its per-task override)."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("HERMES_HOME", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".hermes"


def plugin_dir(home: Path) -> Path:
    return home / "plugins" / NAME


def provider_version(folder: Path = PROVIDER_DIR) -> str | None:
    """The version: line of a provider folder's plugin.yaml (None when there is none)."""
    try:
        m = re.search(r"^version:\s*[\"']?([^\s\"']+)", (folder / "plugin.yaml").read_text(encoding="utf-8"), re.M)
    except OSError:
        return None
    return m.group(1) if m else None


def check_server_url(url: str) -> str | None:
    """None for a loopback http URL; a warning for another host; an error for anything that is not http(s)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SearchCoreError(f"--server {url!r} is not an http URL; give e.g. {_client.DEFAULT_URL}")
    if parts.hostname in ("127.0.0.1", "::1", "localhost") or parts.hostname.startswith("127."):
        return None
    return f"{url} is not loopback: the provider will send every user message there"


@dataclass(frozen=True)
class InstallResult:
    plugin_dir: Path
    version: str
    previous_version: str | None
    config: dict                 # what config.json now holds (the token shown as set / not set)
    selected: bool               # config.yaml already says memory.provider: autoresearch
    warnings: tuple[str, ...] = ()


def install(home: str | Path | None = None, *, server: str | None = None, token: str | None = None,
            timeout_ms: int | None = None, wrap: str | None = None) -> InstallResult:
    """Copy the provider into `home` and write its config.json; options not given keep their installed value."""
    home = hermes_home(home)
    if not home.is_dir():
        raise SearchCoreError(f"no Hermes home at {home}: run `hermes` once to create it, or pass --hermes-home DIR "
                              "(or set HERMES_HOME)")
    warnings = []
    if server is not None:
        w = check_server_url(server)
        if w:
            warnings.append(w)
    if timeout_ms is not None and not 1 <= timeout_ms <= 8000:
        raise SearchCoreError(f"--timeout-ms {timeout_ms} is out of range: 1 to 8000 (Hermes waits 8 s at most)")
    if wrap is not None and wrap not in ("", *_provider.WRAPPABLE):
        raise SearchCoreError(f"--wrap {wrap!r}: wrappable providers are {', '.join(_provider.WRAPPABLE)} "
                              "(or \"\" for none)")
    dest = plugin_dir(home)
    previous = provider_version(dest) if dest.exists() else None
    stamp = _backup_stamp(dest)
    kept: dict[str, bytes] = {}    # file name in the new folder -> its bytes: backups of what would be lost
    cfg = dict(_provider.DEFAULTS)
    cfg_file = dest / _provider.CONFIG_FILE
    if cfg_file.exists():          # a reinstall keeps what the user set, unless an option replaces it
        cfg.update(_stored_config(cfg_file, stamp, kept, warnings, token_given=token is not None))
    for key, value in (("server", server), ("token", token), ("timeout_ms", timeout_ms), ("wrap", wrap)):
        if value is not None:
            cfg[key] = value or (None if key == "token" else value)
    new_files = {**{name: (PROVIDER_DIR / name).read_bytes() for name in PROVIDER_FILES},
                 "client.py": CLIENT_FILE.read_bytes()}
    if dest.exists():
        _keep_edited_files(dest, new_files, stamp, kept, warnings)

    # Build the new folder beside the old one and swap it in: Hermes never sees half a provider.
    staging = dest.parent / f".{NAME}.installing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for name, data in new_files.items():
            (staging / name).write_bytes(data)
        (staging / MANIFEST).write_text(json.dumps({"files": {n: _sha256(d) for n, d in new_files.items()}},
                                                   indent=1) + "\n", encoding="utf-8")
        for old_backup in (dest.glob("*.bak-*") if dest.exists() else ()):   # earlier installs' backups stay
            shutil.copy2(old_backup, staging / old_backup.name)
        for name, data in kept.items():
            (staging / name).write_bytes(data)
            (staging / name).chmod(0o600)       # a damaged config.json may hold the token
        cfg_path = staging / _provider.CONFIG_FILE
        cfg_path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
        if cfg.get("token"):
            cfg_path.chmod(0o600)
        swap_folder(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    shown = {**cfg, "token": "set" if cfg.get("token") else None}
    return InstallResult(dest, provider_version(dest) or "?", previous, shown, selected_provider(home) == NAME,
                         tuple(warnings))


MANIFEST = ".installed.json"     # the sha256 of each file as installed: an edit made since shows as a mismatch
_SALVAGE = re.compile(r'"(\w+)"\s*:\s*("(?:[^"\\\n]|\\.)*"|-?\d+|true|false|null)')


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _salvage(text: str) -> dict:
    """The settings still legible in a damaged config.json (a "key": value pair each), of the types the
    defaults have; the first of a key wins, as nothing says which is meant."""
    out = {}
    for key, raw in _SALVAGE.findall(text):
        if key not in _provider.DEFAULTS or key in out:
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        default = _provider.DEFAULTS[key]
        if key == "token":
            ok = isinstance(value, str) and value.strip() != ""
        elif isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if ok:
            out[key] = value
    return out


def _backup_stamp(dest: Path) -> str:
    """The suffix of this install's backups: the time to the second, and -2, -3, ... when an earlier install in
    the same second already left backups under it (they are carried into the new folder and must not be
    overwritten by this one's)."""
    base = time.strftime("%Y%m%d-%H%M%S")
    stamp, n = base, 1
    while dest.exists() and any(dest.glob(f"*.bak-{stamp}")):
        n += 1
        stamp = f"{base}-{n}"
    return stamp


def _stored_config(path: Path, stamp: str, kept: dict, warnings: list, *, token_given: bool) -> dict:
    """The settings of the installed config.json. One that cannot be parsed is kept beside the new one
    (config.json.bak-STAMP), what is legible in it is read back, and the warning says which settings were
    kept and, when no token could be read, how to set it (the provider then got 401 from a server with one)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        warnings.append(f"{path} could not be read ({e}): nothing in it was kept, the defaults are used; if the "
                        "server has a --token, set it with `autoresearch hermes install --token TOKEN`")
        return {}
    try:
        stored = json.loads(data.decode("utf-8"))
        if not isinstance(stored, dict):
            raise ValueError(f"it holds a JSON {type(stored).__name__}, not an object")
        return {k: v for k, v in stored.items() if k in _provider.DEFAULTS}
    except ValueError as e:
        problem = str(e)
    backup = f"{path.name}.bak-{stamp}"
    kept[backup] = data
    salvaged = _salvage(data.decode("utf-8", errors="replace"))
    said = (f"{path} could not be parsed ({problem}); it is kept as {backup} beside the new one. "
            + (f"Read back from it: {', '.join(sorted(salvaged))}; " if salvaged else "Nothing in it was legible; ")
            + "every other setting is the default.")
    if "token" not in salvaged and not token_given:
        said += (" No token could be read from it: if the server has a --token, set it with "
                 "`autoresearch hermes install --token TOKEN` (or AUTORESEARCH_TOKEN in Hermes's environment), "
                 "or the provider's calls are refused (401)")
    warnings.append(said)
    return salvaged


def _keep_edited_files(dest: Path, new_files: dict, stamp: str, kept: dict, warnings: list) -> None:
    """A provider file changed on disk since it was installed (its sha256 is not the manifest's) is kept as
    NAME.bak-STAMP beside the new copy, and said; with no manifest (an install older than it), any file that
    differs from the new copy is kept, since an edit cannot be told from an older version."""
    try:
        recorded = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        recorded = None
    for name, new in new_files.items():
        try:
            on_disk = (dest / name).read_bytes()
        except OSError:
            continue
        if on_disk == new:
            continue
        if recorded is not None and recorded.get(name) == _sha256(on_disk):
            continue                      # the copy an earlier install wrote, unchanged: an upgrade
        backup = f"{name}.bak-{stamp}"
        kept[backup] = on_disk
        why = "was edited since it was installed" if recorded is not None else \
            "differs from this version's copy, and no record says what was installed"
        warnings.append(f"replaced {dest / name}, which {why}: the edited copy is kept as {dest / backup}")


def selected_provider(home: Path) -> str | None:
    """memory.provider in $HERMES_HOME/config.yaml (read as text: the two lines we need, no YAML parser)."""
    try:
        text = (home / "config.yaml").read_text(encoding="utf-8-sig")
    except OSError:
        return None
    m = re.search(r"^memory:\s*\n((?:[ \t]+.*\n?|\s*\n)*)", text, re.M)
    if not m:
        return None
    p = re.search(r"^[ \t]+provider:\s*[\"']?([^\s\"'#]*)", m.group(1), re.M)
    return (p.group(1) or None) if p else None


@dataclass(frozen=True)
class Status:
    hermes_home: Path
    installed: bool
    version: str | None          # the installed provider's
    bundled_version: str         # this checkout's
    selected: str | None         # memory.provider in config.yaml
    config: dict
    config_error: str | None
    server: str
    server_ok: bool
    server_detail: str
    last_calls: tuple = field(default_factory=tuple)
    server_answered: bool = False      # it answered /healthz (server_ok: and said ok)
    server_calls: dict | None = None   # /queue and /prefetch calls the server answered since it started

    def problems(self) -> list[str]:
        out = []
        if not self.installed and not Path(self.hermes_home).is_dir():
            # `install` refuses a home that is not there: sending the user to it first was a dead end
            out.append(f"no Hermes home at {self.hermes_home}: run `hermes` once to create it (or set HERMES_HOME "
                       "to the one it uses), then `autoresearch hermes install`")
        elif not self.installed:
            out.append(f"not installed: run `autoresearch hermes install --hermes-home {self.hermes_home}`")
        elif self.version != self.bundled_version:
            out.append(f"installed {self.version}, this checkout has {self.bundled_version}: run "
                       "`autoresearch hermes install` again")
        if self.selected != NAME:
            out.append(f"Hermes uses memory.provider {self.selected or '(none)'}: run `{SELECT_LINE}`")
        if self.config_error:
            out.append(self.config_error)
        if not self.last_calls and self.server_calls and sum(self.server_calls.values()):
            out.append(f"the server at {self.server} answered {self.server_calls_text()}, but this provider "
                       f"logged none in {self.hermes_home / 'logs' / _provider.LOG_FILE}: those calls came from "
                       "another client or another Hermes home (is HERMES_HOME or `hermes -p` set differently?)")
        if not self.server_ok:
            if self.server_answered:
                out.append(f"the server at {self.server} answers but is not healthy ({self.server_detail})")
            else:
                out.append(f"the server does not answer at {self.server} ({self.server_detail}): start "
                           "`autoresearch serve --db INDEX`")
        return out

    def server_calls_text(self) -> str:
        c = self.server_calls or {}
        return (f"{sum(c.values())} recall call(s) since it started ({c.get('/queue', 0)} /queue, "
                f"{c.get('/prefetch', 0)} /prefetch)")

    def as_dict(self) -> dict:
        return {"hermes_home": str(self.hermes_home), "installed": self.installed, "version": self.version,
                "bundled_version": self.bundled_version, "selected": self.selected, "config": self.config,
                "config_error": self.config_error, "server": self.server, "server_ok": self.server_ok,
                "server_detail": self.server_detail, "last_calls": list(self.last_calls),
                "server_calls": self.server_calls,
                "problems": self.problems()}


def last_calls(home: Path, n: int = 10) -> list[dict]:
    path = home / "logs" / _provider.LOG_FILE
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def status(home: str | Path | None = None, *, server: str | None = None, calls: int = 10) -> Status:
    home = hermes_home(home)
    dest = plugin_dir(home)
    installed = (dest / "__init__.py").exists()
    cfg, cfg_error = _provider.load_config(dest)
    url = server or cfg["server"]
    rc = _client.RecallClient(url, cfg["token"], timeout=2.0)
    try:
        health = rc.health()
        answered = True
        ok, detail = health.get("status") == "ok", f"status {health.get('status')}, db {health.get('db')}"
        if health.get("reasons"):
            detail += ": " + "; ".join(health["reasons"])
    except _client.RecallError as e:
        answered, ok, detail = False, False, e.message
    server_calls = None
    if answered:
        try:
            server_calls = rc.recall_calls()
        except _client.RecallError:
            server_calls = None
    return Status(home, installed, provider_version(dest) if installed else None, provider_version() or "?",
                  selected_provider(home), {**cfg, "token": "set" if cfg.get("token") else None}, cfg_error, url,
                  ok, detail, tuple(last_calls(home, calls)), answered, server_calls)
