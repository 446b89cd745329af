"""How a figure is estimated and printed: intervals, agreement, rankings (``stats.py``) and the
way report.md and the CLI print a value (``formatting.py``); pure, with no other judgeq import,
so every section of a report, whichever kind of job it belongs to, uses the same ones."""

__all__: list[str] = []
