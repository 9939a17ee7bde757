"""Write into an open index connection: chunk and embed notes, insert and delete notes with their chunks,
keep the short-token lists current, and rederive the graph tables (links, entities, co-occurrence,
communities). The caller (indexer.py) owns the transaction these writes run in.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from search_core.index import short_tokens
from search_core.ingest.chunk import chunk_note, dense_selection
from search_core.index.embed_cache import text_hash
from search_core.ingest.graph import LinkResolver, communities, cooccurrence, entities_for, normalize_name
from search_core.ingest.note import Note


def chunk_rows(conn, note_ids: list[str]) -> list[tuple[int, str, str]]:
    rows = []
    for i in range(0, len(note_ids), 500):
        part = note_ids[i:i + 500]
        rows += conn.execute(f"SELECT id, context, text FROM chunks WHERE note_id IN ({','.join('?' * len(part))})",
                             part).fetchall()
    return rows


def next_chunk_id(conn) -> int:
    return (conn.execute("SELECT max(id) FROM chunks").fetchone()[0] or 0) + 1


def update_short_tokens(conn, removed, first_new: int) -> None:
    """Only the lists of the codes that the removed and added chunks contain change (a note: ms);
    an index without the table gets it whole."""
    if not short_tokens.is_built(conn):
        short_tokens.build(conn)
        return
    added = conn.execute("SELECT id, context, text FROM chunks WHERE id >= ?", (first_new,)).fetchall()
    short_tokens.update(conn, removed, added)


def prepare(notes: list[Note], emb, chunk_cfg, cache, progress, keep=frozenset()) -> dict:
    """Chunk the notes and embed what has a vector; chunks in `keep` ((note id, ord) already stored
    exactly so, kept_chunks) are neither embedded nor written again."""
    rows, texts = [], []
    for n in notes:
        chunks = chunk_note(n, chunk_cfg)
        selected = set(dense_selection(len(chunks), chunk_cfg.dense_per_note))
        for c in chunks:
            if (n.id, c.ord) in keep:
                continue
            vec_i = None
            if c.ord in selected:
                vec_i = len(texts)
                texts.append(c.embed_text())
            rows.append((n, c, vec_i))
    counter = {"new": 0}

    def on_batch(done, total):
        counter["new"] = total
        if progress:
            progress("embed", done, total)

    vecs = cache.embed(emb, texts, progress=on_batch) if texts else np.zeros((0, emb.dim), np.float32)
    return {"notes": notes, "rows": rows, "vecs": vecs, "embedded": counter["new"]}


def _fts_meta(title, aliases, tags, summary) -> tuple:
    """The note's part of each of its chunks' FTS rows (insert_prepared writes them so)."""
    return (title, " ".join(aliases), " ".join(tags), summary)


def kept_chunks(conn, notes: list[Note], chunk_cfg) -> dict[str, list[int]]:
    """For notes already in the index: the ids of stored chunks that the new version has unchanged (same
    ord, heading, text, vector or not) under an unchanged title, aliases, tags and summary (which every
    FTS row of the note repeats). An edit of one paragraph then rewrites one chunk, not the note: its
    FTS rows, vectors, postings and counts stay where they are (johngrib: a note has 19 chunks on average)."""
    out: dict[str, list[int]] = {}
    for n in notes:
        row = conn.execute("SELECT title, aliases, tags, summary FROM notes WHERE id = ?", (n.id,)).fetchone()
        if row is None or _fts_meta(row[0], json.loads(row[1]), json.loads(row[2]), row[3]) != \
                _fts_meta(n.title, n.aliases, n.tags, n.summary):
            continue
        chunks = chunk_note(n, chunk_cfg)
        selected = set(dense_selection(len(chunks), chunk_cfg.dense_per_note))
        want = {c.ord: (" > ".join(c.heading_path), c.context, c.text, text_hash(c.embed_text()), int(c.ord in selected))
                for c in chunks}
        keep = [cid for cid, o, *rest in conn.execute(
            "SELECT id, ord, heading, context, text, text_hash, has_vector FROM chunks WHERE note_id = ?", (n.id,))
            if want.get(o) == tuple(rest)]
        if keep:
            out[n.id] = keep
    return out


def write_notes(conn, notes, stats, emb, chunk_cfg, cache, progress) -> int:
    prepared = prepare(notes, emb, chunk_cfg, cache, progress)
    insert_prepared(conn, prepared, stats)
    return prepared["embedded"]


def delete_notes(conn, ids: list[str]) -> None:
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        marks = ",".join("?" * len(part))
        chunk_ids = [r[0] for r in conn.execute(f"SELECT id FROM chunks WHERE note_id IN ({marks})", part)]
        for j in range(0, len(chunk_ids), 500):
            cpart = chunk_ids[j:j + 500]
            cm = ",".join("?" * len(cpart))
            conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({cm})", cpart)
            conn.execute(f"DELETE FROM chunk_vec WHERE rowid IN ({cm})", cpart)
        conn.execute(f"DELETE FROM notes WHERE id IN ({marks})", part)   # cascades to chunks, links, belongs_to


def delete_chunks(conn, chunk_ids: list[int]) -> None:
    for j in range(0, len(chunk_ids), 500):
        cpart = chunk_ids[j:j + 500]
        cm = ",".join("?" * len(cpart))
        conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({cm})", cpart)
        conn.execute(f"DELETE FROM chunk_vec WHERE rowid IN ({cm})", cpart)
        conn.execute(f"DELETE FROM chunks WHERE id IN ({cm})", cpart)


def insert_prepared(conn, prepared, stats, existing=frozenset()) -> None:
    """Write prepared notes. A note in `existing` keeps its row (updated in place, so the chunks kept
    for it survive: deleting the row would cascade to them); its links and tags are written again."""
    vecs = prepared["vecs"]
    next_id = next_chunk_id(conn)
    for n in prepared["notes"]:
        vf = stats.get(n.id)
        values = (n.id, str(vf.path) if vf else None, n.title, json.dumps(n.aliases, ensure_ascii=False),
                  json.dumps(n.tags, ensure_ascii=False), n.summary, int(n.is_nav), n.nav_reason,
                  n.content_hash, vf.size if vf else None, vf.mtime_ns if vf else None,
                  json.dumps(n.warnings, ensure_ascii=False))
        if n.id in existing:
            conn.execute("UPDATE notes SET path = ?, title = ?, aliases = ?, tags = ?, summary = ?, is_nav = ?, "
                         "nav_reason = ?, content_hash = ?, size = ?, mtime_ns = ?, warnings = ? WHERE id = ?", (*values[1:], n.id))
            conn.execute("DELETE FROM links WHERE src = ?", (n.id,))
            conn.execute("DELETE FROM belongs_to WHERE note_id = ?", (n.id,))
        else:
            conn.execute("INSERT INTO notes(id, path, title, aliases, tags, summary, is_nav, nav_reason, content_hash, "
                         "size, mtime_ns, warnings) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", values)
        conn.executemany("INSERT INTO links(src, target, anchor, kind) VALUES (?,?,?,?)",
                         [(n.id, l.target, l.anchor, l.kind) for l in n.links])
        conn.executemany("INSERT OR IGNORE INTO belongs_to(note_id, tag) VALUES (?, ?)", [(n.id, t) for t in n.tags])
    note_meta = {n.id: n for n in prepared["notes"]}
    chunk_rows, fts_rows, vec_rows = [], [], []
    for n, c, vec_i in prepared["rows"]:
        cid = next_id
        next_id += 1
        chunk_rows.append((cid, n.id, c.ord, " > ".join(c.heading_path), c.context, c.text,
                           text_hash(c.embed_text()), int(vec_i is not None)))
        meta = note_meta[n.id]
        fts_rows.append((cid, meta.title, " ".join(meta.aliases), " ".join(meta.tags), meta.summary,
                         " ".join(c.heading_path) + "\n" + c.text))
        if vec_i is not None:
            vec_rows.append((cid, vecs[vec_i].astype(np.float32).tobytes()))
    conn.executemany("INSERT INTO chunks(id, note_id, ord, heading, context, text, text_hash, has_vector) "
                     "VALUES (?,?,?,?,?,?,?,?)", chunk_rows)
    conn.executemany("INSERT INTO chunks_fts(rowid, title, aliases, tags, summary, body) VALUES (?,?,?,?,?,?)", fts_rows)
    conn.executemany("INSERT INTO chunk_vec(rowid, embedding) VALUES (?, ?)", vec_rows)


def refresh_nav(conn, notes) -> int:
    """Store each note's index-page flag and reason as `notes` (parsed now) say; how many rows changed."""
    have = dict(conn.execute("SELECT id, nav_reason FROM notes"))
    rows = [(int(n.is_nav), n.nav_reason, n.id) for n in notes if n.id in have and have[n.id] != n.nav_reason]
    conn.executemany("UPDATE notes SET is_nav = ?, nav_reason = ? WHERE id = ?", rows)
    return len(rows)


