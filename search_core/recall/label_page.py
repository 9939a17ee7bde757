"""The labelling page `autoresearch serve` serves at /label: the calls `recall-log suggest` picks, one at a
time, with the block that was (or would have been) injected and its top notes; relevant / irrelevant / skip
by button or key (r / i / s, j / k to move). Labels go into the recall log through label_calls, the same
storage as `recall-log label`.

    GET  /label                     the page (plain HTML + JS; it holds no notes, so it needs no token)
    GET  /label/calls?n=20&since=7d  {"suggested": [...], "labelled": [...], "threshold", "scale", ...}
    GET  /label/block?id=N          the call's block and top notes (its query searched again now)
    POST /label/calls {"id", "label"}  -> {"id", "label", "totals"}
The data routes take the server's bearer token; the page reads it from the address (/label#token=...),
which a browser never sends to the server, and sends it as `Authorization: Bearer`.
"""

from __future__ import annotations

import asyncio
import re

from search_core import SearchCoreError

DEFAULT_N = 20
DEFAULT_SINCE_S = 7 * 86400
LABELLED_SHOWN = 100              # the most recent labelled calls the page lists under the suggestions
_SINCE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _since(text: str | None) -> float | None:
    if not text:
        return DEFAULT_SINCE_S
    if text == "all":
        return None
    m = _SINCE.match(text)
    if not m:
        raise ValueError(f"since={text!r} is not a duration like 7d, 24h, 90m or `all`")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def _call_json(c, pick=None) -> dict:
    d = {"id": c.id, "ts": c.ts, "query": c.query, "top_note": c.top_note, "label": c.label,
         "injected": c.injected, "stopped_by": c.stopped_by,
         "top_notes": [{"note_id": t.get("note_id"), "cosine": t.get("cosine")} for t in c.top_scores]}
    if pick is not None:
        d.update(probability=pick.probability, score=round(pick.score, 4), reason=pick.reason)
    return d


