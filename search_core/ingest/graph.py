"""The link graph: resolve [[links]] to note ids, name entities, count co-occurrence, find communities."""

from __future__ import annotations

import posixpath
import re
from collections import Counter, defaultdict
from itertools import combinations

TAG_EDGE_MAX_NOTES = 50   # a tag on more notes than this is a category, not a relation; it would add a clique


def normalize_name(name: str) -> str:
    return re.sub(r"\s+", " ", name.strip().lower())


class LinkResolver:
    """Obsidian-style resolution: absolute path, path relative to the linking note, vault path, then file name
    (shortest path wins, as in Obsidian). Case-insensitive as a last resort."""

    def __init__(self, note_ids):
        self.ids = set(note_ids)
        self.lower = {i.lower(): i for i in sorted(self.ids)}
        self.by_stem: dict[str, list[str]] = defaultdict(list)
        for i in sorted(self.ids, key=lambda x: (x.count("/"), len(x), x)):
            self.by_stem[i.rsplit("/", 1)[-1].lower()].append(i)

    def _exact(self, cand: str) -> str | None:
        if cand in self.ids:
            return cand
        return self.lower.get(cand.lower())

    @staticmethod
    def _clean(target: str) -> str:
        t = target.strip().replace("\\", "/")
        if t.lower().endswith(".md"):
            t = t[:-3]
        return t.rstrip("/")

    @classmethod
    def stem_of(cls, target: str) -> str | None:
        """The lower-cased file name every candidate for `target` has (the only ids whose arrival or
        departure can change where it resolves), or None when that is not so: a link into its own note,
        or a path ending in '.' or '..' that normpath folds into a folder's name."""
        t = cls._clean(target)
        stem = t.rsplit("/", 1)[-1].lower()
        return None if not t or stem in (".", "..") else stem

    def resolve(self, src: str, target: str) -> str | None:
        t = self._clean(target)
        if not t:
            return src   # [[#heading]] points into the note itself
        if t.startswith("/"):
            return self._exact(t.lstrip("/")) or self._by_stem(t)
        folder = posixpath.dirname(src)
        rel = posixpath.normpath(posixpath.join(folder, t)) if folder else posixpath.normpath(t)
        return self._exact(rel) or self._exact(t) or self._by_stem(t)

    def _by_stem(self, t: str) -> str | None:
        stem = t.rsplit("/", 1)[-1].lower()
        cands = self.by_stem.get(stem, [])
        tail = t.lstrip("/").lower()
        cands = [c for c in cands if c.lower().endswith(tail)] or ([] if "/" in t.strip("/") else cands)
        return cands[0] if cands else None


def entities_for(notes) -> list[tuple[str, str, str | None]]:
    """(name, kind, note_id): each note's title and aliases point at the note; tags stand alone."""
    out, seen = [], set()
    for n in notes:
        for name, kind, nid in [(n.title, "note", n.id)] + [(a, "alias", n.id) for a in n.aliases] + \
                               [(t, "tag", None) for t in n.tags]:
            key = (normalize_name(name), kind, nid)
            if key[0] and key not in seen:
                seen.add(key)
                out.append((name.strip(), kind, nid))
    return out


def cooccurrence(tags_by_note: dict[str, list[str]]) -> Counter:
    """How often two tags sit on the same note (pairs stored once, a < b)."""
    counts: Counter = Counter()
    for tags in tags_by_note.values():
        for a, b in combinations(sorted(set(tags))[:30], 2):   # 30 tags -> 435 pairs: a cap for tag dumps
            counts[(a, b)] += 1
    return counts


def communities(note_ids, edges, tags_by_note: dict[str, list[str]], seed: int = 0) -> dict[str, int]:
    """Louvain communities over links plus small shared tags. Deterministic under a seed, and a function
    of the graph alone: edges are added in sorted order, so an index updated note by note and one built
    from scratch (whose link rows come in another order) get the same communities."""
    import networkx as nx     # here, not at the top: importing it is 0.3-1.7 s of every `index` process start
    g = nx.Graph()
    g.add_nodes_from(sorted(note_ids))
    for a, b in sorted(edges):
        if a != b:
            w = g.get_edge_data(a, b, {"weight": 0})["weight"]
            g.add_edge(a, b, weight=w + 1.0)
    members: dict[str, list[str]] = defaultdict(list)
    for nid, tags in tags_by_note.items():
        for t in tags:
            members[t].append(nid)
    for t, ns in sorted(members.items()):
        if 1 < len(ns) <= TAG_EDGE_MAX_NOTES:
            w = 1.0 / (len(ns) - 1)
            for a, b in combinations(sorted(ns), 2):
                prev = g.get_edge_data(a, b, {"weight": 0})["weight"]
                g.add_edge(a, b, weight=prev + w)
    if g.number_of_edges() == 0:
        return {n: i for i, n in enumerate(sorted(note_ids))}
    parts = nx.community.louvain_communities(g, weight="weight", seed=seed)
    parts = sorted(parts, key=lambda p: (-len(p), min(p)))
    return {n: ci for ci, part in enumerate(parts) for n in part}
