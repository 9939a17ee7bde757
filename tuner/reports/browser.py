"""Open an HTML report in headless Chromium: screenshot it, count the plots that rendered, and record
every network request the page tried (through a recording proxy on 127.0.0.1), so a test can say
"every plot drew and nothing was fetched". Needs Debian's `chromium` (and `fonts-noto-cjk` for Hangul)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


# Chromium's own services (network time, component updates, accounts) call home whatever the page
# does; the proxy sees those too, so they are reported apart from the page's requests.
BROWSER_OWN_HOSTS = ("google.com", "googleapis.com", "gstatic.com", "gvt1.com")


def _host(request_line: str) -> str:
    target = request_line.split(" ")[1] if " " in request_line else request_line
    target = re.sub(r"^[a-z]+://", "", target)
    return target.split("/")[0].split(":")[0].lower()


@dataclass(frozen=True)
class PageCheck:
    screenshot: str
    svg_count: int              # <svg> elements in the DOM after load
    rendered_svgs: int          # of those, how many have a non-empty box
    requests: tuple[str, ...]   # request lines of the page itself (a self-contained report: none)
    browser_requests: tuple[str, ...] = ()   # Chromium's own calls home, not the page's


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SearchCoreError("no Chromium found; install it with `apt-get install -y chromium fonts-noto-cjk`")


class _RecordingProxy:
    """Accepts connections on 127.0.0.1, records the first request line, answers 502."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.seen: list[str] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                    if not first:
                        # a connection closed before any byte: Chromium's speculative preconnect, no
                        # request (one in ~20 runs turned a clean page into requests == ('',))
                        continue
                    self.seen.append(first)
                    conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        self.thread.join(2)
        self.sock.close()


def check_page(html_path: str | Path, screenshot: str | Path | None = None, *, width: int = 1200,
               height: int = 2400, timeout: float = 60.0) -> PageCheck:
    html_path = Path(html_path).resolve()
    chromium = find_chromium()
    shot = Path(screenshot) if screenshot else html_path.with_suffix(".png")
    proxy = _RecordingProxy()
    profile = tempfile.mkdtemp(prefix="ar-chromium-")
    # every request, loopback included, goes to the recording proxy
    flags = CHROMIUM_FLAGS + [f"--user-data-dir={profile}", f"--proxy-server=http://127.0.0.1:{proxy.port}",
                              "--proxy-bypass-list=<-loopback>", f"--window-size={width},{height}"]
    measure = html_path.with_name(f".{html_path.stem}.measure.html")
    try:
        subprocess.run([chromium, *flags, f"--screenshot={shot}", html_path.as_uri()], capture_output=True,
                       timeout=timeout, check=False, env={**os.environ, "LANG": "ko_KR.UTF-8"})
        # a copy of the page with a script that writes each SVG's rendered box into the DOM
        page = html_path.read_text(encoding="utf-8")
        probe = ("<script>addEventListener('load',()=>{const s=[...document.querySelectorAll('svg')];"
                 "document.body.setAttribute('data-rendered',s.filter(e=>{const r=e.getBoundingClientRect();"
                 "return r.width>10&&r.height>10&&e.querySelectorAll('path,use,text').length>0}).length);"
                 "document.body.setAttribute('data-svgs',s.length)});</script>")
        measure.write_text(page.replace("</body>", probe + "</body>"), encoding="utf-8")
        dom = subprocess.run([chromium, *flags, "--virtual-time-budget=3000", "--dump-dom", measure.as_uri()],
                             capture_output=True, timeout=timeout, check=False, text=True).stdout
    finally:
        proxy.close()
        measure.unlink(missing_ok=True)
        shutil.rmtree(profile, ignore_errors=True)
    m_svgs = re.search(r'data-svgs="(\d+)"', dom)
    m_rend = re.search(r'data-rendered="(\d+)"', dom)
    if not shot.exists() or m_svgs is None:
        raise SearchCoreError(f"Chromium did not render {html_path} (no screenshot or DOM); run "
                              f"`{chromium} --headless --no-sandbox --screenshot {html_path.as_uri()}` to see why")
    own = tuple(r for r in proxy.seen if _host(r).endswith(BROWSER_OWN_HOSTS))
    page_reqs = tuple(r for r in proxy.seen if r not in own)
    return PageCheck(str(shot), int(m_svgs.group(1)), int(m_rend.group(1)) if m_rend else 0, page_reqs, own)
