"""The search behind the recall path: one warm Searcher opened lazily, gated like `search` (the index's
gate model, else the shipped default, else the cosine gate), with query vectors from the engine's
bounded LRU (search_core.search.query_cache): recall asks the same thing often."""

from __future__ import annotations

from pathlib import Path

from search_core import SearchCoreError
from search_core.config import SearchConfig, load_config
from search_core.search.query_cache import QUERY_CACHE, QueryEmbeddingCache


def is_query_error(e: BaseException) -> bool:
    """The query's own fault (it is empty), not the index's or the model's: the searcher stays open, and
    /healthz does not count it as a failing search."""
    return isinstance(e, SearchCoreError) and "query is empty" in str(e)


class SearchBackend:
    """One warm Searcher over `db`, opened lazily (a missing or locked index fails this call, not the
    process) and reopened after a failure. Not thread-safe by itself: RecallEngine serializes calls."""

    def __init__(self, db: str | Path, cfg: SearchConfig | None = None, *, config_path: str | Path | None = None,
                 query_cache: QueryEmbeddingCache | None = None, gate: str | Path | None = None,
                 follow: bool = True):
        self.db = Path(db)
        # True: a changed index gets its new view built off the search thread, which answers from the old
        # one meanwhile (search_core/index/handle.py); False: the next search builds it
        self.follow = follow
        self._cfg = cfg
        self._config_path = config_path
        self.query_cache = query_cache if query_cache is not None else QUERY_CACHE
        # None: what `search` uses (<db>.gate.json, else the shipped default model, else cosine);
        # "cosine": the top-cosine threshold of the config only; a path: that gate model file
        self.gate = gate
        self.searcher = None
        self.cfg: SearchConfig | None = None
        # set by the engine: called from the index follower when a new view is ready (IndexHandle.on_ready)
        self.on_view_ready = None

    def _open(self):
        if self.searcher is None:
            from search_core.gate.request import GateRequest
            from search_core.search.pipeline import Searcher
            gate = GateRequest.cosine("the recall config asks for the cosine gate") if self.gate == "cosine" \
                else GateRequest(path=self.gate)             # the same gate `search` reports
            s = Searcher(self.db, follow=self.follow, query_cache=self.query_cache, gate=gate)
            s.index.on_ready = self.on_view_ready
            base = self._cfg or load_config(self._config_path)
            self.cfg = base.replace(embedder=s.embedder_name)
            self.searcher = s
        return self.searcher

    def search(self, query: str, top_k: int | None = None):
        try:
            s = self._open()
            cfg = self.cfg if top_k is None else self.cfg.replace(top_k=top_k)
            return s.search(query, cfg)
        except SearchCoreError as e:
            if not is_query_error(e):
                self.reset()
            raise
        except Exception:
            self.reset()          # a locked/replaced file or a dead model server: start clean next call
            raise

    def read_notes(self, refs: list[str], cap: int | None = None):
        """Whole notes by id or path (search_core.recall.notes), from the view searches use."""
        from search_core.recall.notes import MAX_NOTE_CHARS, read_notes
        return read_notes(self._open().view, refs, MAX_NOTE_CHARS if cap is None else cap)

    @property
    def fingerprint_key(self) -> str | None:
        return self.searcher.fingerprint_key if self.searcher is not None else None

    @property
    def index_id(self) -> str | None:
        """The recall log's key for this index (search_core.recall.log.index_id): same build, same key."""
        from search_core.recall.log import index_id
        return index_id(self.searcher.fingerprint) if self.searcher is not None else None

    def swap_view(self) -> None:
        """On the searching thread, between two searches: take a view the follower has ready (the old one's
        snapshot is let go); a failure is left for the next search to hear."""
        if self.searcher is not None:
            try:
                self.searcher.index.refresh()
            except Exception:      # noqa: BLE001
                pass

    def reset(self):
        s, self.searcher = self.searcher, None
        if s is not None:
            try:
                s.close()
            except Exception:
                pass