@dataclass(frozen=True)
class GraphBefore:
    """What the graph tables held for the notes an incremental write removes or rewrites, read before
    the delete: the delta update subtracts it."""
    ids: frozenset            # every note id before the write
    edges: dict               # note id -> sorted (src, dst) of its resolved links
    tags: dict                # note id -> sorted distinct tags
    names: dict               # note id -> (title, aliases, tags) as stored: what its entities come from


def graph_before(conn, gone_ids: list[str]) -> GraphBefore:
    edges: dict[str, list] = {n: [] for n in gone_ids}
    tags: dict[str, list] = {n: [] for n in gone_ids}
    for i in range(0, len(gone_ids), 500):
        part = gone_ids[i:i + 500]
        marks = ",".join("?" * len(part))
        for src, dst in conn.execute(f"SELECT src, dst FROM links WHERE src IN ({marks}) AND dst IS NOT NULL", part):
            edges[src].append((src, dst))
        for nid, tag in conn.execute(f"SELECT note_id, tag FROM belongs_to WHERE note_id IN ({marks})", part):
            tags[nid].append(tag)
    return GraphBefore(frozenset(r[0] for r in conn.execute("SELECT id FROM notes")),
                       {k: sorted(v) for k, v in edges.items()}, {k: sorted(set(v)) for k, v in tags.items()},
                       _names(conn, gone_ids))


