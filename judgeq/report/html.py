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

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from judgeq.figures.charts import (
    bars,
    dots,
    esc,
    histogram,
    with_ci,
)
from judgeq.figures.formatting import fmt, fmt_count
from judgeq.grading.result import Result
from judgeq.jobs.kinds import KINDS
from judgeq.report.model import RunReport

__all__ = [
    "MAX_ROWS",
    "TEXT_LIMIT",
    "charts",
    "headline_cards",
    "kind_sections",
    "render_html",
    "table_rows",
]

MAX_ROWS = 5000
TEXT_LIMIT = 4000


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
        kind = KINDS.get(r.kind)
        rows.append(
            {
                "id": r.job_id,
                "model": kind.shown_model(r) if kind is not None else r.model,
                "score": r.overall,
                "verdict": r.verdict(),
                "null": r.null_reason,
                "reasoning": _short(r.reason()),
                "input": _short(t.get("input")),
                "output": _short(t.get("output")),
                "label": r.label,
                "flags": ", ".join(r.flags),
            }
        )
    return rows


def kind_sections(report: RunReport, texts: Mapping[str, Mapping[str, str]]) -> str:
    """Each kind's own part of the page (:attr:`JobKind.html`: a conversation run's worst
    transcripts), in the registry's order."""
    return "".join(
        kind.html(report.section(kind.section), texts)
        for kind in KINDS.values()
        if kind.html is not None and kind.section is not None
    )


def _summary(report: RunReport) -> str:
    c = report.counts
    use = report.usage
    cost = use.estimated_cost_usd
    cards = [
        ("jobs", f"{c.total:,}"),
        ("graded", f"{c.graded:,}"),
        ("null", f"{c.null:,}"),
        ("coverage", fmt(report.coverage, "%")),
        *headline_cards(report),
        ("cost", f"${cost:.4f}" if isinstance(cost, (int, float)) else "unknown"),
        ("tokens", f"{use.input_tokens:,} in / {use.output_tokens:,} out"),
    ]
    out = ['<div class="cards">']
    out += [
        f'<div class="card"><div class="k">{esc(k)}</div><div class="v">{esc(v)}</div></div>'
        for k, v in cards
    ]
    out.append("</div>")
    if c.null_by_reason:
        out.append(
            "<p>Nulls by reason: "
            + ", ".join(f"<b>{esc(k)}</b> {v:,}" for k, v in c.null_by_reason.items())
            + "</p>"
        )
    return "".join(out)


