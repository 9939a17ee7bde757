"""Drive a real headless Chromium from a test: the DevTools protocol over --remote-debugging-pipe (JSON
messages ending in NUL on file descriptors 3 and 4), so no websocket library is needed. Clicks and key
presses are real input events (Input.dispatchMouseEvent / dispatchKeyEvent), not element.click()."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time

from tuner.reports.browser import CHROMIUM_FLAGS, find_chromium


def _above_4(fd: int) -> int:
    """`fd` moved to a descriptor number above 4 (the old one closed)."""
    import fcntl
    if fd > 4:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 5)
    os.close(fd)
    return moved


class Chromium:
    def __init__(self, *, width: int = 1200, height: int = 900, timeout: float = 60.0, flags: tuple[str, ...] = ()):
        """`flags`: more Chromium flags, e.g. --host-resolver-rules to point a DNS name at 127.0.0.1."""
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ar-cdp-")
        cmd_r, self._cmd_w = os.pipe()        # we write commands; Chromium reads fd 3
        self._out_r, out_w = os.pipe()        # Chromium writes fd 4; we read
        # the two ends bash moves must not be 3 or 4 themselves: `3<&3 ... 3<&-` would close the pipe it just
        # placed (a process with few files open gets 3 and 6: Chromium then found no pipe and exited)
        cmd_r, out_w = (_above_4(fd) for fd in (cmd_r, out_w))
        chromium = find_chromium()
        args = [chromium, *CHROMIUM_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}", *flags, "about:blank"]
        # bash puts the pipes on 3 and 4 for the browser it execs
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$@" 3<&{cmd_r} 4>&{out_w} {cmd_r}<&- {out_w}>&-',
                                      "chromium", *args], pass_fds=(cmd_r, out_w), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env={**os.environ, "LANG": "ko_KR.UTF-8"})
        os.close(cmd_r)
        os.close(out_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=True)
        self.send("Runtime.enable", session=True)

    # -- the protocol ----------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out_r], [], [], left)[0]:
                raise TimeoutError("Chromium sent nothing in time")
            chunk = os.read(self._out_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe (it exited)")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, *, session: bool = False) -> dict:
        self._next += 1
        msg = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._next:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method:
                return m
            self.events.append(m)

    # -- what a test does ------------------------------------------------------------------------------
    def evaluate(self, expression: str):
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      session=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str):
        """Poll a JS expression until it is truthy (the page loads its data with fetch); its value."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            v = self.evaluate(expression)
            if v:
                return v
            time.sleep(0.1)
        raise TimeoutError(f"never true in {self.timeout:.0f} s: {expression}")

    def goto(self, url: str):
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=True)
        self.wait_event("Page.loadEventFired")

    def reload(self):
        self.events.clear()
        self.send("Page.reload", {"ignoreCache": True}, session=True)
        self.wait_event("Page.loadEventFired")

    def click(self, selector: str):
        box = self.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1}, session=True)

    def press(self, key: str):
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": key, "text": key}, session=True)
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key}, session=True)

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._cmd_w)
        os.close(self._out_r)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
