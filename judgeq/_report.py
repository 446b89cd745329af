"""Assembling ``report.json`` and writing the report files.

Files under ``<out>/<run_id>/``: ``report.json`` (machine-readable), ``report.md`` (a
readable summary with tables) and ``verdicts.jsonl`` (one stored result per line, in input
order).  Files are written to a temporary name and renamed, so a reader never sees half a
report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._aggregate import Aggregator, price_for
from ._budget import estimate_input_tokens
from ._render import render_system
from ._result import Result
from ._rubric import Rubric
from ._run import RunSpec

REPORT_VERSION = 1


def _rubric(spec: RunSpec) -> tuple[Rubric | None, str | None]:
    """The run's rubric, or None and why: a report is still written for a run whose rubric no
    longer loads (its jobs are internal_error nulls), with the rubric named by its source."""
    try:
        return spec.rubric, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:300]}"


def prompt_cache_note(rubric: Rubric, model: str) -> dict[str, Any]:
    """Whether the rubric's stable prefix (the system prompt, marked for prompt caching) is
    long enough for the model to cache it: ``prefix_tokens`` is an estimate (4 characters a
    token), ``min_cacheable_tokens`` the model's minimum (``judgeq/data/prices.json``)."""
    prefix = estimate_input_tokens(sum(len(block) for block in render_system(rubric)))
    minimum = (price_for(model) or {}).get("min_cache_tokens")
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
        body["usage"]["prompt_cache"] = prompt_cache_note(rubric, spec.judge_model)
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
        "judge": {"provider": spec.judge_provider, "model": spec.judge_model},
        "counts": counts,
        **body,
        "rejected": spec.rejected,
        "started_at": started_at,
        "finished_at": finished_at,
        "wall_s": round(wall_s, 3),
    }
    if rubric is not None and rubric.is_pass_fail:
        report.pop("pass_rates", None)
    return report


def _atomic_write(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as f:
        write(f)
    tmp.replace(path)


def write_report_files(out_dir: Path, report: dict[str, Any], results: Iterable[Result]) -> dict[str, Path]:
    """Write report.json, report.md and verdicts.jsonl into ``out_dir/<run_id>/``."""
    run_dir = Path(out_dir) / report["run_id"]
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "report.json": run_dir / "report.json",
        "report.md": run_dir / "report.md",
        "verdicts.jsonl": run_dir / "verdicts.jsonl",
    }

    def verdicts(f: Any) -> None:
        for r in results:
            f.write(json.dumps(r.to_line(), ensure_ascii=False, separators=(",", ":")))
            f.write("\n")

    _atomic_write(paths["verdicts.jsonl"], verdicts)
    _atomic_write(paths["report.json"], lambda f: f.write(json.dumps(report, indent=2) + "\n"))
    _atomic_write(paths["report.md"], lambda f: f.write(render_markdown(report)))
    return paths


def _fmt(x: Any, suffix: str = "") -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:g}{suffix}"
    return f"{x}{suffix}"


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
        f"| {c['total']} | {c['graded']} | {c['null']} | {c['rejected']} | {_fmt(report['coverage'], '%')} |",
    ]
    if c["null_by_reason"]:
        lines += ["", "| null reason | jobs |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in c["null_by_reason"].items()]
    o = report["overall"]
    lines += [
        "",
        "## Scores (graded jobs)",
        "",
        "| | n | mean | median | std | min | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| **overall** | {o['n']} | {_fmt(o['mean'])} | {_fmt(o['median'])} | {_fmt(o['std'])} "
        f"| {_fmt(o['min'])} | {_fmt(o['max'])} |",
    ]
    for name, d in report["dimensions"].items():
        lines.append(
            f"| {name} | {d['n']} | {_fmt(d['mean'])} | {_fmt(d['median'])} | "
            f"{_fmt(d['std'])} | {_fmt(d['min'])} | {_fmt(d['max'])} |"
        )
    lines += ["", "## Pass rates (percent of all jobs; a null counts as not passed)", ""]
    if "pass_rates" in report:
        lines += ["| threshold | pass rate |", "|---:|---:|"]
        lines += [f"| ≥ {t} | {_fmt(v, '%')} |" for t, v in report["pass_rates"].items()]
        lines.append(f"| rubric threshold ({r['pass_threshold']}) | {_fmt(report['pass_rate'], '%')} |")
    else:
        lines.append(f"Pass rate: **{_fmt(report['pass_rate'], '%')}**")
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
            lines.append(f"| {key} | {_fmt(rt[key], suffix)} |")
        for k, v in rt["hit_at_k_rates"].items():
            lines.append(f"| hit@{k} | {_fmt(v, '%')} |")
    if report.get("by_model"):
        lines += [
            "",
            "## By model",
            "",
            "| model | total | graded | null | mean | pass rate |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for model, s in report["by_model"].items():
            lines.append(
                f"| {model} | {s['counts']['total']} | {s['counts']['graded']} | "
                f"{s['counts']['null']} | {_fmt(s['overall']['mean'])} | {_fmt(s['pass_rate'], '%')} |"
            )
    lat, use = report["latency_ms"], report["usage"]
    lines += [
        "",
        "## Latency and usage",
        "",
        f"- Grading latency: p50 {_fmt(lat['p50'])} ms, p95 {_fmt(lat['p95'])} ms, max {_fmt(lat['max'])} ms",
        f"- Tokens: {use['input_tokens']:,} in, {use['output_tokens']:,} out "
        f"({use['judge_calls']:,} judge calls); estimated cost "
        + (
            f"${use['estimated_cost_usd']:.4f}"
            if use["estimated_cost_usd"] is not None
            else "unknown (no price for this model in judgeq/data/prices.json)"
        ),
    ]
    parts = use.get("cost_usd")
    if parts:
        shown = ", ".join(f"{k.replace('_', ' ')} ${v:.4f}" for k, v in parts.items() if k != "total" and v)
        lines.append(f"- Cost by part: {shown or 'nothing'} (prices of {use.get('prices_taken', '?')})")
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