def label_routes(engine, endpoint, max_body: int) -> list:
    """The page's routes for create_app (search_core.recall.server): `endpoint` wraps a handler with the
    server's token check, errors and metrics."""
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    from search_core.recall.block import compose_block, hit_lines
    from search_core.recall.log import LABELS, label_calls, read_logged_calls
    from search_core.recall.request_body import ApiError, read_json
    from search_core.recall.suggest import gate_in_force, suggest

    def log_path():
        if engine.log is None:
            raise ApiError(503, "no_log", "this server keeps no recall log, so there is nothing to label")
        return engine.log.path

    async def in_thread(fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    async def gate():
        if engine.backend.searcher is None:                  # opened lazily: open it on the search thread
            err = await in_thread(engine.warm)
            if err:
                raise ApiError(503, "index_unavailable", err)
        return gate_in_force(engine.backend.searcher, engine.backend.cfg)

    async def page(request):
        return HTMLResponse(PAGE)

    async def calls(request):
        try:
            n = int(request.query_params.get("n", DEFAULT_N))
            since = _since(request.query_params.get("since"))
        except ValueError as e:
            raise ApiError(400, "bad_parameter", f"{e}; n is a whole number of calls (1-200)") from None
        if not 1 <= n <= 200:
            raise ApiError(400, "bad_parameter", "n must be a whole number of calls from 1 to 200")
        g = await gate()
        rows = await in_thread(read_logged_calls, log_path(), since)
        out = suggest(rows, threshold=g.threshold, model=g.model, n=n, fingerprint_key=g.fingerprint_key)
        by_id = {c.id: c for c in rows}
        labelled = sorted((c for c in rows if c.label in LABELS), key=lambda c: -(c.labelled_at or 0))
        return JSONResponse({"scale": out.scale, "threshold": out.threshold, "centre": out.centre,
                             "interval": out.interval, "pool": out.pool, "left_out": out.left_out,
                             "gate": g.source,
                             "suggested": [_call_json(by_id[p.id], p) for p in out.picks],
                             "labelled": [_call_json(c) for c in labelled[:LABELLED_SHOWN]]})

    async def block(request):
        try:
            call_id = int(request.query_params.get("id", ""))
        except ValueError:
            raise ApiError(400, "bad_parameter", "id must be a call id (a whole number)") from None
        rows = await in_thread(read_logged_calls, log_path(), None)
        call = next((c for c in rows if c.id == call_id), None)
        if call is None:
            raise ApiError(404, "no_such_call", f"no recall call with id {call_id} in the log")
        if not call.query:
            return JSONResponse({"id": call_id, "block": "", "notes": [], "note": "the query was logged as a "
                                 "hash only (privacy = hash): there is nothing to search again"})
        try:
            res = await asyncio.wrap_future(engine.submit_search(call.query, None))
        except SearchCoreError as e:
            raise ApiError(503, "index_unavailable", str(e)) from None
        shown = res.hits[: engine.cfg.max_lines]
        text = compose_block(hit_lines(shown), engine.cfg.char_budget)
        return JSONResponse({"id": call_id, "block": text, "injected": call.injected,
                             "would_inject_now": bool(res.gate.inject), "probability": res.gate.probability,
                             "notes": [{"note_id": h.note_id, "title": h.title, "snippet": h.snippet[:400]}
                                       for h in shown]})

    async def label(request):
        data = await read_json(request, max_body, ("id", "label"))
        call_id, lab = data.get("id"), data.get("label")
        if not isinstance(call_id, int) or isinstance(call_id, bool) or not 1 <= call_id < 2 ** 63:
            # past SQLite's 64-bit integers the lookup itself failed (OverflowError: a 500)
            raise ApiError(400, "bad_id", '"id" must be a call id (an integer from 1)')
        if lab not in LABELS:
            raise ApiError(400, "bad_label", f'"label" must be one of {", ".join(LABELS)}')
        try:
            out = await in_thread(label_calls, log_path(), [(call_id, lab)])
        except SearchCoreError as e:
            raise ApiError(404 if "no recall call" in str(e) else 400, "not_labelled", str(e)) from None
        return JSONResponse({"id": call_id, "label": lab, "totals": out["totals"]})

    return [Route("/label", endpoint(page, auth=False), methods=["GET"]),
            Route("/label/calls", endpoint(calls), methods=["GET"]),
            Route("/label/calls", endpoint(label), methods=["POST"]),
            Route("/label/block", endpoint(block), methods=["GET"])]


PAGE = """<!doctype html>
<html lang="ko"><head><meta charset="utf-8"><title>Label recall calls</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.45 system-ui,"Noto Sans CJK KR",sans-serif;margin:0;background:#fafafa;color:#222}
header{padding:10px 18px;background:#fff;border-bottom:1px solid #ddd}
main{display:grid;grid-template-columns:minmax(280px,1fr) 2fr;gap:16px;padding:16px}
#list{background:#fff;border:1px solid #ddd;max-height:85vh;overflow:auto}
#list div{padding:6px 10px;border-bottom:1px solid #eee;cursor:pointer}
#list div.cur{background:#e8f0fe}
.lab-relevant{color:#0a7d2c}.lab-irrelevant{color:#b3261e}.muted{color:#777;font-size:13px}
#card{background:#fff;border:1px solid #ddd;padding:14px 18px}
#query{font-size:20px;margin:4px 0 8px}
pre{white-space:pre-wrap;background:#f4f4f4;padding:10px;border-radius:4px;font-size:13px}
button{font-size:15px;padding:8px 16px;margin-right:8px;border-radius:4px;border:1px solid #aaa;cursor:pointer}
#rel{background:#e6f4ea}#irr{background:#fce8e6}
kbd{border:1px solid #bbb;border-radius:3px;padding:0 4px;font-size:12px}
#err{color:#b3261e}
</style></head><body>
<header><b>Label recall calls</b> <span id="summary" class="muted"></span>
<div class="muted">Is the block worth putting into the agent's context for this message?
<kbd>r</kbd> relevant, <kbd>i</kbd> irrelevant, <kbd>s</kbd> skip, <kbd>j</kbd>/<kbd>k</kbd> next/previous</div>
<div id="err"></div></header>
<main><div id="list"></div>
<div id="card"><div class="muted" id="meta"></div><div id="query"></div>
<div id="status"></div><p class="muted" id="reason"></p>
<p><button id="rel">relevant (r)</button><button id="irr">irrelevant (i)</button><button id="skip">skip (s)</button></p>
<h4>The block</h4><pre id="block">...</pre><h4>Top notes</h4><ol id="notes"></ol></div></main>
<script>
"use strict";
const tokenFromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (tokenFromHash) sessionStorage.setItem("autoresearch-token", tokenFromHash);
const token = sessionStorage.getItem("autoresearch-token");
const headers = token ? {"Authorization": "Bearer " + token} : {};
let items = [], cur = 0;
const $ = id => document.getElementById(id);
const esc = s => String(s == null ? "" : s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
async function api(path, opts) {
  const r = await fetch(path, Object.assign({headers: Object.assign({"Content-Type": "application/json"}, headers)}, opts || {}));
  const body = await r.json();
  if (!r.ok) throw new Error((body.error && body.error.message) || r.status);
  return body;
}
function renderList() {
  $("list").innerHTML = items.map((c, i) =>
    `<div data-i="${i}" data-id="${c.id}" class="${i === cur ? "cur" : ""}">` +
    `<span class="label lab-${c.label || "none"}">${c.label ? (c.label === "relevant" ? "&#10003; " : "&#10007; ") + c.label : (c.skipped ? "skipped" : "")}</span> ` +
    `${esc(c.query)} <span class="muted">#${c.id}${c.score != null ? " &middot; " + c.score.toFixed(3) : ""}</span></div>`).join("");
  for (const d of $("list").children) d.onclick = () => show(+d.dataset.i);
}
async function show(i) {
  if (!items.length) { $("query").textContent = "Nothing to label in this window."; return; }
  cur = Math.max(0, Math.min(i, items.length - 1));
  const c = items[cur];
  renderList();
  $("meta").textContent = `call #${c.id} · ${new Date(c.ts * 1000).toLocaleString()} · ` +
    (c.injected ? "injected" : "stopped by " + c.stopped_by);
  $("query").textContent = c.query || "(query kept as a hash)";
  $("status").innerHTML = c.label ? `labelled <b class="lab-${c.label}" id="current-label">${c.label}</b>` : "not labelled yet";
  $("reason").textContent = c.reason || "";
  $("notes").innerHTML = c.top_notes.map(n => `<li>${esc(n.note_id)} <span class="muted">cos ${n.cosine}</span></li>`).join("");
  $("block").textContent = "searching again...";
  try {
    const b = await api("/label/block?id=" + c.id);
    if (items[cur] !== c) return;
    $("block").textContent = b.block || b.note || "(no block: nothing found)";
    if (b.notes && b.notes.length) $("notes").innerHTML = b.notes.map(n =>
      `<li><b>${esc(n.title)}</b> <span class="muted">${esc(n.note_id)}</span><br><span class="muted">${esc(n.snippet)}</span></li>`).join("");
  } catch (e) { $("block").textContent = "could not search again: " + e.message; }
}
async function label(value) {
  const c = items[cur];
  if (!c) return;
  try {
    await api("/label/calls", {method: "POST", body: JSON.stringify({id: c.id, label: value})});
    c.label = value; $("err").textContent = "";
    document.body.dataset.lastLabelled = c.id;
    show(cur + 1 < items.length ? cur + 1 : cur);
  } catch (e) { $("err").textContent = "not saved: " + e.message; }
}
function skip() { if (items[cur]) { items[cur].skipped = true; show(cur + 1); } }
$("rel").onclick = () => label("relevant");
$("irr").onclick = () => label("irrelevant");
$("skip").onclick = skip;
document.addEventListener("keydown", e => {
  if (e.target.tagName === "INPUT" || e.metaKey || e.ctrlKey || e.altKey) return;
  const k = e.key.toLowerCase();
  if (k === "r") label("relevant"); else if (k === "i") label("irrelevant"); else if (k === "s") skip();
  else if (k === "j" || k === "arrowdown") show(cur + 1); else if (k === "k" || k === "arrowup") show(cur - 1);
});
(async () => {
  try {
    const q = new URLSearchParams(location.search);
    const d = await api("/label/calls?" + new URLSearchParams({n: q.get("n") || "20", since: q.get("since") || "7d"}));
    items = d.suggested.concat(d.labelled.filter(l => !d.suggested.some(s => s.id === l.id)));
    $("summary").textContent = `${d.suggested.length} suggested of ${d.pool} unlabelled, ${d.labelled.length} labelled; ` +
      `${d.scale} threshold ${d.threshold.toFixed(3)} (${d.gate})`;
    document.body.dataset.loaded = items.length;
    await show(0);
  } catch (e) {
    $("err").textContent = "could not load the calls: " + e.message +
      (token ? "" : " (if the server has a --token, open /label#token=TOKEN)");
    document.body.dataset.loaded = "error";
  }
})();
</script></body></html>
"""
