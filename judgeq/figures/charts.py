"""Plots as inline SVG, with no other judgeq import but the formatting of a figure: a histogram,
bars and dots with their 95% intervals, a curve, a win matrix. Every text reaches the SVG
escaped. report.html draws its plots with these, and so does each kind's own part of it."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from judgeq.figures.formatting import decimals, fmt

__all__ = [
    "CHAR_W",
    "COLOR",
    "NULL_COLOR",
    "PAD_B",
    "PAD_L",
    "PAD_T",
    "TICK_PX",
    "H",
    "W",
    "axis_number",
    "bars",
    "count_scale",
    "curve",
    "dots",
    "esc",
    "histogram",
    "matrix",
    "nice_ticks",
    "nice_top",
    "with_ci",
]

W, H = 480, 250
PAD_L, PAD_B, PAD_T = 60, 36, 28
TICK_PX = 13
"""Tick labels' size in the plot's units: a plot is never drawn narrower than 420 px (the
page's grid), so they are at least 11 px on screen."""
CHAR_W = 0.62 * TICK_PX
"""About how wide a tick label's character is (to keep labels from overlapping)."""
COLOR = "#3b6ea8"
NULL_COLOR = "#b5523b"


def esc(x: Any) -> str:
    """``x`` as HTML text (quotes escaped too)."""
    return html.escape(str(x), quote=True)


def axis_number(x: float) -> str:
    """A figure on an axis or in a tip: ``20,000`` (never ``2e+04``), ``7.5``, ``0.483``."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else "–"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 1:
        return f"{x:.4g}"
    return f"{x:.3f}".rstrip("0").rstrip(".")


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round ticks covering ``lo``..``hi`` (about ``count`` of them: steps of 1, 2, 2.5 or 5
    x 10^k), so an axis reads -0.3, -0.2, ..., never -0.2415."""
    if hi <= lo:
        hi = lo + 1.0
    step = nice_top((hi - lo) / max(1, count - 1))
    first = math.floor(lo / step + 1e-9) * step
    ticks: list[float] = []
    v = first
    while v < hi + step - 1e-9 and len(ticks) < 4 * count:
        ticks.append(round(v, 10))
        v += step
    return ticks


def _every(labels: Sequence[str], room: float) -> int:
    """Show every n-th of ``labels`` so that no two overlap, each having ``room`` units."""
    widest = max((len(label) for label in labels), default=0) * CHAR_W + 6
    return max(1, math.ceil(widest / max(room, 1.0)))


def _frame(title: str, body: list[str], *, note: str = "", height: int = H, width: int = W) -> str:
    caption = f'<p class="note">{esc(note)}</p>' if note else ""
    return (
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>'
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" xmlns="http://www.w3.org/2000/svg">'
        + "".join(body)
        + f"</svg>{caption}</figure>"
    )


def nice_top(value: float) -> float:
    """The smallest 1, 2, 2.5, 5 or 10 x 10^k at or above ``value`` (round axis ticks in quarters)."""
    if value <= 0:
        return 1.0
    base = 10.0 ** math.floor(math.log10(value))
    return next(base * m for m in (1, 2, 2.5, 5, 10) if base * m >= value - 1e-12)


def count_scale(vmax: float) -> tuple[float, float]:
    """The top of a count axis and its step: whole steps of 1, 2 or 5 x 10^k, at most four of
    them (a count axis never reads 2.5 jobs)."""
    step = 1.0
    k = 0
    while True:
        found = next((m * 10.0**k for m in (1, 2, 5) if m * 10.0**k * 4 >= vmax), None)
        if found is not None:
            step = found
            break
        k += 1
    return step * max(1, math.ceil(vmax / step - 1e-9)), step


def _axis(ymax: float, ylabel: str = "", *, step: float | None = None) -> list[str]:
    out = [
        f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - 10}" y2="{H - PAD_B}" class="axis"/>',
        f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}" class="axis"/>',
    ]
    n = 4 if step is None else round(ymax / step)
    for i in range(n + 1):
        v = ymax * i / n
        y = H - PAD_B - (H - PAD_B - PAD_T) * i / n
        out.append(
            f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{axis_number(v)}</text>'
        )
        if i:
            out.append(f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{W - 10}" y2="{y:.1f}" class="grid"/>')
    if ylabel:
        out.append(f'<text x="{PAD_L + 4}" y="{PAD_T - 12}" class="tick">{esc(ylabel)}</text>')
    return out


LABEL_ROWS = 3
"""Rows a categorical axis staggers its labels on before it shortens them."""


def _label_plan(labels: Sequence[str], span_w: float, categories: bool) -> tuple[list[int], int, int]:
    """Which labels an x axis shows, on how many rows, and their length: a categorical axis (one
    bar per dimension, rank, threshold) shows every label, staggered on up to
    :data:`LABEL_ROWS` rows, shortened beyond; a numeric one (histogram bins) every n-th and
    always the last (the axis is labelled as far as the data goes)."""
    n = len(labels)
    if categories:  # each label whole up to 24 characters, as the rows' room allows
        rows = min(_every([label[:24] for label in labels], span_w), LABEL_ROWS)
        return list(range(n)), rows, max(3, min(24, int((span_w * rows - 6) / CHAR_W)))
    every = _every([label[:14] for label in labels], span_w)
    shown = list(range(0, n, every))
    if shown[-1] != n - 1:
        if n - 1 - shown[-1] < every and len(shown) > 1:
            shown[-1] = n - 1
        elif n - 1 - shown[-1] >= every:
            shown.append(n - 1)
    return shown, 1, 14


def _cut(label: str, chars: int) -> str:
    return label if len(label) <= chars else label[: max(1, chars - 1)] + "…"


def bars(
    title: str,
    labels: Sequence[str],
    values: Sequence[float | None],
    *,
    errors: Sequence[Sequence[float] | None] | None = None,
    ymax: float | None = None,
    ylabel: str = "",
    note: str = "",
    color: str = COLOR,
    counts: bool = False,
    categories: bool = False,
) -> str:
    """Vertical bars, optionally with interval whiskers. ``counts``: the values are counts (the
    axis ticks are whole numbers); ``categories``: every bar is labelled (see
    :func:`_label_plan`). Nothing when no value is known."""
    if not labels or all(v is None for v in values):
        return ""
    vals = [v or 0.0 for v in values]
    tops = [e[1] for e in (errors or []) if e]
    step: float | None = None
    if ymax is not None:
        top = ymax
    elif counts:
        top, step = count_scale(max([*vals, *tops, 1.0]))
    else:
        top = nice_top(max([*vals, *tops, 1e-9]))
    span_w = (W - 10 - PAD_L) / len(labels)
    bw = max(2.0, span_w * 0.7)
    shown, rows, chars = _label_plan(labels, span_w, categories)
    out = _axis(top, ylabel, step=step)

    def y_of(v: float) -> float:
        return H - PAD_B - (H - PAD_B - PAD_T) * min(max(v, 0.0), top) / top

    for i, (label, v) in enumerate(zip(labels, vals, strict=True)):
        x = PAD_L + span_w * i + (span_w - bw) / 2
        y = y_of(v)
        out.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{H - PAD_B - y:.1f}" fill="{color}">'
            f"<title>{esc(label)}: {esc(axis_number(v))}</title></rect>"
        )
        err = errors[i] if errors else None
        if err:
            cx = x + bw / 2
            y0, y1 = y_of(err[0]), y_of(err[1])
            out.append(f'<line x1="{cx:.1f}" y1="{y0:.1f}" x2="{cx:.1f}" y2="{y1:.1f}" class="whisker"/>')
            for yy in (y0, y1):
                out.append(
                    f'<line x1="{cx - 4:.1f}" y1="{yy:.1f}" x2="{cx + 4:.1f}" y2="{yy:.1f}" class="whisker"/>'
                )
    for i in shown:
        text = _cut(labels[i], chars)
        half = len(text) * CHAR_W / 2
        # under its bar, kept inside the plot's box (the last label of a wide axis was cut off)
        x = min(max(PAD_L + span_w * i + span_w / 2, half + 2), W - half - 2)
        y = H - PAD_B + 20 + 17 * (i % rows)
        out.append(f'<text x="{x:.1f}" y="{y}" class="tick" text-anchor="middle">{esc(text)}</text>')
    return _frame(title, out, note=note, height=H + 17 * (rows - 1))


