"""Promotion: a sweep winner becomes the active config only when it held on the holdout; history and rollback."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "promote": ("Active", "read_active", "decide_promotion", "holdout_verdict", "rollback", "resolve_search_config", "runs_dir",
                "Promotion", "PromotionEvent", "Rollback"),
    "config_toml": ("config_toml",),
})
