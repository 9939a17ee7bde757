"""A real HTTP rerank server for tests: scores by character-bigram overlap, answers TEI or llama.cpp shape."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RerankHandler(BaseHTTPRequestHandler):
    """A real rerank server: scores by character-bigram overlap, answers TEI or llama.cpp shape."""
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        q = body["query"]
        grams = lambda s: {s[i:i + 2] for i in range(len(s) - 1)}
        scores = [len(grams(q) & grams(d)) / (1 + len(grams(q))) for d in body["documents"]]
        rows = [{"index": i, "score": s} for i, s in enumerate(scores)]
        if self.path.endswith("/v1/rerank"):
            out = {"results": [{"index": r["index"], "relevance_score": r["score"]} for r in rows]}
        else:
            out = sorted(rows, key=lambda r: -r["score"])
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@contextmanager
def serve_reranker():
    """Yields the server's base URL; shuts it down on exit."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), RerankHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