def histogram(
    title: str, hist: Mapping[str, Sequence[float]] | None, *, unit: str = "", note: str = ""
) -> str:
    """A histogram from ``{"edges": [...], "counts": [...]}``."""
    if not hist or not sum(hist.get("counts", [])):
        return ""
    edges, counts = hist["edges"], hist["counts"]
    labels = [f"{axis_number((edges[i] + edges[i + 1]) / 2)}{unit}" for i in range(len(counts))]
    return bars(title, labels, counts, ylabel="jobs", note=note, counts=True)


def dots(
    title: str,
    rows: Sequence[tuple[str, float | None, Sequence[float] | None]],
    *,
    lo: float,
    hi: float,
    note: str = "",
) -> str:
    """One row per label: a dot at the value and its interval as a bar (a leaderboard)."""
    rows = [r for r in rows if r[1] is not None]
    if not rows:
        return ""
    row_h = 30
    height = max(150, PAD_T + row_h * len(rows) + PAD_B)
    chars = max(len(r[0][:24]) for r in rows)
    left, right = min(190.0, chars * CHAR_W + 16), W - 24
    ticks = nice_ticks(lo, hi)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    span = hi - lo or 1.0

    def x_of(v: float) -> float:
        return left + (right - left) * (min(max(v, lo), hi) - lo) / span

    base = height - PAD_B
    out = [f'<line x1="{left}" y1="{base}" x2="{right}" y2="{base}" class="axis"/>']
    every = _every([axis_number(t) for t in ticks], (right - left) / max(1, len(ticks) - 1))
    for i, t in enumerate(ticks):
        out.append(f'<line x1="{x_of(t):.1f}" y1="{PAD_T - 6}" x2="{x_of(t):.1f}" y2="{base}" class="grid"/>')
        if i % every == 0:
            out.append(
                f'<text x="{x_of(t):.1f}" y="{base + 16}" class="tick" text-anchor="middle">{axis_number(t)}</text>'
            )
    for k, (label, value, ci) in enumerate(rows):
        y = PAD_T + row_h * k + row_h / 2
        out.append(
            f'<text x="{left - 8}" y="{y + 4}" class="tick" text-anchor="end">{esc(label[:24])}</text>'
        )
        if ci:
            out.append(
                f'<line x1="{x_of(ci[0]):.1f}" y1="{y}" x2="{x_of(ci[1]):.1f}" y2="{y}" class="interval"/>'
            )
        tip = f"{label}: {axis_number(value or 0)}" + (
            f" ({axis_number(ci[0])} to {axis_number(ci[1])})" if ci else ""
        )
        out.append(
            f'<circle cx="{x_of(value or 0):.1f}" cy="{y}" r="6" fill="{COLOR}"><title>{esc(tip)}</title></circle>'
        )
    return _frame(title, out, note=note, height=height)


