"""A bounded BM25 for the sparse channel's FTS5 query, measured against FTS5's own: is it worth shipping?

    python benchmarks/bench_bm25_bound.py --db INDEX [--queries 200] [--limit 200] [--share 0.6]
        [--rescored 1024] [--sql] [--out benchmarks/results/bm25_bound.json]

FTS5 scores every row an OR of trigrams matches, so the keyword channel pays for the common trigrams' long
posting lists although their idf is small (docs/lab-notes/scale-2026-12.md: 78-95 ms at p95 at 567,010
chunks). The candidate here is MaxScore (Turtle & Flood) over FTS5's own lists: every phrase adds at most
idf x (k1 + 1) to a row, so the phrases are read one at a time, rarest first (FTS5's bm25 of one phrase is
that phrase's share of a row's score), until the `limit`-th best partial score exceeds what the unread
phrases could add to any row; then only the rows that can still reach the top are scored exactly from their
own text (their five FTS5 columns and FTS5's stored sizes), in FTS5's arithmetic and phrase order, so each
score is the float FTS5 returns. Where the bound does not hold within a share of the query's postings, or a
row's text could fold otherwise than FTS5 folds it, the channel would ask FTS5 as today.

Per query (the index's note titles, copy numbers stripped, in a seeded order): whether the bound
held, the rows it returned against channels._fts_best's (the same rowids and the same floats, or the run
fails), process CPU of both, the postings each read. And the ceiling of the idea: the share of a query's
postings MaxScore would have to read with the true `limit`-th score known in advance. Only counts and
timings are written (the scale vault holds KorQuAD text, CC BY-ND). `--sql`: what FTS5 spends on the heaviest
titles by MATCH text (the rows alone, bm25, the rarer half, rewritten expressions, fts5vocab's instances).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, summary  # noqa: E402
# FTS5's bm25 constants, its idf and SQLite's varints: the library's in-memory bm25 (search_core.search.fts_bm25)
from search_core.search.fts_bm25 import B, FLOOR_IDF, K1, idf, varints  # noqa: E402,F401

# The postings read before giving up (the default; --share sets it per query as a share of its postings)
RARE_POSTINGS = 4096
# Rows scored from their text at most before giving up (--rescored)
MAX_RESCORED = 1024
# Scores compared across a different summation order: 24 phrases of idf <= 14 times k1 + 1 sum to < 800,
# whose rounding error is far below this margin.
SLACK = 1e-9
# characters that lower() may change: all but ASCII, Hangul (syllables and jamo), CJK ideographs and punctuation
_MAY_FOLD = re.compile(r"[^\x00-\x7f\u1100-\u11ff\u2000-\u206f\u3000-\u303f\u3130-\u318f\u4e00-\u9fff\uac00-\ud7a3]+")


@dataclass(frozen=True)
class FtsTotals:
    """FTS5's averages record: rows, and tokens summed over every row and column (bm25's N and avgdl)."""
    rows: int
    tokens: int

    @property
    def avgdl(self) -> float:
        return float(self.tokens) / float(self.rows)


@dataclass(frozen=True)
class BoundedBest:
    """What the bounded pass found: `rows` as _fts_best returns them (rowid, bm25), or None when the bound
    did not let it stop (the caller would ask FTS5); the postings FTS5 read for it, those of the phrases it
    left unread, and the rows it scored from their text."""
    rows: list[tuple[int, float]] | None
    read: int
    skipped: int
    rescored: int = 0
    why: str = ""
    rescore_s: float = 0.0       # process CPU of reading and counting the rescored rows' text


def fts_totals(conn) -> FtsTotals | None:
    """FTS5's row count and summed column sizes (its averages record, chunks_fts_data id 1)."""
    row = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return None
    v = varints(bytes(row[0]))
    return FtsTotals(v[0], sum(v[1:])) if v and v[0] > 0 else None


