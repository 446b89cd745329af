"""``report.html``: one self-contained page (no network, no external file) from a report.

Plots are inline SVG drawn here from ``report.json`` (a histogram, bars and dots with their 95%
intervals, a curve, a win matrix); the table of jobs is built in the browser from a JSON block
by a small script (sort by any column; filter by model, score range, null reason and text;
long texts shortened with a button to expand).  Every text from a batch or a judge reaches the
page as data: escaped in SVG, set with ``textContent`` in the table, and the JSON block cannot
close its ``<script>`` element (``</`` is written ``<\\/``).

The table holds the first :data:`MAX_ROWS` jobs in input order (the page says so when there
are more; ``verdicts.jsonl`` has every job).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from judgeq.figures.formatting import decimals, fmt, fmt_count
from judgeq.grading.result import Result
from judgeq.jobs.kinds import KINDS

__all__ = [
    "COLOR",
    "MAX_ROWS",
    "NULL_COLOR",
    "TEXT_LIMIT",
    "axis_number",
    "bars",
    "charts",
    "count_scale",
    "curve",
    "dots",
    "esc",
    "headline_cards",
    "histogram",
    "matrix",
    "nice_ticks",
    "nice_top",
    "render_html",
    "table_rows",
]

MAX_ROWS = 5000
TEXT_LIMIT = 4000
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


def _short(text: Any) -> str | None:
    if text is None:
        return None
    s = str(text)
    return s if len(s) <= TEXT_LIMIT else s[:TEXT_LIMIT] + f"… [{len(s):,} characters]"


def table_rows(results: Sequence[Result], texts: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    """The table's data: one dict per job (texts from the batch, when it could be read)."""
    rows = []
    for r in results:
        t = texts.get(r.job_id, {})
        verdict = r.winner or (("pass" if r.passed else "fail") if r.passed is not None else None)
        kind = KINDS.get(r.kind)
        rows.append(
            {
                "id": r.job_id,
                "model": kind.shown_model(r) if kind is not None else r.model,
                "score": r.overall,
                "verdict": verdict if r.status == "graded" else None,
                "null": r.null_reason,
                "reasoning": _short(
                    r.notes
                    or r.llm_reasoning
                    or (r.raw if r.status == "null" else None)
                    or (
                        "; ".join(f"{k}: {v}" for k, v in r.check_failures.items())
                        if r.check_failures
                        else None
                    )
                ),
                "input": _short(t.get("input")),
                "output": _short(t.get("output")),
                "label": r.label,
                "flags": ", ".join(r.flags),
            }
        )
    return rows


def kind_sections(report: Mapping[str, Any], texts: Mapping[str, Mapping[str, str]]) -> str:
    """Each kind's own part of the page (:attr:`JobKind.html`: a conversation run's worst
    transcripts), in the registry's order."""
    return "".join(
        kind.html(report.get(kind.section), texts)
        for kind in KINDS.values()
        if kind.html is not None and kind.section is not None
    )


def _summary(report: Mapping[str, Any]) -> str:
    c = report["counts"]
    use = report.get("usage", {})
    cost = use.get("estimated_cost_usd")
    cards = [
        ("jobs", f"{c['total']:,}"),
        ("graded", f"{c['graded']:,}"),
        ("null", f"{c['null']:,}"),
        ("coverage", f"{report.get('coverage')}%"),
        ("cost", f"${cost:.4f}" if isinstance(cost, (int, float)) else "unknown"),
        ("tokens", f"{use.get('input_tokens', 0):,} in / {use.get('output_tokens', 0):,} out"),
    ]
    cards[3] = ("coverage", fmt(report.get("coverage"), "%"))
    cards[4:4] = headline_cards(report)
    out = ['<div class="cards">']
    out += [
        f'<div class="card"><div class="k">{esc(k)}</div><div class="v">{esc(v)}</div></div>'
        for k, v in cards
    ]
    out.append("</div>")
    nulls = c.get("null_by_reason") or {}
    if nulls:
        out.append(
            "<p>Nulls by reason: " + ", ".join(f"<b>{esc(k)}</b> {v:,}" for k, v in nulls.items()) + "</p>"
        )
    return "".join(out)


