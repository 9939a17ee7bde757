"""Write into an open index connection: chunk and embed notes, insert and delete notes with their chunks,
keep the short-token lists current, and rederive the graph tables (links, entities, co-occurrence,
communities). The caller (indexer.py) owns the transaction these writes run in.
"""

from __future__ import annotations

import json

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


def prepare(notes: list[Note], emb, chunk_cfg, cache, progress) -> dict:
    rows, texts = [], []
    for n in notes:
        chunks = chunk_note(n, chunk_cfg)
        selected = set(dense_selection(len(chunks), chunk_cfg.dense_per_note))
        for c in chunks:
            vec_i = None
            if c.ord in selected:
                vec_i = len(texts)
                texts.append(c.embed_text())
            rows.append((n, c, vec_i))
    counter = {"new": 0}

    def on_batch(done, total):
        counter["new"] = total
        if progress:
            counter.setdefault("done", 0)
            counter["done"] += done
            progress("embed", counter["done"], total)

    vecs = cache.embed(emb, texts, progress=on_batch) if texts else np.zeros((0, emb.dim), np.float32)
    return {"notes": notes, "rows": rows, "vecs": vecs, "embedded": counter["new"]}


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


def insert_prepared(conn, prepared, stats) -> None:
    vecs = prepared["vecs"]
    next_id = next_chunk_id(conn)
    for n in prepared["notes"]:
        vf = stats.get(n.id)
        conn.execute("INSERT INTO notes(id, path, title, aliases, tags, summary, is_nav, content_hash, size, mtime_ns,"
                     " warnings) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                     (n.id, str(vf.path) if vf else None, n.title, json.dumps(n.aliases, ensure_ascii=False),
                      json.dumps(n.tags, ensure_ascii=False), n.summary, int(n.is_nav), n.content_hash,
                      vf.size if vf else None, vf.mtime_ns if vf else None,
                      json.dumps(n.warnings, ensure_ascii=False)))
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


def rebuild_graph(conn, emb, cache, progress) -> None:
    """Links, entities, co-occurrence and communities are derived from all notes; recomputed in the same
    transaction (a second on 1,000 notes), so a new note can resolve links that were dangling before."""
    ids = [r[0] for r in conn.execute("SELECT id FROM notes")]
    resolver = LinkResolver(ids)
    links = conn.execute("SELECT rowid, src, target FROM links").fetchall()
    conn.executemany("UPDATE links SET dst = ? WHERE rowid = ?",
                     [(resolver.resolve(src, target), rid) for rid, src, target in links])
    edges = conn.execute("SELECT src, dst FROM links WHERE dst IS NOT NULL").fetchall()
    tags_by_note: dict[str, list[str]] = {}
    for nid, tag in conn.execute("SELECT note_id, tag FROM belongs_to"):
        tags_by_note.setdefault(nid, []).append(tag)

    class _N:  # the minimum entities_for needs, from the notes table
        __slots__ = ("id", "title", "aliases", "tags")

    notes = []
    for nid, title, aliases, tags in conn.execute("SELECT id, title, aliases, tags FROM notes ORDER BY id"):
        n = _N()
        n.id, n.title, n.aliases, n.tags = nid, title, json.loads(aliases), json.loads(tags)
        notes.append(n)
    ents = entities_for(notes)
    conn.execute("DELETE FROM entities")
    conn.execute("DELETE FROM entity_vec")
    conn.executemany("INSERT INTO entities(id, name, norm, kind, note_id) VALUES (?,?,?,?,?)",
                     [(i + 1, name, normalize_name(name), kind, nid) for i, (name, kind, nid) in enumerate(ents)])
    if ents:
        vecs = cache.embed(emb, [name for name, _, _ in ents],
                           progress=(lambda d, t: progress("entities", d, t)) if progress else None)
        conn.executemany("INSERT INTO entity_vec(rowid, embedding) VALUES (?, ?)",
                         [(i + 1, v.astype(np.float32).tobytes()) for i, v in enumerate(vecs)])
    conn.execute("DELETE FROM cooccurrence")
    conn.executemany("INSERT INTO cooccurrence(a, b, weight) VALUES (?,?,?)",
                     [(a, b, float(w)) for (a, b), w in sorted(cooccurrence(tags_by_note).items())])
    conn.execute("DELETE FROM communities")
    conn.executemany("INSERT INTO communities(note_id, community) VALUES (?, ?)",
                     sorted(communities(ids, edges, tags_by_note).items()))
