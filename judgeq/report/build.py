"""Assembling ``report.json`` and writing the report files.

Files under ``<out>/<run_id>/``: ``report.json`` (machine-readable), ``report.md`` (a
readable summary with tables), ``report.html`` (the same with plots and a table of jobs, one
self-contained page: :mod:`judgeq.report.html`), ``verdicts.jsonl`` (one stored result per line, in
input order) and ``run.json`` (the run's specification, for ``rescore`` and resuming).  Files
are written to a temporary name and renamed, so a reader never sees half a report.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from judgeq.grading.request import render_system
from judgeq.grading.result import Result
from judgeq.judges.prices import Prices, shipped_prices, unpriced_text
from judgeq.pipeline.spec import RunSpec
from judgeq.ratelimit import estimate_input_tokens
from judgeq.report.aggregate import Aggregator
from judgeq.report.formatting import fmt, fmt_ci, fmt_p
from judgeq.report.html import MAX_ROWS, render_html
from judgeq.report.stats import METHODS
from judgeq.rubric.model import Rubric

REPORT_VERSION = 1


def _rubric(spec: RunSpec) -> tuple[Rubric | None, str | None]:
    """The run's rubric, or None and why: a report is still written for a run whose rubric no
    longer loads (its jobs are internal_error nulls), with the rubric named by its source."""
    try:
        return spec.rubric, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:300]}"


def prompt_cache_note(rubric: Rubric, model: str, prices: Prices | None = None) -> dict[str, Any]:
    """Whether the rubric's stable prefix (the system prompt, marked for prompt caching) is
    long enough for the model to cache it: ``prefix_tokens`` is an estimate (4 characters a
    token), ``min_cacheable_tokens`` the model's minimum (its price entry: the run's
    ``prices``, default ``judgeq/data/prices.json``; None when it has none)."""
    prefix = estimate_input_tokens(sum(len(block) for block in render_system(rubric)))
    price = (prices or shipped_prices()).lookup(model)
    minimum = price.min_cache_tokens if price is not None else None
    below = minimum is not None and prefix < minimum
    return {
        "prefix_tokens": prefix,
        "min_cacheable_tokens": minimum,
        "below_minimum": below,
        "note": (
            f"the rubric prefix (~{prefix:,} tokens) is below {model}'s minimum cacheable length "
            f"({int(minimum):,}): prompt caching does not apply, every job pays its full input"
        )
        if below and minimum is not None
        else None,
    }


def new_aggregator(spec: RunSpec) -> Aggregator:
    rubric, _ = _rubric(spec)
    retrieval = spec.retrieval or (rubric.retrieval if rubric else None)
    return Aggregator(
        dimensions=[d.name for d in rubric.dimensions] if rubric else [],
        thresholds=spec.thresholds,
        pass_fail=rubric.is_pass_fail if rubric else False,
        hit_k=retrieval.hit_k if retrieval else (1, 3, 5, 10),
        scale=rubric.scale if rubric else "1-10",
        lo=rubric.lo if rubric else 1,
        hi=rubric.hi if rubric else 10,
        threshold=rubric.threshold if rubric else None,
        judges=[model for _, model in spec.judges],
        council_mode=spec.council_mode,
        swap=spec.swap,
        lane=spec.lane,
        prices=spec.price_book(),
    )


def build_report(
    spec: RunSpec,
    agg: Aggregator,
    *,
    started_at: str,
    finished_at: str,
    wall_s: float,
    missing: int = 0,
) -> dict[str, Any]:
    """The whole ``report.json`` document."""
    rubric, error = _rubric(spec)
    body = agg.report(judge_model=spec.judge_model)
    if rubric is not None and spec.judge_provider != "lexical":
        book = spec.price_book()
        notes = {model: prompt_cache_note(rubric, model, book) for provider, model in spec.judges}
        body["usage"]["prompt_cache"] = note = dict(notes[spec.judge_model])
        if len(notes) > 1:  # a council: each judge's model has its own minimum
            note["by_judge"] = notes
            note["below_minimum"] = any(n["below_minimum"] for n in notes.values())
            note["note"] = "; ".join(n["note"] for n in notes.values() if n["note"]) or None
    body["usage"]["unpriced_models"] = spec.unpriced_models()
    counts = body.pop("counts")
    counts["rejected"] = spec.rejected_count
    if missing:
        counts["missing"] = missing
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "run_id": spec.run_id,
        "batch": spec.batch,
        "rubric": {
            "name": rubric.name,
            "version": rubric.version,
            "scale": rubric.scale,
            "source": rubric.source,
            "weights": rubric.weights or None,
            "pass_threshold": rubric.threshold,
            "fingerprint": rubric.fingerprint,
        }
        if rubric is not None
        else {
            "name": spec.rubric_source,
            "version": "unknown",
            "scale": None,
            "source": spec.rubric_source,
            "weights": spec.weights or None,
            "pass_threshold": None,
            "fingerprint": None,
            "error": error,
        },
        "judge": {
            "provider": spec.judge_provider,
            "model": spec.judge_model,
            "lane": spec.lane,
            **(
                {"council": [f"{p}:{m}" for p, m in spec.judges], "council_mode": spec.council_mode}
                if spec.council
                else {}
            ),
            **({"swap": spec.swap} if rubric is not None and rubric.is_pairwise else {}),
        },
        "intervals": METHODS,
        "counts": counts,
        **body,
        "rejected": spec.rejected,
        "started_at": started_at,
        "finished_at": finished_at,
        "wall_s": round(wall_s, 3),
    }
    if rubric is not None and (rubric.is_pass_fail or rubric.is_pairwise):
        report.pop("pass_rates", None)
        report.pop("pass_rates_ci95", None)
    if rubric is not None and rubric.is_pairwise:
        report.pop("pass_rate", None)
        report.pop("pass_rate_ci95", None)
    return report


def _html_has_texts(path: Path, report: dict[str, Any]) -> bool:
    """Whether ``path`` is this very report's page with the jobs' texts in its table."""
    if not path.is_file():
        return False
    with path.open(encoding="utf-8", errors="replace") as f:
        head = f.read(8192)  # the <body> tag is near the top
    return f'<body data-finished="{report.get("finished_at")}" data-texts="yes">' in head


def batch_texts(path: Path, ids: set[str]) -> dict[str, dict[str, str]]:
    """The input and output text of the jobs ``ids`` of a batch file (matched by id; a line that
    is not a job is skipped), for the report's table. ``{}`` when the file is not there."""
    if not path.is_file():
        return {}
    found: dict[str, dict[str, str]] = {}
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict) or str(obj.get("id")) not in ids:
                continue
            found[str(obj["id"])] = job_texts(obj)
            if len(found) == len(ids):
                break
    return found


