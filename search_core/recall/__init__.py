"""The recall path for agents: the engine, the search behind it, its log, and the HTTP, MCP and stdlib clients.

The servers (starlette, mcp) are not re-exported: import search_core.recall.server / .mcp where they are run."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "engine": ("RecallEngine", "RecallBlock", "RecallConfig", "load_recall_config"),
    "backend": ("SearchBackend",),
    "log": ("RecallLog", "log_search", "read_calls", "recall_stats", "label_calls"),
    "client": ("RecallClient", "RecallError"),
})
