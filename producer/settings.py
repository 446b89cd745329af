"""Settings from the options of a command or a Python API call (flags named as on the CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judgeq.settings import Settings, load_settings

__all__ = ["FLAGS", "settings_for"]


def settings_for(**flags: Any) -> Settings:
    """``JUDGEQ_*`` settings with the given options on top (None: not given). Option names are
    the CLI's: ``redis_url``, ``rpm``, ``no_cache``, ``batch_api``, ``out``, ..."""
    out = flags.get("out")
    mapping = {
        "redis_url": flags.get("redis_url"),
        "safety_gate": flags.get("safety_gate"),
        "judge_timeout": flags.get("judge_timeout"),
        "judge_deadline": flags.get("judge_deadline"),
        "cache": False if flags.get("no_cache") else None,
        "batch_api": True if flags.get("batch_api") else None,
        "max_cost": flags.get("max_cost"),
        "prices": Path(flags["prices"]) if flags.get("prices") else None,
        "judge_rpm": flags.get("rpm"),
        "judge_itpm": flags.get("itpm"),
        "judge_otpm": flags.get("otpm"),
        "judge_share": flags.get("share"),
        "concurrency": flags.get("concurrency"),
        "results_dir": Path(out) if out is not None else None,
    }
    return load_settings(given_as=FLAGS, **mapping)


FLAGS = {
    "redis_url": "--redis-url",
    "safety_gate": "--safety-gate",
    "judge_timeout": "--judge-timeout",
    "judge_deadline": "--judge-deadline",
    "max_cost": "--max-cost",
    "prices": "--prices",
    "judge_rpm": "--rpm",
    "judge_itpm": "--itpm",
    "judge_otpm": "--otpm",
    "judge_share": "--share",
    "concurrency": "--concurrency",
    "results_dir": "--out",
}
"""The flag each setting given on the command line came from (for its error message)."""