def job_texts(obj: dict[str, Any]) -> dict[str, str]:
    """What the table shows of a job: its input (or question) and its output (a pair's two
    outputs; a question's retrieved chunks)."""
    if "output_a" in obj:
        output = f"A: {obj.get('output_a', '')}\n\nB: {obj.get('output_b', '')}"
    elif "retrieved" in obj:
        chunks = obj.get("retrieved") or []
        output = "\n".join(f"[{c.get('doc_id')}] {c.get('text', '')}" for c in chunks if isinstance(c, dict))
    else:
        output = str(obj.get("output", ""))
    return {"input": str(obj.get("input", obj.get("question", ""))), "output": output}


def _atomic_write(path: Path, write: Any, *, gz: bool = False) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    if gz:
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
            write(f)
    else:
        with tmp.open("w", encoding="utf-8") as f:
            write(f)
    tmp.replace(path)


Texts = Callable[[set[str]], Mapping[str, Mapping[str, str]]]
"""``texts(job ids) -> {job id: {"input": ..., "output": ...}}``: the jobs' texts for the HTML
table (read from the batch when it is at hand)."""


def write_report_files(
    out_dir: Path,
    report: dict[str, Any],
    results: Iterable[Result],
    *,
    spec: RunSpec | None = None,
    texts: Texts | None = None,
    compress: bool = False,
) -> dict[str, Path]:
    """Write report.json, report.md, report.html, verdicts.jsonl (``compress``: gzipped, as
    verdicts.jsonl.gz: an archive) and (with ``spec``) run.json into ``out_dir/<run_id>/``.

    The HTML table's input and output texts come from ``texts``, else from the run's batch file
    (``spec.batch``) when it is at hand on this machine. Without texts, a report.html already in
    the folder that shows them (the producer's, before the run was archived) is kept."""
    if texts is None and spec is not None and spec.batch not in ("", "<stdin>", "<python>"):
        batch = Path(spec.batch)
        texts = lambda ids: batch_texts(batch, ids)  # noqa: E731
    run_dir = Path(out_dir) / report["run_id"]
    run_dir.mkdir(parents=True, exist_ok=True)
    name = "verdicts.jsonl.gz" if compress else "verdicts.jsonl"
    paths = {
        "report.json": run_dir / "report.json",
        "report.md": run_dir / "report.md",
        "report.html": run_dir / "report.html",
        name: run_dir / name,
    }
    shown: list[Result] = []

    def verdicts(f: Any) -> None:
        for r in results:
            f.write(json.dumps(r.to_line(), ensure_ascii=False, separators=(",", ":")))
            f.write("\n")
            if len(shown) < MAX_ROWS:
                shown.append(r)

    _atomic_write(paths[name], verdicts, gz=compress)
    stale = run_dir / ("verdicts.jsonl" if compress else "verdicts.jsonl.gz")  # an earlier write's copy
    if stale.exists():
        stale.unlink()
    _atomic_write(paths["report.json"], lambda f: f.write(json.dumps(report, indent=2) + "\n"))
    _atomic_write(paths["report.md"], lambda f: f.write(render_markdown(report)))
    try:
        found = texts({r.job_id for r in shown}) if texts is not None else {}
    except Exception:  # the batch could not be read: the table shows no texts, nothing else changes
        found = {}
    if found or not _html_has_texts(paths["report.html"], report):
        _atomic_write(paths["report.html"], lambda f: f.write(render_html(report, shown, found)))
    if spec is not None:
        paths["run.json"] = run_dir / "run.json"
        _atomic_write(paths["run.json"], lambda f: f.write(spec.model_dump_json(indent=2) + "\n"))
    return paths