def _names(conn, note_ids: list[str]) -> dict:
    out = {}
    for i in range(0, len(note_ids), 500):
        part = note_ids[i:i + 500]
        for nid, title, aliases, tags in conn.execute(
                f"SELECT id, title, aliases, tags FROM notes WHERE id IN ({','.join('?' * len(part))})", part):
            out[nid] = (title, aliases, tags)
    return out


def rebuild_graph(conn, emb, cache, progress) -> None:
    """Links, entities, co-occurrence and communities, derived from all notes (a full build)."""
    ids = [r[0] for r in conn.execute("SELECT id FROM notes")]
    resolver = LinkResolver(ids)
    links = conn.execute("SELECT rowid, src, target FROM links").fetchall()
    conn.executemany("UPDATE links SET dst = ? WHERE rowid = ?",
                     [(resolver.resolve(src, target), rid) for rid, src, target in links])
    write_entities(conn, emb, cache, progress)
    conn.execute("DELETE FROM cooccurrence")
    conn.executemany("INSERT INTO cooccurrence(a, b, weight) VALUES (?,?,?)",
                     [(a, b, float(w)) for (a, b), w in sorted(cooccurrence(_tags_by_note(conn)).items())])
    refresh_communities(conn)


def update_graph(conn, emb, cache, progress, before: GraphBefore, written: list[str]) -> dict:
    """The graph tables after an incremental write, moved by the notes that changed instead of derived
    again from all of them: the written notes' links are resolved, and when notes arrived or left, the
    links whose target shares a file name with one of them (no other link can resolve differently);
    entities are rewritten from the first one that differs; co-occurrence counts move by the old and new
    tags of the written notes. Communities (Louvain over the whole graph) are not recomputed for every
    change: see communities_after_update. Returns the communities state."""
    ids = [r[0] for r in conn.execute("SELECT id FROM notes")]
    now = frozenset(ids)
    resolver = LinkResolver(ids)
    written_set = set(written)
    new_links = []
    for i in range(0, len(written), 500):
        part = written[i:i + 500]
        new_links += conn.execute(f"SELECT rowid, src, target FROM links WHERE src IN ({','.join('?' * len(part))})",
                                  part).fetchall()
    conn.executemany("UPDATE links SET dst = ? WHERE rowid = ?",
                     [(resolver.resolve(src, target), rid) for rid, src, target in new_links])
    arrived_or_left = now ^ before.ids
    moved: set[str] = set()              # notes (other than the written ones) whose resolved links changed
    if arrived_or_left:
        stems = {i.rsplit("/", 1)[-1].lower() for i in arrived_or_left}
        redo = []
        for rid, src, target, dst in conn.execute("SELECT rowid, src, target, dst FROM links"):
            if src in written_set:
                continue
            stem = LinkResolver.stem_of(target)
            if stem is None or stem in stems:
                new = resolver.resolve(src, target)
                if new != dst:
                    redo.append((new, rid))
                    moved.add(src)
        conn.executemany("UPDATE links SET dst = ? WHERE rowid = ?", redo)
    if arrived_or_left or _names(conn, written) != {n: before.names[n] for n in written if n in before.names}:
        write_entities(conn, emb, cache, progress)   # else every entity is what it was (0.1-0.3 s saved)
    new_tags = _tags_by_note(conn, written)
    change: dict[tuple[str, str], int] = {}
    for sign, tags_by_note in ((-1, before.tags), (1, new_tags)):
        for (a, b), n in cooccurrence(tags_by_note).items():
            change[(a, b)] = change.get((a, b), 0) + sign * n
    up = [(a, b, float(w)) for (a, b), w in sorted(change.items()) if w]
    conn.executemany("INSERT INTO cooccurrence(a, b, weight) VALUES (?, ?, ?) "
                     "ON CONFLICT(a, b) DO UPDATE SET weight = weight + excluded.weight", up)
    conn.executemany("DELETE FROM cooccurrence WHERE a = ? AND b = ? AND weight <= 0",
                     [(a, b) for a, b, w in up if w < 0])
    new_edges = _edges_of(conn, written)
    changed = set(arrived_or_left) | moved | {
        n for n in written
        if n not in before.ids or before.edges.get(n, []) != new_edges.get(n, []) or before.tags.get(n, []) != new_tags.get(n, [])}
    return communities_after_update(conn, changed, before.ids, now)


