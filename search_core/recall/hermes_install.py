"""Install the Hermes memory provider into a Hermes home, and report on it (`autoresearch hermes install|status`).

The provider folder is copied as it is, with the stdlib client beside it, to $HERMES_HOME/plugins/autoresearch/
(where Hermes 0.19.0 discovers memory providers); config.json there says which server to call. Standard
library only, like the provider.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from search_core import SearchCoreError
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
    cfg = dict(_provider.DEFAULTS)
    cfg_file = dest / _provider.CONFIG_FILE
    if cfg_file.exists():          # a reinstall keeps what the user set, unless an option replaces it
        try:
            stored = json.loads(cfg_file.read_text(encoding="utf-8"))
            cfg.update({k: v for k, v in (stored if isinstance(stored, dict) else {}).items() if k in cfg})
        except (OSError, ValueError) as e:
            warnings.append(f"{cfg_file} was unreadable ({e}); it is replaced by the defaults")
    for key, value in (("server", server), ("token", token), ("timeout_ms", timeout_ms), ("wrap", wrap)):
        if value is not None:
            cfg[key] = value or (None if key == "token" else value)

    # Build the new folder beside the old one and swap it in: Hermes never sees half a provider.
    staging = dest.parent / f".{NAME}.installing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for name in PROVIDER_FILES:
            shutil.copyfile(PROVIDER_DIR / name, staging / name)
        shutil.copyfile(CLIENT_FILE, staging / "client.py")
        cfg_path = staging / _provider.CONFIG_FILE
        cfg_path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
        if cfg.get("token"):
            cfg_path.chmod(0o600)
        old = dest.parent / f".{NAME}.old-{os.getpid()}"
        if dest.exists():
            dest.rename(old)
        staging.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    shown = {**cfg, "token": "set" if cfg.get("token") else None}
    return InstallResult(dest, provider_version(dest) or "?", previous, shown, selected_provider(home) == NAME,
                         tuple(warnings))


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

    def problems(self) -> list[str]:
        out = []
        if not self.installed:
            out.append(f"not installed: run `autoresearch hermes install --hermes-home {self.hermes_home}`")
        elif self.version != self.bundled_version:
            out.append(f"installed {self.version}, this checkout has {self.bundled_version}: run "
                       "`autoresearch hermes install` again")
        if self.selected != NAME:
            out.append(f"Hermes uses memory.provider {self.selected or '(none)'}: run `{SELECT_LINE}`")
        if self.config_error:
            out.append(self.config_error)
        if not self.server_ok:
            out.append(f"the server does not answer at {self.server} ({self.server_detail}): start "
                       "`autoresearch serve --db INDEX`")
        return out

    def as_dict(self) -> dict:
        return {"hermes_home": str(self.hermes_home), "installed": self.installed, "version": self.version,
                "bundled_version": self.bundled_version, "selected": self.selected, "config": self.config,
                "config_error": self.config_error, "server": self.server, "server_ok": self.server_ok,
                "server_detail": self.server_detail, "last_calls": list(self.last_calls),
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
        ok, detail = health.get("status") == "ok", f"status {health.get('status')}, db {health.get('db')}"
    except _client.RecallError as e:
        ok, detail = False, e.message
    return Status(home, installed, provider_version(dest) if installed else None, provider_version() or "?",
                  selected_provider(home), {**cfg, "token": "set" if cfg.get("token") else None}, cfg_error, url,
                  ok, detail, tuple(last_calls(home, calls)))
