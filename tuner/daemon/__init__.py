"""The tuning daemon: its validated config, the jobs it runs, and the scheduler with its lock and run table."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "scheduler": ("Daemon", "status", "run_once", "InstanceLock", "LockHeld", "JobRun", "DaemonStatus"),
    "config": ("DaemonConfig", "JobSpec", "load_daemon_config", "DaemonConfigError"),
    "jobs": ("job_index", "job_sweep", "job_report", "job_retest", "job_calibrate"),
})
