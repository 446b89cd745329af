"""Comparing two runs of the same jobs (``judgeq compare A B``): paired, job by job.

Jobs are matched by id. Every figure is over the jobs present in both runs (``matched``); the
jobs only in one run are counted (``only_a``/``only_b``), never silently dropped.

* scores (overall and each dimension): over jobs graded in both runs; the mean of the paired
  differences (B - A) with its t interval and the two-sided Wilcoxon signed-rank p-value;
* pass rate: over every matched job (a null counts as not passed, as in the report), A's and
  B's rate, their difference with a t interval on the paired 0/1 differences, and McNemar's
  exact test on the jobs that changed (scipy ``binomtest`` on the discordant pairs);
* per model: the same, per ``model`` of the jobs;
* flips: the jobs that passed in A and failed in B, and back, with both judges' reasoning.

A **regression** is a drop that is significant at ``alpha``: the overall mean falls and the
one-sided Wilcoxon test of a decrease gives p below alpha, or the pass rate falls (more jobs
pass to fail than back) with a McNemar p below alpha.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from judgeq.figures import stats as _stats
from judgeq.figures.formatting import fmt, fmt_p, p_is
from judgeq.grading.result import Result

SHOWN_FLIPS = 50


@dataclass(slots=True)
class _Side:
    status: str
    overall: float | None
    passed: bool
    scores: dict[str, float]
    model: str | None


def _side(r: Result) -> _Side:
    return _Side(r.status, r.overall, bool(r.passed), dict(r.scores), r.model)


@dataclass(slots=True)
class _Group:
    diffs: list[float] = field(default_factory=list)
    passed_a: int = 0
    passed_b: int = 0
    up: int = 0  # fail -> pass
    down: int = 0  # pass -> fail
    n: int = 0


def mcnemar(up: int, down: int) -> float | None:
    """McNemar's exact test: two-sided binomial p-value of the discordant pairs (None without
    any)."""
    if up + down == 0:
        return None
    from scipy.stats import binomtest

    return round(float(binomtest(down, up + down, 0.5).pvalue), 6)


def _pass_rate(g: _Group) -> dict[str, Any]:
    if not g.n:
        return {"n": 0, "a": None, "b": None, "change": None, "ci95": None, "p_value": None}
    deltas = [1.0] * g.up + [-1.0] * g.down + [0.0] * (g.n - g.up - g.down)
    ci = _stats.mean_interval(deltas)
    return {
        "n": g.n,
        "a": round(100 * g.passed_a / g.n, 2),
        "b": round(100 * g.passed_b / g.n, 2),
        "change": round(100 * (g.passed_b - g.passed_a) / g.n, 2),
        "ci95": [round(100 * ci[0], 2), round(100 * ci[1], 2)] if ci else None,
        "fail_to_pass": g.up,
        "pass_to_fail": g.down,
        "p_value": mcnemar(g.up, g.down),
        "test": "McNemar exact",
    }


def compare(
    a: Iterable[Result],
    b: Iterable[Result],
    *,
    notes_a: Callable[[set[str]], Mapping[str, str | None]] | None = None,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """The comparison of two runs' results (see the module docstring). ``a`` is read once
    into memory (a compact view of each job), ``b`` streamed; ``notes_a`` reads A's reasoning
    of the flipped jobs again (it is not kept for every job)."""
    left: dict[str, _Side] = {}
    for r in a:
        left[r.job_id] = _side(r)
    overall = _Group()
    dims: dict[str, list[float]] = {}
    models: dict[str, _Group] = {}
    nulls = {"a_only": 0, "b_only": 0, "both": 0}
    flips: dict[str, list[dict[str, Any]]] = {"pass_to_fail": [], "fail_to_pass": []}
    only_b = 0
    matched: set[str] = set()
    for r in b:
        old = left.get(r.job_id)
        if old is None:
            only_b += 1
            continue
        matched.add(r.job_id)
        new = _side(r)
        groups = [overall]
        if new.model is not None:
            groups.append(models.setdefault(new.model, _Group()))
        for g in groups:
            g.n += 1
            g.passed_a += old.passed
            g.passed_b += new.passed
            g.up += (not old.passed) and new.passed
            g.down += old.passed and not new.passed
        graded_a, graded_b = old.status == "graded", new.status == "graded"
        if graded_a and graded_b and old.overall is not None and new.overall is not None:
            d = new.overall - old.overall
            for g in groups:
                g.diffs.append(d)
            for name, value in new.scores.items():
                if name in old.scores:
                    dims.setdefault(name, []).append(value - old.scores[name])
        elif not graded_a and not graded_b:
            nulls["both"] += 1
        elif not graded_a:
            nulls["a_only"] += 1
        else:
            nulls["b_only"] += 1
        if old.passed != new.passed:
            key = "pass_to_fail" if old.passed else "fail_to_pass"
            if len(flips[key]) < SHOWN_FLIPS:
                flips[key].append(
                    {
                        "job_id": r.job_id,
                        "model": r.model,
                        "a": {"overall": old.overall, "status": old.status},
                        "b": {
                            "overall": new.overall,
                            "status": new.status,
                            "notes": r.notes or r.null_reason,
                        },
                    }
                )
    shown = {f["job_id"] for fl in flips.values() for f in fl}
    if notes_a is not None and shown:
        found = notes_a(shown)
        for fl in flips.values():
            for f in fl:
                f["a"]["notes"] = found.get(f["job_id"])
    only_a = len(left) - len(matched)
    out: dict[str, Any] = {
        "matched": len(matched),
        "only_a": only_a,
        "only_b": only_b,
        "graded_both": len(overall.diffs),
        "null": nulls,
        "overall": {
            **_stats.paired(overall.diffs),
            "test": "Wilcoxon signed-rank",
            "p_value_decrease": _stats.decrease_p(overall.diffs),
        },
        "dimensions": {
            name: {**_stats.paired(v), "test": "Wilcoxon signed-rank"} for name, v in sorted(dims.items())
        },
        "pass_rate": _pass_rate(overall),
        "by_model": {
            m: {"scores": _stats.paired(g.diffs), "pass_rate": _pass_rate(g)}
            for m, g in sorted(models.items())
        },
        "flips": flips,
        "alpha": alpha,
    }
    out["regression"] = regression(out, alpha)
    return out


def regression(c: Mapping[str, Any], alpha: float) -> dict[str, Any]:
    """Whether B is significantly worse than A (see the module docstring), and why. The scores
    are gated on the one-sided test of a decrease: a two-sided p can be small because B is
    better (a few large drops among many small gains), and that is not a regression."""
    why = []
    o = c["overall"]
    p_down = o.get("p_value_decrease")
    if o["mean_diff"] is not None and o["mean_diff"] < 0 and p_down is not None and p_down < alpha:
        why.append(
            f"overall mean fell by {-o['mean_diff']:g} (one-sided Wilcoxon {p_is(p_down)}, alpha {alpha:g})"
        )
    p = c["pass_rate"]
    if p["change"] is not None and p["change"] < 0 and p["p_value"] is not None and p["p_value"] < alpha:
        why.append(
            f"pass rate fell by {-p['change']:g} points (McNemar {p_is(p['p_value'])}, alpha {alpha:g})"
        )
    return {"significant": bool(why), "why": why}


def _ci(ci: list[float] | None) -> str:
    return f"({ci[0]:.2f} to {ci[1]:.2f})" if ci else ""


def render_markdown(c: Mapping[str, Any], a: str, b: str) -> str:
    """The comparison as Markdown (what ``judgeq compare`` prints)."""
    o, p = c["overall"], c["pass_rate"]
    lines = [
        f"# judgeq compare: {a} (A) vs {b} (B)",
        "",
        *(
            f"- {side.upper()}: rubric {c[side]['rubric']['name']} {c[side]['rubric']['version']} "
            f"(fingerprint {c[side]['rubric']['fingerprint'] or 'unknown'}), judge {c[side]['judge']}"
            for side in ("a", "b")
            if isinstance(c.get(side), Mapping) and "rubric" in c[side]
        ),
        *(f"- **Compared though they differ** in {d}" for d in c.get("differences") or ()),
        f"- Jobs matched by id: {c['matched']}; only in A: {c['only_a']}; only in B: {c['only_b']}",
        f"- Graded in both: {c['graded_both']}; null in A only: {c['null']['a_only']}, in B only: "
        f"{c['null']['b_only']}, in both: {c['null']['both']}",
        "",
        "| | n | mean difference B - A (95% CI) | p |",
        "|---|---:|---:|---:|",
        f"| **overall** | {o['n']} | {fmt(o['mean_diff'])} {_ci(o['ci95'])} | {fmt_p(o['p_value'])} |",
    ]
    for name, d in c["dimensions"].items():
        lines.append(
            f"| {name} | {d['n']} | {fmt(d['mean_diff'])} {_ci(d['ci95'])} | {fmt_p(d['p_value'])} |"
        )
    lines += [
        "",
        "p: Wilcoxon signed-rank (two-sided) on the jobs graded in both runs.",
        "",
        f"Pass rate (of {p['n']} matched jobs; a null counts as not passed): A {fmt(p['a'], '%')}, "
        f"B {fmt(p['b'], '%')}, change {fmt(p['change'], ' points')} {_ci(p['ci95'])}; "
        f"{p.get('fail_to_pass', 0)} fail to pass, {p.get('pass_to_fail', 0)} pass to fail "
        f"(McNemar {p_is(p['p_value'])})",
    ]
    if c["by_model"]:
        lines += [
            "",
            "| model | graded in both | mean difference (95% CI) | p | pass rate A | pass rate B |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for m, g in c["by_model"].items():
            s, pr = g["scores"], g["pass_rate"]
            lines.append(
                f"| {m} | {s['n']} | {fmt(s['mean_diff'])} {_ci(s['ci95'])} | {fmt_p(s['p_value'])} | "
                f"{fmt(pr['a'], '%')} | {fmt(pr['b'], '%')} |"
            )
    for key, title in (
        ("pass_to_fail", "Passed in A, failed in B"),
        ("fail_to_pass", "Failed in A, passed in B"),
    ):
        flips = c["flips"][key]
        if not flips:
            continue
        total = c["pass_rate"].get(key, len(flips))
        shown = f" (the first {len(flips)} are listed)" if total > len(flips) else ""
        lines += ["", f"## {title}: {total} job(s){shown}", ""]
        for f in flips:
            lines.append(
                f"- **{f['job_id']}** ({f['model'] or 'no model'}): "
                f"A {fmt(f['a']['overall'])}, B {fmt(f['b']['overall'])}"
            )
            for side in ("a", "b"):
                text = " ".join(str(f[side].get("notes") or "").split())
                if text:
                    lines.append(f"  - {side.upper()}: {text[:400]}")
    r = c["regression"]
    lines += [
        "",
        ("**Regression**: " + "; ".join(r["why"]))
        if r["significant"]
        else f"No significant drop at alpha {c['alpha']:g}."
        if c["matched"]
        else "Nothing compared: no job of A matched a job of B by id.",
    ]
    return "\n".join(lines) + "\n"


def render_html(c: Mapping[str, Any], a: str, b: str) -> str:
    """A self-contained page of the comparison: a plot of the mean differences with their
    intervals, and the Markdown's tables."""
    from judgeq.figures import charts as _charts

    names = ["overall", *c["dimensions"]]
    rows = [c["overall"], *c["dimensions"].values()]
    values = [x for r in rows for x in [*(r["ci95"] or []), r["mean_diff"]] if x is not None]
    lo, hi = min([*values, 0.0]), max([*values, 0.0])
    if hi - lo < 1e-9:
        lo, hi = lo - 1.0, hi + 1.0
    plot = _charts.dots(
        "Mean difference B - A, with 95% intervals",
        [(n, r["mean_diff"], r["ci95"]) for n, r in zip(names, rows, strict=True)],
        lo=lo,
        hi=hi,
        note="right of 0: B scores higher",
    )
    body = _markdown_html(render_markdown(c, a, b))
    title, sep, rest = body.partition("</h1>")  # the page's title first, then the plot
    body_with_plot = f"{title}{sep}{plot}{rest}" if sep else f"{plot}{body}"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_charts.esc(f'judgeq compare {a} vs {b}')}</title>"
        "<style>body{font:14px/1.45 system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{border-bottom:1px solid #eee;padding:4px 8px;text-align:left}"
        ".tick{font-size:13px;fill:#444}.axis{stroke:#888}.grid{stroke:#eee}.interval{stroke:#222;stroke-width:1.5}"
        "figure.chart{max-width:640px;border:1px solid #e4e4e4;border-radius:6px;padding:8px}"
        "svg{width:100%;height:auto}.note{color:#666;font-size:12px}li.sub{margin-left:24px;"
        "list-style:circle;color:#444}</style></head><body>"
        f"{body_with_plot}</body></html>"
    )