def bound(idf_: float) -> float:
    """The most one phrase adds to a row: idf x f (k1 + 1) / (f + k1 x norm) < idf x (k1 + 1)."""
    return idf_ * (K1 + 1.0)


def row_score(freqs: list[float], idfs: list[float], size: int, avgdl: float) -> float:
    """FTS5's bm25 of one row (positive; FTS5 returns its negation), the same operations in the same order."""
    d = float(size)
    score = 0.0
    for f, w in zip(freqs, idfs):
        score += w * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl)))
    return score


def count_overlapping(text: str, sub: str) -> int:
    """How many times `sub` starts in `text` (FTS5's trigram tokens overlap: "aaa" is twice in "aaaa")."""
    n, i = 0, text.find(sub)
    while i >= 0:
        n += 1
        i = text.find(sub, i + 1)
    return n


def _folds_like_fts5(text: str) -> bool:
    """Python's lower() and FTS5's case folding (remove_diacritics 0) agree on ASCII, on characters without
    case (Hangul) and on the one-to-one capitals of Latin-1 and Latin Extended-A, Greek (but a sigma, which
    lower() turns final at a word's end), Cyrillic and fullwidth Latin; another letter that lower() changes
    ("İ" becomes two characters) may not fold as FTS5 folds it, so such a row is left to FTS5."""
    for c in set("".join(_MAY_FOLD.findall(text))):
        if c.lower() != c and not _simple_fold(ord(c)):
            return False
    return True


def _simple_fold(o: int) -> bool:
    return ((0xC0 <= o <= 0x17F and o != 0x130) or (0x391 <= o <= 0x3A9 and o != 0x3A3) or 0x400 <= o <= 0x42F
            or 0xFF21 <= o <= 0xFF3A)


def row_freqs(columns, phrases: list[str], weights) -> list[float] | None:
    """A row's weighted hits per phrase (bm25's aFreq: a hit in column c counts weights[c]), or None when
    the row's text may fold otherwise than FTS5 folds it."""
    freqs = [0.0] * len(phrases)
    for text, w in zip(columns, weights):
        if not text:
            continue
        if not text.isascii() and _MAY_FOLD.search(text) and not _folds_like_fts5(text):
            return None
        low = text.lower()
        for i, p in enumerate(phrases):
            if p[0] == p[1] or p[0] == p[2]:
                n = count_overlapping(low, p)
            else:
                n = low.count(p)
            if n:
                freqs[i] += n * w
    return freqs


