"""`autoresearch mcp` as a real subprocess, driven line by line over its stdin and stdout: for the tests that
send what the SDK's own client never would (lines that are not JSON-RPC)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT


class McpProcess:
    def __init__(self, db: Path, log: Path, cwd: Path, *, timeout_s: float = 60.0):
        self.proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "mcp", "--db", str(db), "--log", str(log),
                                      "--timeout", str(timeout_s)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=cwd)
        self._next_id = 100

    def send(self, text: str | bytes) -> None:
        self.proc.stdin.write((text if isinstance(text, bytes) else text.encode()) + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 300) -> dict | None:
        """The next line the server writes, parsed; None when nothing came within `timeout`."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def initialize(self) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        assert self.reply()["id"] == 1
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def call(self, tool: str, arguments: dict) -> int:
        """Send a tools/call; its id."""
        self._next_id += 1
        self.send(json.dumps({"jsonrpc": "2.0", "id": self._next_id, "method": "tools/call",
                              "params": {"name": tool, "arguments": arguments}}))
        return self._next_id

    def close(self) -> int:
        self.proc.stdin.close()
        try:
            return self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)
