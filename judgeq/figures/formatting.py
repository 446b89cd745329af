"""How report.md, compare.md and the CLI print figures: a value, a p-value, a value with its
95% interval; a missing figure is an en dash, never ``None`` or ``nan``."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["decimals", "fmt", "fmt_ci", "fmt_count", "fmt_p", "p_is"]


def decimals(suffix: str, nd: int | None) -> int:
    return nd if nd is not None else 1 if suffix == "%" else 2


def fmt(x: Any, suffix: str = "", nd: int | None = None) -> str:
    """A figure as report.md prints it: floats with ``nd`` decimals (by default 2, and 1 for a
    percentage: ``6.44``, ``75.0%``); a figure those decimals would show as 0 with two
    significant digits (``0.02%``, never ``0.0%`` for a rate that is not 0)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, float):
        nd = decimals(suffix, nd)
        if x and round(x, nd) == 0:  # 0.02% is not 0.0%: two significant digits
            return f"{x:.2g}{suffix}"
        return f"{x:.{nd}f}{suffix}"
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}{suffix}"
    return f"{x}{suffix}"


def fmt_count(n: Any) -> str:
    """A count with thousands separators (``20,000``, never ``2e+04``)."""
    return "–" if n is None else f"{int(n):,}"


def p_is(p: float | None) -> str:
    """A p-value in a sentence: ``p = 0.012``, ``p < 0.001`` (never ``p = 0`` nor ``p = < 0.001``)."""
    if p is None or not math.isfinite(p):
        return "p –"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def fmt_p(p: float | None) -> str:
    """A p-value: three decimals, or ``< 0.001``."""
    if p is None:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def fmt_ci(x: Any, ci: list[float] | None, suffix: str = "", nd: int | None = None) -> str:
    """``6.44 (6.21-6.67)``: a value with its 95% interval (just the value when it has none);
    an interval with a negative bound reads ``-0.09 (-0.89 to 0.71)``."""
    if x is None:
        return "–"
    if not ci:
        return fmt(x, suffix, nd)
    nd = decimals(suffix, nd)
    low, high = (f"{float(b):.{nd}f}" for b in ci)
    return f"{fmt(float(x), suffix, nd)} ({low}{'-' if ci[0] >= 0 else ' to '}{high})"