def bounded_best(conn, phrases: list[str], df: dict[str, int], totals: FtsTotals, limit: int,
                 weights, match_expr, budget: int = RARE_POSTINGS,
                 rescored: int = MAX_RESCORED) -> BoundedBest:
    """The `limit` best rows of FTS5's bm25 over the OR of `phrases`, and every row tied with the last of
    them (_fts_best's rows: (rowid, bm25), the same floats), or rows=None where the bound does not hold
    within `budget` postings. The phrases are read one at a time, rarest first, each by FTS5 (its bm25 of
    that phrase alone is the phrase's share of a row's score), until the `limit`-th best partial score
    exceeds what the unread phrases could add to any row (MaxScore); then only the rows that can still
    reach the top are scored exactly, from their text. df: each phrase's rows (FTS5's nHit); match_expr:
    the MATCH text of a list of phrases (channels.fts_match_expr)."""
    total = sum(df.get(p, 0) for p in phrases)
    if limit <= 0 or not phrases:
        return BoundedBest(None, 0, total, why="nothing to bound")
    idfs = [idf(df.get(p, 0), totals.rows) for p in phrases]
    order = sorted(range(len(phrases)), key=lambda i: (df.get(phrases[i], 0), i))
    rest_bound = sum(bound(idfs[i]) for i in order)
    weight_args = ", ".join(map(str, weights))
    sql = f"SELECT rowid, -bm25(chunks_fts, {weight_args}) FROM chunks_fts WHERE chunks_fts MATCH ?"
    # partial scores per row as arrays: each phrase's (rowid, score) read whole, summed per rowid (np.unique then
    # bincount); a rowid's sum follows the phrases' order, rarest first
    ids, vals = np.zeros(0, np.int64), np.zeros(0, np.float64)
    read, theta, done = 0, 0.0, 0
    for k, i in enumerate(order[:-1]):          # the last phrase read would leave no list unread
        if read + df.get(phrases[i], 0) > budget:
            break
        got = conn.execute(sql, (match_expr([phrases[i]]),)).fetchall()
        if got:
            a = np.array(got, np.float64)
            ids, inv = np.unique(np.concatenate([ids, a[:, 0].astype(np.int64)]), return_inverse=True)
            vals = np.bincount(inv, weights=np.concatenate([vals, a[:, 1]]), minlength=len(ids))
        read += df.get(phrases[i], 0)
        rest_bound -= bound(idfs[i])
        done = k + 1
        if len(ids) >= limit:
            theta = float(-np.partition(-vals, limit - 1)[limit - 1])
            if rest_bound + SLACK * max(theta, 1.0) < theta - SLACK * max(theta, 1.0):
                break
    slack = SLACK * max(theta, 1.0)
    if not done or len(ids) < limit or rest_bound + slack >= theta - slack:
        return BoundedBest(None, read, total - read, why=f"no bound within {budget} postings: {len(ids)} rows, "
                           f"the unread phrases' bound {rest_bound:.3f} against {theta:.3f}")
    partial = dict(zip(ids.tolist(), vals.tolist()))
    cand = [rid for rid, s in partial.items() if s + rest_bound + 2 * slack >= theta]
    if len(cand) > rescored:
        return BoundedBest(None, read, total - read, why=f"{len(cand)} rows to score from text")
    t = time.process_time()
    exact = _rescore(conn, cand, phrases, weights)
    rescore_s = time.process_time() - t
    if exact is None:
        return BoundedBest(None, read, total - read, why="a row folds otherwise than FTS5 may")
    # the self-check: the phrases FTS5 scored, counted from the text, give FTS5's partial score
    seen = sorted(order[:done])
    seen_idfs = [idfs[i] for i in seen]
    for rid in cand:
        freqs, size = exact[rid]
        if abs(row_score([freqs[i] for i in seen], seen_idfs, size, totals.avgdl) - partial[rid]) > slack:
            return BoundedBest(None, read, total - read, len(cand), f"row {rid}: the text's score is not FTS5's")
    full = sorted(((row_score(exact[rid][0], idfs, exact[rid][1], totals.avgdl), rid) for rid in cand),
                  key=lambda t: -t[0])
    cut = full[limit - 1][0]
    return BoundedBest([(rid, -s) for s, rid in full if s >= cut], read, total - read, len(cand), rescore_s=rescore_s)


def _rescore(conn, rowids: list[int], phrases: list[str], weights):
    """rowid -> (weighted hits per phrase, the row's size in tokens) from FTS5's stored columns and sizes."""
    out = {}
    for lo in range(0, len(rowids), 500):
        part = rowids[lo:lo + 500]
        marks = ",".join("?" * len(part))
        sizes = dict(conn.execute(f"SELECT id, sz FROM chunks_fts_docsize WHERE id IN ({marks})", part).fetchall())
        for rid, *cols in conn.execute(f"SELECT id, c0, c1, c2, c3, c4 FROM chunks_fts_content WHERE id IN ({marks})",
                                       part):
            freqs = row_freqs(cols, phrases, weights)
            if freqs is None:
                return None
            out[rid] = (freqs, sum(varints(bytes(sizes[rid]))))
    return out


# ---------------------------------------------------------------- measuring

