"""Index the johngrib wiki from scratch, reindex after one change and with none, follow saves under
`serve --watch`, then search latency.

    python benchmarks/bench_wiki.py [--vault PATH] [--work DIR] [--stages full,embed,reindex,watch,search]
        [--index-from runs/johngrib.sqlite] [--code ../main --code .] [--profile]

The vault is copied to --work (a note must be edited for the one-change run); nothing lands in the repo
but runs/bench/wiki.json. `--index-from` starts from an existing index of the same vault (copied) instead
of a full build. `--code DIR` (repeatable) times the reindex stage with the code of each source tree
against its own copy of the index, edit by edit on the same vault: a before/after from one run, under the
same load. `--profile` writes the cProfile top costs of one changed note (library call and CLI) and of
the view a searcher then builds to runs/bench/wiki-profile-LABEL.txt.

Where a full build's time goes over time: the full stage samples how many vectors its embedding cache holds
every 15 s while the build runs (`embedding_timeline`, and the rate per fifth of the vectors). The embed stage
embeds the same texts, in the same order and batches of 32 as the build, with nothing else in the process:
per batch its wall and CPU time and tokens, summed per fifth. The two side by side say whether the build
embeds slower than the model does alone, and in which part of the vault.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, run_cli, summary, write_result  # noqa: E402

# In one process: warm up (model, weights hash), then time the library call for one changed note and for
# none, `rounds` times. Runs with the code of the tree given (before/after).
LIBRARY = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from search_core.index.indexer import index_vault
vault, db, rounds, tag = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
from pathlib import Path
notes = sorted(Path(vault).rglob("*.md"))
index_vault(vault, db)
one, none = [], []
for i in range(rounds):
    p = notes[(i * 97) % len(notes)]
    with p.open("a", encoding="utf-8") as f:
        f.write(f"\n\n라이브러리 호출 {tag} {i}: 한 노트만 바뀌었다.\n")
    t = time.perf_counter(); index_vault(vault, db); one.append(time.perf_counter() - t)
    t = time.perf_counter(); index_vault(vault, db); none.append(time.perf_counter() - t)
print(json.dumps({"one_change": one, "noop": none}))
"""

PROFILE = r"""
import cProfile, io, pstats, sys
sys.path.insert(0, sys.argv[1])
from search_core.index.indexer import index_vault
vault, db, note = sys.argv[2], sys.argv[3], sys.argv[4]
index_vault(vault, db)
with open(note, "a", encoding="utf-8") as f:
    f.write("\n\n프로파일: 한 노트만 바뀌었다.\n")
pr = cProfile.Profile(); pr.enable(); index_vault(vault, db); pr.disable()
out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(25); print(out.getvalue())
# what a warm searcher then pays to reload: the view and its short-token lookups
from search_core.index.store import connect
from search_core.search.view import IndexView
conn = connect(db)
pr = cProfile.Profile(); pr.enable(); IndexView(conn).short_index(); pr.disable()
out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(15)
print("# view build after the change (a searcher's reload)\n" + out.getvalue())
"""


