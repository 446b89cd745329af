"""Assembling ``report.json`` from a run's spec and its aggregated results (the files are
written by :mod:`judgeq.report.files`, report.md rendered by :mod:`judgeq.report.markdown`)."""

from __future__ import annotations

from typing import Any

from judgeq.figures.stats import METHODS
from judgeq.grading.request import render_system
from judgeq.judges.prices import Prices, shipped_prices
from judgeq.judges.providers import is_offline
from judgeq.ratelimit import estimate_input_tokens
from judgeq.report.aggregate import Aggregator
from judgeq.report.model import REPORT_VERSION, RunReport
from judgeq.rubric.model import Rubric
from judgeq.runspec import RunSpec

__all__ = ["REPORT_VERSION", "build_report", "new_aggregator", "prompt_cache_note"]


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
        council_mode=spec.council_rule,
        swap=spec.swap,
        lane=spec.lane,
        prices=spec.price_book(),
        cascade=spec.cascade,
    )


STRUCTURED = ("json_schema", "json_object", "tool")
"""Response formats that ask the judge for a structured verdict (one score per dimension)."""

FALLBACK_WARN_SHARE = 0.5
"""Above this share of graded verdicts on the holistic fallback, the report warns."""


def verdict_warnings(report: dict[str, Any], rubric: Rubric | None) -> list[str]:
    """What a reader must know before trusting the scores: most verdicts fell back to the
    holistic score (each dimension given the one overall number) although the judge was asked
    for a structured verdict, e.g. through a gateway that rewrites or drops the schema (600 of
    600 verdicts of an Anthropic route through LiteLLM, with nothing saying so)."""
    if rubric is None or not rubric.dimensions or rubric.is_pairwise:
        return []
    graded = int(report["counts"].get("graded") or 0)
    fell = int((report.get("flags") or {}).get("holistic_fallback", 0))
    served = [s for s in report["judge"].get("served") or [] if s.get("response_format") in STRUCTURED]
    if graded < 1 or fell <= FALLBACK_WARN_SHARE * graded or not served:
        return []
    judges = ", ".join(
        dict.fromkeys(
            f"{s.get('provider')}:{s.get('model') or '?'}"
            + (f" at {s['endpoint']}" if s.get("endpoint") else "")
            for s in served
        )
    )
    return [
        f"{fell:,} of {graded:,} verdicts fell back to the holistic score (every dimension given the "
        f"one overall score: the per-dimension figures say nothing) although {judges} was asked for "
        f"a structured verdict ({served[0]['response_format']}): the judge, or a gateway between, "
        "did not keep to the schema. Check the raw replies in verdicts.jsonl."
    ]


def build_report(
    spec: RunSpec,
    agg: Aggregator,
    *,
    started_at: str,
    finished_at: str,
    wall_s: float,
    missing: int = 0,
    served: list[dict[str, Any]] | None = None,
    partial: bool = False,
    rescored_from: str | None = None,
) -> dict[str, Any]:
    """The whole ``report.json`` document; ``served``: the provenance of its judge calls
    (:func:`~judgeq.report.aggregate.served_list` of the run's counters); ``partial``: written
    before every job was graded (its unfinished jobs are nulls, not missing); ``rescored_from``:
    the run whose results it scored again, with no judge call."""
    rubric, error = _rubric(spec)
    body = agg.report(judge_model=spec.judge_model)
    if rubric is not None and not is_offline(spec.judge_provider):
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
    if missing and not partial:
        counts["missing"] = missing
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "run_id": spec.run_id,
        "batch": spec.jobs_file,  # the jobs file (the key keeps its first name: readers use it)
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
                {
                    "council": [f"{p}:{m}" for p, m in spec.judges],
                    "council_mode": spec.council_rule,
                }
                if spec.council
                else {}
            ),
            **({"swap": spec.swap} if rubric is not None and rubric.is_pairwise else {}),
            "served": served or [],
        },
        "intervals": METHODS,
        "counts": counts,
        **body,
        "rejected": spec.rejected,
        "started_at": started_at,
        "finished_at": finished_at,
        "wall_s": round(wall_s, 3),
    }
    warnings = verdict_warnings(report, rubric)
    if warnings:
        report["warnings"] = warnings
    if rubric is not None and (rubric.is_pass_fail or rubric.is_pairwise):
        report.pop("pass_rates", None)
        report.pop("pass_rates_ci95", None)
    if rubric is not None and rubric.is_pairwise:
        report.pop("pass_rate", None)
        report.pop("pass_rate_ci95", None)
    if partial:
        report["partial"] = True
    if rescored_from is not None:  # the source run's report says who answered its verdicts
        report["judge"]["served"] = []
        report["rescored_from"] = rescored_from
        report["judge"]["note"] = f"no judge call: the verdicts of run {rescored_from}, scored again"
    RunReport.from_dict(report)  # every key this version writes is declared on the model
    return report