def ideal_share(phrases: list[str], df: dict[str, int], rows: int, theta: float) -> float:
    """The share of the query's postings MaxScore reads, rarest first, before the unread phrases' bounds sum
    below the true `limit`-th score `theta` (known here in advance; the real pass learns it as it reads)."""
    order = sorted(phrases, key=lambda t: df[t])
    total = sum(df[t] for t in order) or 1
    rest, read = sum(bound(idf(df[t], rows)) for t in order), 0
    for t in order:
        if rest < theta:
            return read / total
        rest -= bound(idf(df[t], rows))
        read += df[t]
    return 1.0


def measure(db: Path, queries: int, limit: int, share: float, rescored: int, seed: int = 7) -> dict:
    from search_core.search import channels as ch
    from search_core.search.view import IndexView
    view = IndexView.open(db)
    conn = view.conn
    totals = fts_totals(conn)
    titles = sorted({re.sub(r"\s+\d+$", "", r[0]) for r in conn.execute("SELECT title FROM notes") if r[0]})
    random.Random(seed).shuffle(titles)
    rows, why = [], {}
    for title in titles:
        if len(rows) >= queries:
            break
        tri = ch.fts_trigrams(view, conn, ch.query_terms(title)[0])
        if not tri:
            continue
        df = ch.term_df(view, conn, tri)
        total = sum(df.values())
        expr = ch.fts_match_expr(tri)
        t0 = time.process_time()
        want = ch._fts_best(conn, expr, limit)
        t1 = time.process_time()
        got = bounded_best(conn, tri, df, totals, limit, ch.FIELD_WEIGHTS, ch.fts_match_expr,
                           max(1, int(share * total)), rescored)
        t2 = time.process_time()
        if got.rows is not None and sorted(got.rows) != sorted(want):
            raise SystemExit(f"the bounded rows differ from FTS5's for {title!r}: {len(got.rows)} against {len(want)}")
        if got.rows is None:
            reason = re.sub(r"[\d.]+", "N", got.why)
            why[reason] = why.get(reason, 0) + 1
        theta = -want[limit - 1][1] if len(want) >= limit else 0.0
        rows.append({"postings": total, "held": got.rows is not None, "fts5_ms": (t1 - t0) * 1000,
                     "bounded_ms": (t2 - t1) * 1000, "read": got.read, "rescored": got.rescored,
                     "rescore_ms": got.rescore_s * 1000, "ideal_share": ideal_share(tri, df, totals.rows, theta)})
    view.close()
    held = [r for r in rows if r["held"]]
    out = {"db": str(db), "fts5_rows": totals.rows, "queries": len(rows), "limit": limit, "share": share,
           "rescored": rescored, "held": len(held), "fell_back": why,
           "postings": summary([r["postings"] for r in rows]),
           "ideal_share": summary([r["ideal_share"] for r in rows]),
           "fts5_ms_all": summary([r["fts5_ms"] for r in rows]),
           "bounded_or_fallback_ms_all": summary([r["bounded_ms"] + (0 if r["held"] else r["fts5_ms"]) for r in rows])}
    if held:
        out["held_fts5_ms"] = summary([r["fts5_ms"] for r in held])
        out["held_bounded_ms"] = summary([r["bounded_ms"] for r in held])
        out["held_read_share"] = summary([r["read"] / max(r["postings"], 1) for r in held])
        out["held_rescored_rows"] = summary([r["rescored"] for r in held])
        out["held_rescore_ms"] = summary([r["rescore_ms"] for r in held])
        out["rescore_us_per_row"] = round(1000 * sum(r["rescore_ms"] for r in held) / max(sum(r["rescored"] for r in held), 1), 1)
    return out