def validity_markdown(report: dict[str, Any]) -> list[str]:
    """The sections on how far the grades can be trusted: paired model comparisons, pairwise
    figures, agreement with labels, the council."""
    lines: list[str] = []
    if report.get("by_model_paired"):
        lines += [
            "",
            "## Models on the same inputs (paired)",
            "",
            "| model | vs | shared inputs | mean difference (vs - model, 95% CI) | p (Wilcoxon) |",
            "|---|---|---:|---:|---:|",
        ]
        for p in report["by_model_paired"]:
            lines.append(
                f"| {p['model']} | {p['vs']} | {p['n']} | {fmt_ci(p['mean_diff'], p['ci95'])} | "
                f"{fmt_p(p['p_value'])} |"
            )
    pw = report.get("pairwise")
    if pw:
        lines += [
            "",
            f"## Pairwise ({pw['graded']} graded pairs, {pw['nulls']} null)",
            "",
            "| model | vs | n | wins | ties | losses | win rate (95% CI) | excluding ties "
            "| length-controlled |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for p in pw["pairs"]:
            lines.append(
                f"| {p['model']} | {p['opponent']} | {p['n']} | {p['wins']} | {p['ties']} | {p['losses']} | "
                f"{fmt_ci(p['win_rate'], p['win_rate_ci95'], '%')} | "
                f"{fmt_ci(p['win_rate_excluding_ties'], p['win_rate_excluding_ties_ci95'], '%')} | "
                f"{fmt_ci(p['win_rate_length_controlled'], p.get('win_rate_length_controlled_ci95'), '%')} |"
            )
        lines += [
            "",
            "- Position consistency: "
            + fmt_ci(pw["position_consistency"], pw["position_consistency_ci95"], "%")
            + " "
            f"of {pw['position_consistency_n']} verdicts kept when the outputs were swapped",
            "- First-position preference: "
            + fmt_ci(pw["first_position_preference"], pw["first_position_preference_ci95"], "%")
            + f" of {pw['first_position_preference_n']} decisive calls chose the output shown first "
            "(50% is unbiased)",
            f"- Longer output wins: {fmt_ci(pw['longer_output_wins'], pw['longer_output_wins_ci95'], '%')} "
            f"of {pw['longer_output_wins_n']} decisive pairs of unequal length",
        ]
        if pw.get("leaderboard"):
            lines += ["", "| rank | model | Bradley-Terry rating (95% CI) |", "|---:|---|---:|"]
            for rank, row in enumerate(pw["leaderboard"], 1):
                lines.append(f"| {rank} | {row['model']} | {fmt_ci(row['rating'], row['ci95'], nd=0)} |")
    ag = report.get("agreement")
    if ag:
        lines += [
            "",
            f"## Agreement with labels ({ag['graded']} labelled and graded; {ag['nulls']} labelled nulls "
            "not scored)",
            "",
        ]
        if "pairs" in ag:
            p = ag["pairs"]
            lines.append(
                f"- Pairs: accuracy {fmt_ci(p['accuracy_ties_half'], p.get('accuracy_ties_half_ci95'), '%')} "
                f"(ties half), "
                + fmt_ci(p["accuracy_ties_excluded"], p["accuracy_ties_excluded_ci95"], "%")
                + " excluding ties "
                f"({p['ties_excluded_n']} jobs); Cohen's kappa {fmt(p['kappa'], nd=3)}"
            )
        if "pass_fail" in ag:
            p = ag["pass_fail"]
            lines.append(
                f"- Pass/fail: accuracy {fmt_ci(p['accuracy'], p['accuracy_ci95'], '%')} of {p['n']}; "
                f"Cohen's kappa {fmt(p['kappa'], nd=3)}"
            )
        if "numeric" in ag:
            p = ag["numeric"]
            lines.append(
                f"- Scores ({p['n']}): Spearman {fmt(p['spearman'], nd=3)}, "
                f"Kendall's tau {fmt(p['kendall_tau'], nd=3)}, "
                f"quadratic-weighted kappa {fmt(p['qwk'], nd=3)}, "
                f"mean absolute error {fmt_ci(p['mae'], p.get('mae_ci95'))}"
            )
    co = report.get("council")
    if co:
        lines += [
            "",
            f"## Council of judges ({co['combined']['method']})",
            "",
            "| judge | n | mean (95% CI) |",
            "|---|---:|---:|",
        ]
        for j, row in co["per_judge"].items():
            lines.append(f"| {j} | {row['n']} | {fmt_ci(row['mean'], row['ci95'])} |")
        lines += [
            "",
            f"- Krippendorff's alpha ({co['alpha_level']}): {fmt(co['krippendorff_alpha'], nd=3)} over "
            f"{co['sampled_units']} jobs",
            f"- Jobs the judges disagree on: {report.get('flags', {}).get('judges_disagree', 0)}"
            + (
                " (largest spreads: "
                + ", ".join(f"{d['job_id']} {d['spread']:g}" for d in co["disagreements"][:5])
                + ")"
                if co["disagreements"]
                else ""
            ),
        ]
        combined = co["combined"]
        if combined.get("method") == "z" and combined.get("n"):
            lines += [
                "",
                "Combined score: mean of per-judge z-scores, "
                f"{fmt_ci(combined['mean'], combined.get('ci95'))} "
                f"over {combined['n']} jobs",
                "",
                "| model | n | mean z (95% CI) |",
                "|---|---:|---:|",
            ]
            for model, row in combined["by_model"].items():
                lines.append(f"| {model} | {row['n']} | {fmt_ci(row['mean'], row['ci95'])} |")
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    """A readable summary of a report, with tables."""
    c = report["counts"]
    r = report["rubric"]
    lines = [
        f"# judgeq report: {report['run_id']}",
        "",
        f"- Rubric: **{r['name']}** {r['version']} (scale {r['scale']}, source `{r['source']}`)",
        f"- Judge: {report['judge']['provider']}:{report['judge']['model']}",
        f"- Batch: `{report.get('batch', '')}`",
        f"- Started {report['started_at']}, finished {report['finished_at']} ({report['wall_s']} s)",
        "",
        "## Counts",
        "",
        "| total | graded | null | rejected | coverage |",
        "|---:|---:|---:|---:|---:|",
        f"| {c['total']} | {c['graded']} | {c['null']} | {c['rejected']} | "
        f"{fmt_ci(report['coverage'], report.get('coverage_ci95'), '%')} |",
    ]
    if c["null_by_reason"]:
        lines += ["", "| null reason | jobs |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in c["null_by_reason"].items()]
    o = report["overall"]
    lines += [
        "",
        "## Scores (graded jobs)",
        "",
        "| | n | mean (95% CI) | median | std | min | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| **overall** | {o['n']} | {fmt_ci(o['mean'], o.get('ci95'))} | {fmt(o['median'])} | "
        f"{fmt(o['std'])} | {fmt(o['min'])} | {fmt(o['max'])} |",
    ]
    for name, d in report["dimensions"].items():
        lines.append(
            f"| {name} | {d['n']} | {fmt_ci(d['mean'], d.get('ci95'))} | {fmt(d['median'])} | "
            f"{fmt(d['std'])} | {fmt(d['min'])} | {fmt(d['max'])} |"
        )
    if "pass_rates" in report:
        cis = report.get("pass_rates_ci95", {})
        lines += ["", "## Pass rates (percent of all jobs; a null counts as not passed)", ""]
        lines += ["| threshold | pass rate (95% CI) |", "|---:|---:|"]
        lines += [f"| ≥ {t} | {fmt_ci(v, cis.get(t), '%')} |" for t, v in report["pass_rates"].items()]
        lines.append(
            f"| rubric threshold ({r['pass_threshold']}) | "
            f"{fmt_ci(report['pass_rate'], report.get('pass_rate_ci95'), '%')} |"
        )
    elif "pass_rate" in report:
        lines += ["", "## Pass rate (percent of all jobs; a null counts as not passed)", ""]
        lines.append(f"Pass rate: **{fmt_ci(report['pass_rate'], report.get('pass_rate_ci95'), '%')}**")
    if "retrieval" in report:
        rt = report["retrieval"]
        lines += ["", "## Retrieval", "", "| metric | value |", "|---|---:|"]
        for key in (
            "questions",
            "accuracy",
            "hit_at_1_rate",
            "hit_at_5_rate",
            "mrr",
            "avg_llm_grade",
            "avg_total_score",
            "pass_rate_8",
            "pass_rate_7",
            "pass_rate_6_5",
            "null",
        ):
            suffix = (
                "%" if key in ("accuracy",) or key.endswith("_rate") or key.startswith("pass_rate") else ""
            )
            nd = 3 if key == "mrr" else None
            lines.append(f"| {key} | {fmt_ci(rt[key], rt.get('ci95', {}).get(key), suffix, nd)} |")
        for k, v in rt["hit_at_k_rates"].items():
            lines.append(
                f"| hit@{k} | {fmt_ci(v, rt.get('ci95', {}).get('hit_at_k_rates', {}).get(k), '%')} |"
            )
    if report.get("by_model"):
        lines += [
            "",
            "## By model",
            "",
            "| model | total | graded | null | mean (95% CI) | pass rate (95% CI) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for model, s in report["by_model"].items():
            lines.append(
                f"| {model} | {s['counts']['total']} | {s['counts']['graded']} | "
                f"{s['counts']['null']} | {fmt_ci(s['overall']['mean'], s['overall'].get('ci95'))} | "
                f"{fmt_ci(s.get('pass_rate'), s.get('pass_rate_ci95'), '%')} |"
            )
    lines += validity_markdown(report)
    lat, use = report["latency_ms"], report["usage"]
    lines += [
        "",
        "## Latency and usage",
        "",
        f"- Grading latency: p50 {fmt(lat['p50'])} ms, p95 {fmt(lat['p95'])} ms, max {fmt(lat['max'])} ms",
        f"- Tokens: {use['input_tokens']:,} in, {use['output_tokens']:,} out "
        f"({use['judge_calls']:,} judge calls); estimated cost "
        + (
            f"${use['estimated_cost_usd']:.4f}"
            if use["estimated_cost_usd"] is not None
            else f"unknown ({unpriced_text(use.get('unpriced_models'))})"
        ),
    ]
    parts = use.get("cost_usd")
    if parts:
        shown = ", ".join(f"{k.replace('_', ' ')} ${v:.4f}" for k, v in parts.items() if k != "total" and v)
        lines.append(f"- Cost by part: {shown or 'nothing'} (prices of {use.get('prices_taken', '?')})")
    lane = use.get("batch_api") or {}
    if lane.get("jobs"):
        off = lane.get("discount_usd")
        lines.append(
            f"- Message Batches lane: {lane['jobs']:,} job(s) judged in batches"
            + (
                f", discount ${-off:.4f} included above"
                if off is not None
                else " (discount unknown: no price)"
            )
        )
    note = (use.get("prompt_cache") or {}).get("note")
    if note:
        lines.append(f"- Prompt caching: {note}")
    hits = use.get("reply_cache", {}).get("hits", 0)
    if hits:
        saved = use["reply_cache"]["saved_usd"]
        lines.append(
            f"- Reply cache: {hits:,} job(s) graded from cached judge replies, no judge call "
            + (f"(saved ${saved:.4f})" if saved is not None else "(saving unknown: no price)")
        )
    if report.get("flags"):
        lines += ["", "Flags: " + ", ".join(f"{k} {v}" for k, v in report["flags"].items())]
    if report.get("rejected"):
        lines += [
            "",
            f"## Rejected input lines ({c['rejected']})",
            "",
            "| line | field | reason |",
            "|---:|---|---|",
        ]
        lines += [f"| {x['line']} | {x['field']} | {x['reason']} |" for x in report["rejected"][:100]]
    return "\n".join(lines) + "\n"