def _inline(text: str) -> str:
    """A line's text escaped, with ``**bold**`` and ```code``` as HTML."""
    import re

    from judgeq.figures.charts import esc

    html = esc(text)
    html = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html)


def _markdown_html(md: str) -> str:
    """The Markdown :func:`render_markdown` writes (headings, lists, tables, paragraphs) as
    HTML, in its order; every text escaped."""
    out: list[str] = []
    rows: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if rows:
            head, *rest = rows
            out.append("<table><tr>" + "".join(f"<th>{_inline(x)}</th>" for x in head) + "</tr>")
            out.extend("<tr>" + "".join(f"<td>{_inline(x)}</td>" for x in r) + "</tr>" for r in rest)
            out.append("</table>")
            rows.clear()
        if items:
            out.append("<ul>" + "".join(items) + "</ul>")
            items.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            cells = [x.strip() for x in line.strip().strip("|").split("|")]
            if not all(set(x) <= set("-:") for x in cells):
                rows.append(cells)
            continue
        if line.lstrip().startswith("- "):
            nested = line.startswith(" ")
            items.append(f"<li{' class=sub' if nested else ''}>{_inline(line.lstrip()[2:])}</li>")
            continue
        flush()
        if line.startswith("## "):
            out.append(f"<h2>{_inline(line[3:])}</h2>")
        elif line.startswith("# "):
            out.append(f"<h1>{_inline(line[2:])}</h1>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    flush()
    return "".join(out)


__all__ = ["compare", "mcnemar", "regression", "render_html", "render_markdown"]