def sql_costs(db: Path, heaviest: int = 15, repeats: int = 3) -> dict:
    """What FTS5 spends on the heaviest titles' queries, and what other MATCH texts or a vocabulary read would:
    process CPU ms, the best of `repeats`, median over the titles. "rare" / "common": the rarer and the more
    common half of the query's trigrams."""
    from search_core.search import channels as ch
    from search_core.search.view import IndexView
    view = IndexView.open(db)
    conn = view.conn
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.bench_instances USING fts5vocab(main, chunks_fts, instance)")
    w = ", ".join(map(str, ch.FIELD_WEIGHTS))
    cols = ("title", "aliases", "tags", "summary", "body")
    weight_sql = "CASE col " + " ".join(f"WHEN '{c}' THEN {x}" for c, x in zip(cols, ch.FIELD_WEIGHTS)) + " END"
    queries = []
    for (title,) in conn.execute("SELECT DISTINCT title FROM notes").fetchall():
        tri = ch.fts_trigrams(view, conn, ch.query_terms(title or "")[0])
        if len(tri) > 3:
            df = ch.term_df(view, conn, tri)
            queries.append((sum(df.values()), tri, df))
    queries = sorted(queries, key=lambda q: -q[0])[:heaviest]
    bm25 = f"SELECT rowid, bm25(chunks_fts, {w}) AS s FROM chunks_fts WHERE chunks_fts MATCH ?"

    def best(run) -> float:
        out = []
        for _ in range(repeats):
            t = time.process_time()
            run()
            out.append(time.process_time() - t)
        return min(out) * 1000

    got: dict[str, list[float]] = {}
    for _, tri, df in queries:
        e = ch.fts_match_expr(tri)
        order = sorted(tri, key=lambda t: df[t])
        rare, common = ch.fts_match_expr(order[:len(order) // 2]), ch.fts_match_expr(order[len(order) // 2:])
        for name, sql, arg in (
                ("rows alone", "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", e),
                ("bm25, the channel's query (800 rows)", bm25 + " ORDER BY s LIMIT 800", e),
                ("bm25 of the rare half", bm25, rare),
                ("bm25 of (rare) AND (common)", bm25, f"({rare}) AND ({common})"),
                ("bm25 of all NOT ((common) NOT (rare))", bm25, f"({e}) NOT (({common}) NOT ({rare}))")):
            got.setdefault(name, []).append(best(lambda: conn.execute(sql, (arg,)).fetchall()))
        got.setdefault("fts5vocab instances, weighted hits per row", []).append(best(lambda: [conn.execute(
            f"SELECT doc, sum({weight_sql}) FROM temp.bench_instances WHERE term = ? GROUP BY doc", (t,)).fetchall()
            for t in tri]))
    view.close()
    return {"titles": len(queries), "postings": [q[0] for q in queries],
            "ms_median": {k: round(statistics.median(v), 2) for k, v in got.items()}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, required=True, help="An index (bench_scale's --work/index-N/index.sqlite).")
    ap.add_argument("--queries", type=int, default=200, help="Note titles, copy numbers stripped, seeded order.")
    ap.add_argument("--limit", type=int, default=200, help="Rows asked of FTS5: the sparse channel asks depth x 4.")
    ap.add_argument("--share", type=float, default=0.6, help="Postings read before giving up, a share of the query's.")
    ap.add_argument("--rescored", type=int, default=MAX_RESCORED, help="Rows scored from text before giving up.")
    ap.add_argument("--sql", action="store_true", help="FTS5's costs by MATCH text on the 15 heaviest titles instead.")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bm25_bound.json")
    args = ap.parse_args()
    import os
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC"), "load": round(os.getloadavg()[0], 1),
              **(sql_costs(args.db) if args.sql else
                 measure(args.db, args.queries, args.limit, args.share, args.rescored))}
    done = json.loads(args.out.read_text()) if args.out.exists() else {}
    done[f"{args.db.parent.name}/sql" if args.sql else
         f"{args.db.parent.name}/limit-{args.limit}/share-{args.share}/rescored-{args.rescored}"] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(done, ensure_ascii=False, indent=1) + "\n")
    print(json.dumps(result, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