def run_code(code: Path, *args: str) -> tuple[float, str]:
    """`autoresearch ARGS` with the code of the tree `code` (its checkout, on PYTHONPATH)."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True, cwd=code,
                       env={**os.environ, "PYTHONPATH": str(code)})
    if p.returncode != 0:
        raise SystemExit(f"autoresearch {' '.join(args)} ({code}) failed:\n{p.stderr[-2000:]}")
    return time.perf_counter() - t0, p.stdout


def reindex_compare(codes: list[Path], vault: Path, work: Path, source: Path, rounds: int, profile: bool) -> dict:
    """One vault, one index copy per code tree; each edit is indexed by every tree in turn."""
    labels = [c.name if c.resolve() != ROOT else "this" for c in codes]
    dbs = {}
    for label in labels:
        dbs[label] = work / f"index-{label}.sqlite"
        shutil.copyfile(source, dbs[label])
    for cache in (source.parent / "embed-cache.sqlite",):
        if cache.exists() and not (work / "embed-cache.sqlite").exists():
            shutil.copyfile(cache, work / "embed-cache.sqlite")
    notes = sorted(vault.rglob("*.md"))
    rng = random.Random(0)
    out = {label: {"cli_one_change_s": [], "cli_noop_s": []} for label in labels}
    for code, label in zip(codes, labels):          # first run on each copy: stats refresh, weights hash kept
        run_code(code, "index", str(vault), "--db", str(dbs[label]), "--no-progress")
        run_code(code, "index", str(vault), "--db", str(dbs[label]), "--no-progress")
    for i in range(rounds):
        p = rng.choice(notes)
        with p.open("a", encoding="utf-8") as f:
            f.write(f"\n\n벤치마크 수정 {i}: 한 노트만 바뀌었다.\n")
        for code, label in zip(codes, labels):
            out[label]["cli_one_change_s"].append(run_code(code, "index", str(vault), "--db", str(dbs[label]),
                                                           "--no-progress")[0])
        for code, label in zip(codes, labels):
            out[label]["cli_noop_s"].append(run_code(code, "index", str(vault), "--db", str(dbs[label]),
                                                     "--no-progress")[0])
    for code, label in zip(codes, labels):
        p = subprocess.run([sys.executable, "-c", LIBRARY, str(code), str(vault), str(dbs[label]), str(rounds), label],
                           capture_output=True, text=True, cwd=code, env={**os.environ, "PYTHONPATH": str(code)})
        if p.returncode != 0:
            raise SystemExit(f"library timing ({code}) failed:\n{p.stderr[-2000:]}")
        lib = json.loads(p.stdout.strip().splitlines()[-1])
        out[label]["library_one_change_s"], out[label]["library_noop_s"] = lib["one_change"], lib["noop"]
        if profile:
            note = notes[len(notes) // 2]
            p = subprocess.run([sys.executable, "-c", PROFILE, str(code), str(vault), str(dbs[label]), str(note)],
                               capture_output=True, text=True, cwd=code, env={**os.environ, "PYTHONPATH": str(code)})
            with note.open("a", encoding="utf-8") as f:
                f.write("\n\n프로파일 CLI.\n")
            q = subprocess.run([sys.executable, "-m", "cProfile", "-s", "cumulative", "-m", "tuner.cli", "index",
                                str(vault), "--db", str(dbs[label]), "--no-progress"], capture_output=True, text=True,
                               cwd=code, env={**os.environ, "PYTHONPATH": str(code)})
            prof = ROOT / "runs" / "bench" / f"wiki-profile-{label}.txt"
            prof.parent.mkdir(parents=True, exist_ok=True)
            prof.write_text("# library call, one changed note\n" + p.stdout + "\n# CLI, one changed note\n" +
                            "\n".join(q.stdout.splitlines()[:45]))
    return {label: {k: summary(v) for k, v in d.items()} for label, d in out.items()}


def _cached_vectors(cache: Path) -> int:
    import sqlite3
    try:
        conn = sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:          # not created yet, or busy at the moment it commits a batch
        return -1


def cache_timeline(cache: Path, stop: threading.Event, every: float = 15.0) -> list:
    """(seconds since start, vectors in the cache) every `every` s until `stop`: the build's progress as it
    goes, read from outside the process (the build commits each batch of 32 to the cache)."""
    out, t0 = [], time.perf_counter()
    while not stop.wait(every):
        n = _cached_vectors(cache)
        if n >= 0:
            out.append((round(time.perf_counter() - t0, 1), n))
    return out


def per_fifth(timeline: list) -> list[dict]:
    """Vectors per second over each fifth of the vectors the build embedded, from the cache timeline."""
    if len(timeline) < 2 or timeline[-1][1] <= timeline[0][1]:
        return []
    total, first = timeline[-1][1], timeline[0][1]
    out, prev = [], timeline[0]
    for k in range(1, 6):
        goal = first + (total - first) * k / 5
        cur = next(p for p in timeline if p[1] >= goal)
        if cur[0] > prev[0]:
            out.append({"vectors": cur[1], "vectors_per_s": round((cur[1] - prev[1]) / (cur[0] - prev[0]), 2)})
        prev = cur
    return out


class _CollectTexts:
    """Stands in for the embedding cache in `prepare`, keeping the texts the build would embed, in order."""

    def embed(self, embedder, texts, **_):
        import numpy as np
        self.texts = list(dict.fromkeys(texts))      # the cache embeds each distinct text once, in first-seen order
        return np.zeros((len(texts), embedder.dim), np.float32)


def _build_texts(vault: Path) -> list[str]:
    from search_core.config import ChunkConfig
    from search_core.index.write import prepare
    from search_core.ingest.vault import Skipped, list_vault, read_note
    from search_core.models import get_embedder
    collect = _CollectTexts()
    notes = [n for n in map(read_note, list_vault(vault, [])) if not isinstance(n, Skipped)]
    prepare(notes, get_embedder("e5-small"), ChunkConfig(), collect, None)
    return collect.texts


def machine_speed(vault: Path, every: int = 37) -> dict:
    """The same small embedding job before and after a timed stage: every 37th text the build embeds (~160),
    batches of 32. This host's speed per core moves with its neighbours, not with the load average: the same
    job ran 7.9 chunks/s (114 s of CPU) and, two hours later at the same load, 6.2 (141 s). A build time means
    little without this figure beside it."""
    from search_core.models import get_embedder
    emb = get_embedder("e5-small")
    texts = _build_texts(vault)[::every]
    emb.embed(texts[:2])
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(0, len(texts), 32):
        emb.embed(texts[i:i + 32])
    wall = time.perf_counter() - t0
    return {"texts": len(texts), "vectors_per_s": round(len(texts) / wall, 2),
            "cpu_s_per_vector": round((time.process_time() - c0) / len(texts), 3), "load_average": os.getloadavg()}


def embed_alone(vault: Path, batch: int = 32) -> dict:
    """Embed what a full build of `vault` embeds for its chunks, alone in this process, batch by batch."""
    from search_core.models import get_embedder
    emb = get_embedder("e5-small")
    texts, rows = _build_texts(vault), []
    emb.embed(texts[:2])                                  # the weights paged in before the clock runs
    t_all = time.perf_counter()
    for i in range(0, len(texts), batch):
        part = texts[i:i + batch]
        tokens = sum(emb.text_length(t) for t in part)
        c0, t0 = time.process_time(), time.perf_counter()
        emb.embed(part)
        rows.append((len(part), tokens, time.perf_counter() - t0, time.process_time() - c0))
    fifths = []
    for k in range(5):
        sl = rows[k * len(rows) // 5:(k + 1) * len(rows) // 5]
        n, tok, wall, cpu = (sum(r[j] for r in sl) for j in range(4))
        fifths.append({"vectors": n, "vectors_per_s": round(n / wall, 2), "tokens_per_s": round(tok / wall),
                       "tokens_per_vector": round(tok / n), "cpu_per_wall": round(cpu / wall, 2)})
    return {"vectors": len(texts), "seconds": round(time.perf_counter() - t_all, 1),
            "tokens": sum(r[1] for r in rows), "per_fifth": fifths}


def watch_latency(vault: Path, db: Path, saves: int, clients: int, timeout: float) -> dict:
    """serve --watch on the work copy; `clients` threads search all the time; each save appends a new word
    to a note and the clock runs until /search returns that note for the word."""
    from tests.helpers import free_port
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cfg = db.parent / "bench-cfg.toml"
    cfg.write_text("threshold = 0.0\n")
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "serve", "--db", str(db), "--port", str(port),
                             "--config", str(cfg), "--log", str(db.parent / "bench-log.sqlite"), "--watch", str(vault),
                             "--timeout", str(timeout)],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def call(path, body=None, timeout=30):
        req = urllib.request.Request(url + path, data=json.dumps(body).encode() if body else None,
                                     method="POST" if body else "GET", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if call("/healthz").get("watch", {}).get("caught_up_at"):
                    break
            except OSError:
                pass
            time.sleep(0.2)
        stop = threading.Event()
        counts = {"ok": 0, "errors": 0}
        kinds: dict[str, int] = {}
        lock = threading.Lock()
        notes = sorted(vault.rglob("*.md"))
        queries = [p.stem.replace("-", " ") for p in notes[:200]]

        def client(i):
            rng = random.Random(i)
            while not stop.is_set():
                kind = None
                try:
                    call("/search", {"query": rng.choice(queries), "k": 5})
                    key = "ok"
                except urllib.error.HTTPError as e:        # counted by kind: the figure is "0 errors"
                    key, kind = "errors", f"HTTP {e.code} {json.loads(e.read() or b'{}').get('error', {}).get('code')}"
                except Exception as e:     # noqa: BLE001
                    key, kind = "errors", type(e).__name__
                with lock:
                    counts[key] += 1
                    if kind:
                        kinds[kind] = kinds.get(kind, 0) + 1

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        rng = random.Random(1)
        lat = []
        for i in range(saves):
            p = rng.choice(notes)
            word = f"watchprobe{i}x{rng.randrange(10**6)}"
            nid = p.relative_to(vault).as_posix()[:-3]
            with p.open("a", encoding="utf-8") as f:
                f.write(f"\n\n{word} 저장 직후 검색.\n")
            t0 = time.perf_counter()
            while True:
                try:
                    if nid in [h["note_id"] for h in call("/search", {"query": word, "k": 5})["results"]]:
                        break
                except Exception:      # noqa: BLE001
                    pass
                if time.perf_counter() - t0 > 60:
                    break
                time.sleep(0.05)
            lat.append(time.perf_counter() - t0)
            time.sleep(0.5)          # saves a person makes, not one burst
        stop.set()
        for t in threads:
            t.join(60)
        health = call("/healthz")
    finally:
        proc.terminate()
        proc.wait(30)
    return {"save_to_searchable_s": summary(lat), "clients": clients, "client_searches": counts["ok"],
            "client_errors": counts["errors"], "client_error_kinds": kinds, "server_timeout_s": timeout,
            "watch": health.get("watch")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=DATA / "johngrib-wiki" / "_wiki")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "bench" / "wiki-work")
    ap.add_argument("--stages", default="full,reindex,search",
                    help="comma-separated subset; results merge into runs/bench/wiki.json")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--index-from", type=Path, default=None,
                    help="An existing index of --vault to start from (copied), instead of the full build.")
    ap.add_argument("--code", type=Path, action="append", default=None,
                    help="A source tree whose code the reindex stage times (repeatable: before and after).")
    ap.add_argument("--cache-from", type=Path, default=None,
                    help="Seed the full build's embedding cache with this file: the build then times everything "
                         "but embedding (the figure beside it says what embedding costs).")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--saves", type=int, default=20)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--serve-timeout", type=float, default=2.0,
                    help="The server's --timeout (its default is 2 s); searches slower than this are errors (504).")
    args = ap.parse_args()
    stages = set(args.stages.split(","))
    vault, db = args.work / "vault", args.work / "index.sqlite"
    out = Path(__file__).resolve().parent.parent / "runs" / "bench" / "wiki.json"
    result = json.loads(out.read_text()) if out.exists() else {}
    result["load_average_at_start"] = os.getloadavg()
    if args.index_from is not None:
        shutil.rmtree(args.work, ignore_errors=True)
        shutil.copytree(args.vault, vault)             # copy2: sizes and mtimes kept, so the copy is a no-op
        shutil.copyfile(args.index_from, db)
        cache = args.index_from.parent / "embed-cache.sqlite"
        if cache.exists():
            shutil.copyfile(cache, args.work / "embed-cache.sqlite")
        stages.discard("full")
    if args.code and "reindex" in stages:
        result["reindex_by_code"] = reindex_compare(args.code, vault, args.work, db, args.rounds, args.profile)
        result["reindex_by_code"]["load_average_after"] = os.getloadavg()
        print(json.dumps(result["reindex_by_code"], indent=1), flush=True)
        stages.discard("reindex")
    if "full" in stages:
        shutil.rmtree(args.work, ignore_errors=True)
        shutil.copytree(args.vault, vault)
        if args.cache_from is not None:
            shutil.copyfile(args.cache_from, args.work / "embed-cache.sqlite")
        import resource
        speed_before = machine_speed(args.vault)
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        stop, timeline = threading.Event(), []
        sampler = threading.Thread(target=lambda: timeline.extend(cache_timeline(args.work / "embed-cache.sqlite", stop)),
                                   daemon=True)
        sampler.start()
        secs, peak, out = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        stop.set()
        sampler.join()
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        key = "full_index_cached_vectors" if args.cache_from is not None else "full_index"
        result[key] = {"seconds": round(secs, 1), "cpu_s": round(cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime
                                                                   - cpu0.ru_stime, 1),
                       "peak_rss_mib": peak, "report": out.strip(), "load_average_after": os.getloadavg(),
                       "embedding_timeline": timeline, "embedding_per_fifth": per_fifth(timeline),
                       "machine_speed_before": speed_before, "machine_speed_after": machine_speed(args.vault)}
        print("full index:", {k: v for k, v in result[key].items() if k != "embedding_timeline"}, flush=True)
    if "embed" in stages:
        result["embed_alone"] = {**embed_alone(args.vault), "load_average_after": os.getloadavg(),
                                 "machine_speed_after": machine_speed(args.vault)}
        print("embedding alone:", result["embed_alone"], flush=True)

    notes = sorted(vault.rglob("*.md"))
    rng = random.Random(0)
    one_change, noop = [], []
    for i in range(5 if "reindex" in stages else 0):
        p = rng.choice(notes)
        with p.open("a", encoding="utf-8") as f:
            f.write(f"\n\n벤치마크 수정 {i}: 한 노트만 바뀌었다.\n")
        secs, _, _ = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        one_change.append(secs)
        secs, _, _ = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        noop.append(secs)
    if one_change:
        result["reindex_one_change_s"] = summary(one_change)
        result["reindex_noop_s"] = summary(noop)
        print("one change:", result["reindex_one_change_s"], "\nno-op:", result["reindex_noop_s"], flush=True)
    if "watch" in stages:
        result["watch"] = watch_latency(vault, db, args.saves, args.clients, args.serve_timeout)
        result["watch"]["load_average_after"] = os.getloadavg()
        print("watch:", json.dumps(result["watch"], ensure_ascii=False), flush=True)
    if "search" not in stages:
        print("written", write_result("wiki", result))
        return

    from search_core.search.pipeline import Searcher
    s = Searcher(db)
    titles = [v["title"] for v in s.view.notes.values()]
    summaries = [v["summary"] for v in s.view.notes.values() if v["summary"]]
    qs = rng.sample(titles, min(len(titles), args.queries // 2)) + rng.sample(summaries, min(len(summaries), args.queries // 2))
    for q in qs[:10]:
        s.search(q)                                   # warm up
    # queries as people type them: note titles (short) and one-line summaries (long); reported
    # separately too, because query embedding costs ~0.5 ms per token on this CPU
    groups = {"all": qs, "titles": qs[: len(qs) // 2], "summaries": qs[len(qs) // 2:]}
    timings: dict[str, list[dict]] = {"titles": [], "summaries": []}
    for name in ("titles", "summaries"):
        for q in groups[name]:
            timings[name].append(s.search(q).timings_ms)
    timings["all"] = timings["titles"] + timings["summaries"]
    result["search_ms"] = {}
    for name, rows in timings.items():
        result["search_ms"][name] = {k: summary([r[k] for r in rows]) for k in rows[0]}
        result["search_ms"][name]["query_chars_median"] = sorted(len(q) for q in groups[name])[len(groups[name]) // 2]
    for name, stages_ms in result["search_ms"].items():
        print(f"-- {name} (median query {stages_ms['query_chars_median']} chars)")
        for k, v in stages_ms.items():
            if isinstance(v, dict):
                print(f"search {k:<10} p50 {v['p50']:>7} ms  p95 {v['p95']:>7} ms", flush=True)
    print("written", write_result("wiki", result))


if __name__ == "__main__":
    main()