def _edges_of(conn, note_ids: list[str]) -> dict[str, list]:
    out: dict[str, list] = {n: [] for n in note_ids}
    for i in range(0, len(note_ids), 500):
        part = note_ids[i:i + 500]
        for src, dst in conn.execute(f"SELECT src, dst FROM links WHERE src IN ({','.join('?' * len(part))}) "
                                     "AND dst IS NOT NULL", part):
            out[src].append((src, dst))
    return {k: sorted(v) for k, v in out.items()}


def _tags_by_note(conn, note_ids: list[str] | None = None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if note_ids is None:
        rows = conn.execute("SELECT note_id, tag FROM belongs_to").fetchall()
    else:
        out = {n: [] for n in note_ids}
        rows = []
        for i in range(0, len(note_ids), 500):
            part = note_ids[i:i + 500]
            rows += conn.execute(f"SELECT note_id, tag FROM belongs_to WHERE note_id IN ({','.join('?' * len(part))})",
                                 part).fetchall()
    for nid, tag in rows:
        out.setdefault(nid, []).append(tag)
    return {k: sorted(set(v)) for k, v in out.items()} if note_ids is not None else out


class _EntityNote:  # the minimum entities_for needs, from the notes table
    __slots__ = ("id", "title", "aliases", "tags")


def write_entities(conn, emb, cache, progress) -> None:
    """Entities from the notes table, numbered in note order as a full build numbers them. Rows before
    the first one that differs are kept (with their vectors); from there on they are rewritten, the
    names' vectors coming from the embedding cache. An edit that leaves titles, aliases and tags alone
    writes nothing."""
    notes = []
    for nid, title, aliases, tags in conn.execute("SELECT id, title, aliases, tags FROM notes ORDER BY id"):
        n = _EntityNote()
        n.id, n.title, n.aliases, n.tags = nid, title, json.loads(aliases), json.loads(tags)
        notes.append(n)
    want = [(name, normalize_name(name), kind, nid) for name, kind, nid in entities_for(notes)]
    have = conn.execute("SELECT name, norm, kind, note_id FROM entities ORDER BY id").fetchall()
    keep = 0
    while keep < min(len(want), len(have)) and tuple(have[keep]) == want[keep]:
        keep += 1
    from search_core.index.layout import ENTITIES_KEPT
    from search_core.index.store import get_meta, set_meta
    # which rows this write left as they were, for the layout file (it lends their vectors, layout.py);
    # stamped with the generation before this write's bump
    set_meta(conn, ENTITIES_KEPT, {"generation": get_meta(conn, "generation", 0), "kept": keep})
    if keep == len(want) == len(have):
        return
    conn.execute("DELETE FROM entities WHERE id > ?", (keep,))
    conn.execute("DELETE FROM entity_vec WHERE rowid > ?", (keep,))
    rest = want[keep:]
    conn.executemany("INSERT INTO entities(id, name, norm, kind, note_id) VALUES (?,?,?,?,?)",
                     [(keep + i + 1, *row) for i, row in enumerate(rest)])
    if rest:
        vecs = cache.embed(emb, [name for name, _, _, _ in rest],
                           progress=(lambda d, t: progress("entities", d, t)) if progress else None)
        conn.executemany("INSERT INTO entity_vec(rowid, embedding) VALUES (?, ?)",
                         [(keep + i + 1, v.astype(np.float32).tobytes()) for i, v in enumerate(vecs)])


COMMUNITIES_META = "communities"
# Louvain over johngrib's 974 notes costs 0.35-1.3 s: more than the rest of a one-note update. An update
# that changes the graph (links, small tags, notes arriving or leaving) places a new note with most of
# its neighbours and marks the communities stale; they are recomputed once the notes whose graph changed
# since the last computation reach this many (or 2% of the notes, whichever is more), by `autoresearch
# index --communities`, or by a watcher that has been idle for a while (watch.py).
COMMUNITIES_STALE_BUDGET = 20


def communities_state(conn) -> dict:
    from search_core.index.store import get_meta
    return get_meta(conn, COMMUNITIES_META) or {"current": False, "stale_notes": None, "computed_at": None}


def refresh_communities(conn) -> dict:
    """Louvain over the whole graph, as a full build runs it. Inside the writer's transaction."""
    from search_core.index.store import set_meta
    ids = [r[0] for r in conn.execute("SELECT id FROM notes")]
    edges = conn.execute("SELECT src, dst FROM links WHERE dst IS NOT NULL").fetchall()
    conn.execute("DELETE FROM communities")
    conn.executemany("INSERT INTO communities(note_id, community) VALUES (?, ?)",
                     sorted(communities(ids, edges, _tags_by_note(conn)).items()))
    state = {"current": True, "stale_notes": 0, "computed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    set_meta(conn, COMMUNITIES_META, state)
    return state


def communities_after_update(conn, changed: set[str], ids_before: frozenset, ids_now: frozenset) -> dict:
    from search_core.index.store import set_meta
    state = communities_state(conn)
    if not changed:
        return state
    stale = (state.get("stale_notes") or 0) + len(changed)
    if stale >= max(COMMUNITIES_STALE_BUDGET, len(ids_now) // 50):
        return refresh_communities(conn)
    gone = sorted(ids_before - ids_now)
    conn.executemany("DELETE FROM communities WHERE note_id = ?", [(n,) for n in gone])
    have = dict(conn.execute("SELECT note_id, community FROM communities"))
    nxt = max(have.values(), default=-1) + 1
    for nid in sorted(ids_now - set(have)):
        near = Counter()
        for (other,) in conn.execute("SELECT dst FROM links WHERE src = ? AND dst IS NOT NULL AND dst != src "
                                     "UNION ALL SELECT src FROM links WHERE dst = ? AND src != dst", (nid, nid)):
            if other in have:
                near[have[other]] += 1
        if near:
            have[nid] = min(near.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        else:
            have[nid], nxt = nxt, nxt + 1
        conn.execute("INSERT INTO communities(note_id, community) VALUES (?, ?)", (nid, have[nid]))
    state = {"current": False, "stale_notes": stale, "computed_at": state.get("computed_at")}
    set_meta(conn, COMMUNITIES_META, state)
    return state