def _with_ci(value: Any, ci: Any, suffix: str = "", nd: int | None = None) -> str:
    if value is None:
        return "–"
    text = fmt(value, suffix, nd)
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and None not in ci:
        places = decimals(suffix, nd)
        text += f" ({fmt(ci[0], '', places)}–{fmt(ci[1], suffix, places)})"
    return text


def headline_cards(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's headline figures as numbers, by kind of run: a pairwise run's win rates (ties
    as half), position consistency and agreement with labels; a retrieval run's accuracy,
    Hit@1, Hit@5 and MRR; else the mean overall score; each with its 95% interval."""
    cards: list[tuple[str, str]] = []
    pw = report.get("pairwise")
    if pw:
        for pair in (pw.get("pairs") or [])[:3]:
            cards.append(
                (
                    f"{pair['model']} over {pair['opponent']} (ties as half)",
                    _with_ci(pair.get("win_rate"), pair.get("win_rate_ci95"), "%"),
                )
            )
        cards.append(
            (
                "position consistency",
                _with_ci(pw.get("position_consistency"), pw.get("position_consistency_ci95"), "%"),
            )
        )
        pairs = (report.get("agreement") or {}).get("pairs")
        if pairs:
            cards.append(
                (
                    "agreement with labels (ties as half)",
                    _with_ci(pairs.get("accuracy_ties_half"), pairs.get("accuracy_ties_half_ci95"), "%"),
                )
            )
        return cards
    rt = report.get("retrieval")
    if rt:
        ci = rt.get("ci95") or {}
        cards += [
            ("accuracy (needle retrieved)", _with_ci(rt.get("accuracy"), ci.get("accuracy"), "%")),
            ("Hit@1", _with_ci(rt.get("hit_at_1_rate"), ci.get("hit_at_1_rate"), "%")),
            ("Hit@5", _with_ci(rt.get("hit_at_5_rate"), ci.get("hit_at_5_rate"), "%")),
            ("MRR", _with_ci(rt.get("mrr"), ci.get("mrr"), nd=3)),
        ]
    o = report.get("overall") or {}
    if o.get("mean") is not None:
        cards.append(("mean LLM grade" if rt else "mean score", _with_ci(o["mean"], o.get("ci95"))))
    if report.get("pass_rate") is not None and not rt:
        cards.append(("pass rate", _with_ci(report["pass_rate"], report.get("pass_rate_ci95"), "%")))
    return cards


def charts(report: Mapping[str, Any]) -> list[str]:
    """Every plot the report's figures allow."""
    rubric = report.get("rubric") or {}
    scale = str(rubric.get("scale") or "")
    out: list[str] = []
    dist = report.get("distributions") or {}
    if scale == "pairwise":
        out.append(
            histogram(
                "Output A's score (graded pairs)", dist.get("overall"), note="0: B won, 0.5: tie, 1: A won"
            )
        )
    else:
        out.append(histogram("Overall score (graded jobs)", dist.get("overall")))
    dims = report.get("dimensions") or {}
    if dims:
        names = list(dims)
        top = 1.0 if scale in ("pass-fail", "pairwise") else _scale_range(scale)[1]
        out.append(
            bars(
                "Mean per dimension, with 95% intervals",
                names,
                [dims[d]["mean"] for d in names],
                errors=[dims[d].get("ci95") for d in names],
                ymax=top,
                note="over graded jobs",
                categories=True,
            )
        )
    graded = (report.get("counts") or {}).get("graded")
    if graded == 0:
        nulls = (report.get("counts") or {}).get("null", 0)
        out.append(
            '<figure class="chart"><figcaption>No job was graded</figcaption><p class="note">'
            f"All {esc(fmt_count(nulls))} results are null (their causes are in the summary above): "
            "there is no score, pass rate or model to plot.</p></figure>"
        )
    if report.get("pass_rates") and graded != 0:
        ts = list(report["pass_rates"])
        cis = report.get("pass_rates_ci95") or {}
        out.append(
            bars(
                "Pass rate at each threshold (% of all jobs)",
                [f"≥ {t}" for t in ts],
                [report["pass_rates"][t] for t in ts],
                errors=[cis.get(t) for t in ts],
                ymax=100,
                note=f"rubric threshold {rubric.get('pass_threshold')}: {report.get('pass_rate')}%; a null counts as not passed",
                categories=True,
            )
        )
    by_model = report.get("by_model") or {}
    if by_model:
        rows = sorted(
            ((m, s["overall"]["mean"], s["overall"].get("ci95")) for m, s in by_model.items()),
            key=lambda r: -(r[1] if r[1] is not None else -math.inf),
        )
        lo, hi = (0.0, 1.0) if scale in ("pass-fail", "pairwise") else _scale_range(scale)
        out.append(dots("Models: mean overall with 95% intervals", rows, lo=lo, hi=hi))
    out.append(
        histogram(
            "Grading latency", dist.get("latency_ms"), unit=" ms", note="every job that reached the judge"
        )
    )
    rt = report.get("retrieval")
    if rt:
        ranks = rt.get("rank_counts") or {}
        out.append(
            bars(
                "Rank of the first relevant chunk",
                list(ranks),
                list(ranks.values()),
                ylabel="questions",
                counts=True,
                categories=True,
            )
        )
        out.append(
            curve(
                "hit@k (% of questions)", [(f"k={k}", v) for k, v in (rt.get("hit_at_k_rates") or {}).items()]
            )
        )
    pw = report.get("pairwise")
    if pw:
        out.append(matrix("Pairwise win rate (row vs column, ties half)", pw.get("pairs") or []))
        board = pw.get("leaderboard") or []
        if board:
            ratings = [r["rating"] for r in board] + [c for r in board for c in (r.get("ci95") or [])]
            out.append(
                dots(
                    "Bradley-Terry ratings with bootstrap 95% intervals",
                    [(r["model"], r["rating"], r.get("ci95")) for r in board],
                    lo=min(ratings) - 20,
                    hi=max(ratings) + 20,
                )
            )
    return [c for c in out if c]


def _scale_range(scale: str) -> tuple[float, float]:
    lo, _, hi = scale.partition("-")
    try:
        return float(lo), float(hi)
    except ValueError:
        return 0.0, 10.0


def render_html(
    report: Mapping[str, Any],
    results: Sequence[Result],
    texts: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The whole page (see the module docstring)."""
    rows = table_rows(results[:MAX_ROWS], texts or {})
    data = json.dumps({"rows": rows, "total": report["counts"]["total"]}, ensure_ascii=False)
    # inside <script>, no "<" may start "</script" or "<!--": every "<" is the JSON escape
    # \u003c (valid JSON, the same string once parsed); U+2028/9 end a line in old JS engines
    data = data.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    rubric = report.get("rubric") or {}
    judge = report.get("judge") or {}
    subtitle = (
        f"rubric {rubric.get('name')} {rubric.get('version')} (scale {rubric.get('scale')}), judge "
        f"{judge.get('provider')}:{judge.get('model')}, {judge.get('lane', 'live')} lane; jobs file "
        f"{report.get('batch', '')}; started {report.get('started_at')}, finished {report.get('finished_at')}"
    )
    partial = (
        '<p class="warn">Partial report: the run was interrupted; jobs that did not finish are null '
        "<b>canceled</b>.</p>"
        if report.get("partial")
        else ""
    )
    partial += "".join(f'<p class="warn">Warning: {esc(w)}</p>' for w in report.get("warnings") or [])
    more = (
        f'<p class="note">The table shows the first {MAX_ROWS:,} of {report["counts"]["total"]:,} jobs; '
        "verdicts.jsonl has every job.</p>"
        if report["counts"]["total"] > MAX_ROWS
        else ""
    )
    return _PAGE.format(
        title=esc(f"judgeq report {report['run_id']}"),
        run_id=esc(report["run_id"]),
        subtitle=esc(subtitle),
        partial=partial,
        summary=_summary(report),
        charts="".join(charts(report)),
        kind_sections=kind_sections(report, texts or {}),
        more=more,
        data=data,
        finished=esc(str(report.get("finished_at"))),
        has_texts="yes" if texts else "no",
    )


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }} .sub {{ color: #555; margin: 0 0 16px; }}
.cards {{ display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }}
.card {{ border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 110px; }}
.card .k {{ color: #666; font-size: 12px; }} .card .v {{ font-size: 17px; font-weight: 600; }}
.charts {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr)); gap: 16px;
  align-items: start; }}
figure.chart {{ margin: 0; border: 1px solid #e4e4e4; border-radius: 6px; padding: 8px; }}
figcaption {{ font-weight: 600; margin-bottom: 4px; }} svg {{ width: 100%; height: auto; }}
.axis {{ stroke: #888; }} .grid {{ stroke: #eee; }} .tick {{ font-size: 13px; fill: #444; }}
.cell {{ font-size: 15px; font-weight: 600; }}
.whisker, .interval {{ stroke: #222; stroke-width: 1.5; }} .note {{ color: #666; font-size: 12px; margin: 4px 0; }}
.warn {{ background: #fff4e5; border: 1px solid #f0b46a; padding: 6px 10px; border-radius: 4px; }}
.filters {{ display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin: 20px 0 8px; }}
.filters label {{ display: flex; flex-direction: column; font-size: 12px; color: #555; }}
table {{ border-collapse: collapse; width: 100%; }} th, td {{ border-bottom: 1px solid #eee; padding: 4px 6px;
  text-align: left; vertical-align: top; }}
th {{ cursor: pointer; background: #f7f7f7; position: sticky; top: 0; user-select: none; }}
td.text {{ max-width: 360px; white-space: pre-wrap; word-break: break-word; }}
td.null {{ color: #b5523b; }} button.more {{ font-size: 11px; margin-left: 4px; }}
td.id {{ white-space: nowrap; }}
details {{ border: 1px solid #e4e4e4; border-radius: 6px; padding: 6px 10px; margin: 6px 0; }}
ol.transcript {{ list-style: none; padding: 0; margin: 6px 0; }}
.msg {{ border-left: 3px solid #ccc; padding: 4px 8px; margin: 4px 0; }}
.msg.user {{ border-color: #4a7bd0; }} .msg.assistant {{ border-color: #3a9b5c; }}
.msg.tool {{ border-color: #999; background: #fafafa; }} .msg.system {{ border-color: #b58a2c; }}
.msg.worst {{ background: #fff0ee; }}
.msg .role {{ font-size: 12px; color: #555; }} .msg .content {{ white-space: pre-wrap; word-break: break-word; }}
.msg .call code {{ display: block; white-space: pre-wrap; word-break: break-all; }}
</style></head>
<body data-finished="{finished}" data-texts="{has_texts}">
<h1>judgeq report <code>{run_id}</code></h1>
<p class="sub">{subtitle}</p>
{partial}
{summary}
<div class="charts">{charts}</div>
{kind_sections}
<h2>Jobs</h2>
{more}
<div class="filters">
  <label>model <select id="f-model"><option value="">all</option></select></label>
  <label>score from <input id="f-min" type="number" step="any" size="6"></label>
  <label>to <input id="f-max" type="number" step="any" size="6"></label>
  <label>null reason <select id="f-null"><option value="">any</option><option value="*">only nulls</option>
    <option value="-">no nulls</option></select></label>
  <label>text <input id="f-text" type="search" placeholder="id, reasoning, input, output"></label>
  <span id="count"></span>
</div>
<table id="jobs"><thead><tr>
  <th data-k="id">id</th><th data-k="model">model</th><th data-k="score">score</th>
  <th data-k="verdict">verdict / null</th><th data-k="label">label</th><th data-k="flags">flags</th>
  <th data-k="reasoning">judge's reasoning</th><th data-k="input">input</th><th data-k="output">output</th>
</tr></thead><tbody></tbody></table>
<script type="application/json" id="data">{data}</script>
<script>
(function () {{
  "use strict";
  var data = JSON.parse(document.getElementById("data").textContent);
  var rows = data.rows, body = document.querySelector("#jobs tbody");
  var sortKey = null, sortDir = 1, SHORT = 160;
  function uniq(key) {{
    var seen = {{}}, out = [];
    rows.forEach(function (r) {{ var v = r[key]; if (v !== null && v !== undefined && !seen[v]) {{ seen[v] = 1; out.push(v); }} }});
    return out.sort();
  }}
  function fill(sel, values) {{
    values.forEach(function (v) {{ var o = document.createElement("option"); o.value = v; o.textContent = v; sel.appendChild(o); }});
  }}
  fill(document.getElementById("f-model"), uniq("model"));
  fill(document.getElementById("f-null"), uniq("null"));
  function textCell(td, text) {{
    td.className = "text";
    if (text === null || text === undefined) {{ td.textContent = ""; return; }}
    var full = String(text);
    if (full.length <= SHORT) {{ td.textContent = full; return; }}
    var span = document.createElement("span"), btn = document.createElement("button");
    span.textContent = full.slice(0, SHORT) + "…"; btn.className = "more"; btn.textContent = "more";
    btn.addEventListener("click", function () {{
      var open = btn.textContent === "less";
      span.textContent = open ? full.slice(0, SHORT) + "…" : full; btn.textContent = open ? "more" : "less";
    }});
    td.appendChild(span); td.appendChild(btn);
  }}
  function matches(r) {{
    var m = document.getElementById("f-model").value, lo = document.getElementById("f-min").value;
    var hi = document.getElementById("f-max").value, n = document.getElementById("f-null").value;
    var t = document.getElementById("f-text").value.toLowerCase();
    if (m && r.model !== m) return false;
    if (lo !== "" && !(r.score !== null && r.score >= parseFloat(lo))) return false;
    if (hi !== "" && !(r.score !== null && r.score <= parseFloat(hi))) return false;
    if (n === "*" && !r.null) return false;
    if (n === "-" && r.null) return false;
    if (n && n !== "*" && n !== "-" && r.null !== n) return false;
    if (t) {{
      var hay = [r.id, r.reasoning, r.input, r.output].join(" ").toLowerCase();
      if (hay.indexOf(t) < 0) return false;
    }}
    return true;
  }}
  function render() {{
    var shown = rows.filter(matches);
    if (sortKey) {{
      shown.sort(function (a, b) {{
        var x = a[sortKey], y = b[sortKey];
        if (x === y) return 0; if (x === null || x === undefined) return 1; if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * sortDir;
      }});
    }}
    body.textContent = "";
    shown.forEach(function (r) {{
      var tr = document.createElement("tr");
      ["id", "model", "score"].forEach(function (k) {{ var td = document.createElement("td"); td.className = k; td.textContent = r[k] === null ? "" : r[k]; tr.appendChild(td); }});
      var v = document.createElement("td");
      if (r.null) {{ v.className = "null"; v.textContent = "null: " + r.null; }} else {{ v.textContent = r.verdict || ""; }}
      tr.appendChild(v);
      ["label", "flags"].forEach(function (k) {{ var td = document.createElement("td"); td.textContent = r[k] === null ? "" : r[k]; tr.appendChild(td); }});
      ["reasoning", "input", "output"].forEach(function (k) {{ var td = document.createElement("td"); textCell(td, r[k]); tr.appendChild(td); }});
      body.appendChild(tr);
    }});
    var total = data.total > rows.length ? " (the first " + rows.length + " of " + data.total + " jobs; verdicts.jsonl has them all)" : "";
    document.getElementById("count").textContent = shown.length + " of " + rows.length + " jobs shown" + total;
  }}
  document.querySelectorAll("#jobs th").forEach(function (th) {{
    th.addEventListener("click", function () {{
      var k = th.getAttribute("data-k"); sortDir = sortKey === k ? -sortDir : 1; sortKey = k; render();
    }});
  }});
  ["f-model", "f-min", "f-max", "f-null", "f-text"].forEach(function (id) {{
    document.getElementById(id).addEventListener("input", render);
  }});
  render();
}})();
</script>
</body></html>
"""
