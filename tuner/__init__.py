"""tuner: evaluation, caches, the round loop, ledger, daemon, reports, and the autoresearch CLI."""