def curve(
    title: str, points: Sequence[tuple[str, float | None]], *, ymax: float = 100.0, note: str = ""
) -> str:
    """A line through (label, value) points (a hit@k curve)."""
    pts = [(label, v) for label, v in points if v is not None]
    if not pts:
        return ""
    out = _axis(ymax, "%")
    step = (W - 10 - PAD_L - 20) / max(1, len(pts) - 1)
    every = _every([label for label, _ in pts], step)
    coords = []
    for i, (label, v) in enumerate(pts):
        x = PAD_L + 10 + step * i
        y = H - PAD_B - (H - PAD_B - PAD_T) * min(v or 0, ymax) / ymax
        coords.append(f"{x:.1f},{y:.1f}")
        out.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{COLOR}"><title>{esc(label)}: {esc(axis_number(v or 0))}%</title></circle>'
        )
        if i % every == 0:
            out.append(
                f'<text x="{x:.1f}" y="{H - PAD_B + 20}" class="tick" text-anchor="middle">{esc(label)}</text>'
            )
    out.insert(2, f'<polyline points="{" ".join(coords)}" fill="none" stroke="{COLOR}" stroke-width="2"/>')
    return _frame(title, out, note=note)


def matrix(title: str, pairs: Sequence[Mapping[str, Any]], *, note: str = "") -> str:
    """The pairwise win matrix: row model's win rate against the column model (ties half)."""
    if not pairs:
        return ""
    rate: dict[tuple[str, str], float] = {}
    for p in pairs:
        rate[(p["model"], p["opponent"])] = p["win_rate"]
        rate[(p["opponent"], p["model"])] = round(100 - p["win_rate"], 2)
    models = sorted({m for key in rate for m in key})
    left = min(170.0, max(len(m[:18]) for m in models) * CHAR_W + 14)
    cell = max(36.0, min(72.0, (W - left - 8) / max(1, len(models))))
    width = max(W, int(left + cell * len(models) + 8))
    height = int(48 + cell * len(models) + 10)
    out = []
    for j, m in enumerate(models):
        out.append(
            f'<text x="{left + cell * j + cell / 2:.1f}" y="34" class="tick" text-anchor="middle">'
            f"{esc(m[: max(4, int(cell / CHAR_W))])}</text>"
        )
    for i, a in enumerate(models):
        y = 44 + cell * i
        out.append(
            f'<text x="{left - 8:.1f}" y="{y + cell / 2 + 5:.1f}" class="tick" text-anchor="end">{esc(a[:18])}</text>'
        )
        for j, b in enumerate(models):
            x = left + cell * j
            v = rate.get((a, b))
            if v is None:
                out.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{cell - 2:.1f}" height="{cell - 2:.1f}" fill="#eee"/>'
                )
                continue
            strength = min(1.0, abs(v - 50) / 50)
            shade = int(225 - 150 * strength)
            fill = f"rgb({shade},{shade},255)" if v >= 50 else f"rgb(255,{shade},{shade})"
            ink = "#fff" if strength > 0.55 else "#111"
            out.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{cell - 2:.1f}" height="{cell - 2:.1f}" fill="{fill}">'
                f"<title>{esc(a)} vs {esc(b)}: {esc(axis_number(v))}%</title></rect>"
                f'<text x="{x + cell / 2 - 1:.1f}" y="{y + cell / 2 + 5:.1f}" class="cell" fill="{ink}" '
                f'text-anchor="middle">{esc(axis_number(v))}</text>'
            )
    return _frame(title, out, note=note, height=height, width=width)


def with_ci(value: Any, ci: Any, suffix: str = "", nd: int | None = None) -> str:
    """A figure with its 95% interval: ``71.2% (65.1–76.6%)``; an en dash for none."""
    if value is None:
        return "–"
    text = fmt(value, suffix, nd)
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and None not in ci:
        places = decimals(suffix, nd)
        text += f" ({fmt(ci[0], '', places)}–{fmt(ci[1], suffix, places)})"
    return text