def headline_cards(document: RunReport | Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's headline figures as numbers, each with its 95% interval: its kind's own when
    its section has them (:attr:`JobKind.cards`: a pairwise run's win rates, a retrieval run's
    accuracy and Hit@k), else the mean overall score and the pass rate."""
    report = RunReport.of(document)
    for kind in KINDS.values():
        section = report.section(kind.section) if kind.section is not None else None
        if section and kind.cards is not None:
            own = kind.cards(section)
            if kind.scored and report.overall.mean is not None:  # (a retrieval run's mean LLM grade)
                own.append((f"mean {kind.score_name}", with_ci(report.overall.mean, report.overall.ci95)))
            pairs = report.agreement.pairs if report.agreement is not None else None
            if pairs is not None:
                ties_half = with_ci(pairs.accuracy_ties_half, pairs.accuracy_ties_half_ci95, "%")
                own.append(("agreement with labels (ties as half)", ties_half))
            return own
    cards: list[tuple[str, str]] = []
    if report.overall.mean is not None:
        cards.append(("mean score", with_ci(report.overall.mean, report.overall.ci95)))
    if report.pass_rate is not None:
        cards.append(("pass rate", with_ci(report.pass_rate, report.pass_rate_ci95, "%")))
    return cards


def charts(document: RunReport | Mapping[str, Any]) -> list[str]:
    """Every plot the report's figures allow (each kind's own after the run's: :attr:`JobKind.charts`)."""
    report = RunReport.of(document)
    scale = report.rubric.scale or ""
    out: list[str] = []
    dist = report.distributions
    if scale == "pairwise":
        out.append(
            histogram("Output A's score (graded pairs)", dist.overall, note="0: B won, 0.5: tie, 1: A won")
        )
    else:
        out.append(histogram("Overall score (graded jobs)", dist.overall))
    dims = report.dimensions
    if dims:
        names = list(dims)
        top = 1.0 if scale in ("pass-fail", "pairwise") else _scale_range(scale)[1]
        out.append(
            bars(
                "Mean per dimension, with 95% intervals",
                names,
                [dims[d].mean for d in names],
                errors=[dims[d].ci95 for d in names],
                ymax=top,
                note="over graded jobs",
                categories=True,
            )
        )
    graded = report.counts.graded
    if graded == 0:
        out.append(
            '<figure class="chart"><figcaption>No job was graded</figcaption><p class="note">'
            f"All {esc(fmt_count(report.counts.null))} results are null (their causes are in the summary "
            "above): there is no score, pass rate or model to plot.</p></figure>"
        )
    if report.pass_rates and graded != 0:
        ts = list(report.pass_rates)
        cis = report.pass_rates_ci95 or {}
        out.append(
            bars(
                "Pass rate at each threshold (% of all jobs)",
                [f"≥ {t}" for t in ts],
                [report.pass_rates[t] for t in ts],
                errors=[cis.get(t) for t in ts],
                ymax=100,
                note=f"rubric threshold {report.rubric.pass_threshold}: {report.pass_rate}%; "
                "a null counts as not passed",
                categories=True,
            )
        )
    if report.by_model:
        rows = sorted(
            ((m, g.overall.mean, g.overall.ci95) for m, g in report.by_model.items()),
            key=lambda r: -(r[1] if r[1] is not None else -math.inf),
        )
        lo, hi = (0.0, 1.0) if scale in ("pass-fail", "pairwise") else _scale_range(scale)
        out.append(dots("Models: mean overall with 95% intervals", rows, lo=lo, hi=hi))
    out.append(
        histogram("Grading latency", dist.latency_ms, unit=" ms", note="every job that reached the judge")
    )
    for kind in KINDS.values():
        section = report.section(kind.section) if kind.section is not None else None
        if section and kind.charts is not None:
            out += kind.charts(section)
    return [c for c in out if c]


def _scale_range(scale: str) -> tuple[float, float]:
    lo, _, hi = scale.partition("-")
    try:
        return float(lo), float(hi)
    except ValueError:
        return 0.0, 10.0


def render_html(
    document: RunReport | Mapping[str, Any],
    results: Sequence[Result],
    texts: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The whole page (see the module docstring) of a report (its model, or report.json as a dict)."""
    report = RunReport.of(document)
    total = report.counts.total
    rows = table_rows(results[:MAX_ROWS], texts or {})
    data = json.dumps({"rows": rows, "total": total}, ensure_ascii=False)
    # inside <script>, no "<" may start "</script" or "<!--": every "<" is the JSON escape
    # \u003c (valid JSON, the same string once parsed); U+2028/9 end a line in old JS engines
    data = data.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    rubric, judge = report.rubric, report.judge
    subtitle = (
        f"rubric {rubric.name} {rubric.version} (scale {rubric.scale}), judge "
        f"{judge.provider}:{judge.model}, {judge.lane} lane; jobs file "
        f"{report.batch or ''}; started {report.started_at}, finished {report.finished_at}"
    )
    partial = (
        '<p class="warn">Partial report: the run was interrupted; jobs that did not finish are null '
        "<b>canceled</b>.</p>"
        if report.partial
        else ""
    )
    partial += "".join(f'<p class="warn">Warning: {esc(w)}</p>' for w in report.warnings or [])
    more = (
        f'<p class="note">The table shows the first {MAX_ROWS:,} of {total:,} jobs; '
        "verdicts.jsonl has every job.</p>"
        if total > MAX_ROWS
        else ""
    )
    return _PAGE.format(
        title=esc(f"judgeq report {report.run_id}"),
        run_id=esc(report.run_id),
        subtitle=esc(subtitle),
        partial=partial,
        summary=_summary(report),
        charts="".join(charts(report)),
        kind_sections=kind_sections(report, texts or {}),
        more=more,
        data=data,
        finished=esc(str(report.finished_at)),
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
