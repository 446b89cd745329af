"""``report.md``: a report as Markdown, with tables (the validity sections too)."""

from __future__ import annotations

from typing import Any

from judgeq.figures.formatting import fmt, fmt_ci, fmt_count, fmt_p
from judgeq.jobs.kinds import KINDS
from judgeq.judges.prices import unpriced_text
from judgeq.judges.providers import is_offline, lane_name
from judgeq.report.model import CascadeFigures, Estimates, GroupEstimates, QuantityEstimate, RunReport

__all__ = ["render_markdown", "validity_markdown"]


def _estimate_cells(q: QuantityEstimate | None, suffix: str) -> str:
    if q is None:
        return "| – | – | – |"
    human = fmt_ci(q.human_only.value, q.human_only.ci95, suffix) if q.human_only else "–"
    ppi = fmt_ci(q.ppi.value, q.ppi.ci95, suffix) if q.ppi else "–"
    return f"| {fmt_ci(q.judge_only.value, q.judge_only.ci95, suffix)} | {human} | {ppi} |"


def _estimates_markdown(est: Estimates) -> list[str]:
    """The figures estimated from labels and verdicts together, run and models."""
    rows: list[tuple[str, GroupEstimates]] = [("**run**", est), *sorted((est.by_model or {}).items())]
    lines = [
        "",
        "### Estimates from labels and verdicts together",
        "",
        "| | pass rate: judge only | people only (labelled) | both (PPI++) "
        "| mean: judge only | people only (labelled) | both (PPI++) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, group in rows:
        cells = _estimate_cells(group.pass_rate, "%") + _estimate_cells(group.mean, "")[1:]
        lines.append(f"| {name} {cells}")
    notes = [q.note for q in (est.pass_rate, est.mean) if q is not None and q.note]
    lines += ["", *(f"- {n}" for n in dict.fromkeys(notes))]
    if est.note:
        lines.append(f"- {est.note}")
    return lines


def cascade_markdown(cascade: CascadeFigures) -> list[str]:
    """A cascade run's section: the guarantee, each judge's share, abstentions, cost."""
    lines = [
        "",
        "## Cascade",
        "",
        f"- Guarantee: the kept verdicts agree with people at least {100 * cascade.agreement:g}% of the "
        f"time, with probability at least {100 * (1 - cascade.risk):g}% over calibration sets "
        f"(thresholds fitted on {fmt_count(cascade.calibrated)} labelled jobs of `{cascade.calibration}`, "
        f"run {cascade.calibration_run}; {cascade.samples} samples per judge, confidence: the share "
        "agreeing with the first)",
        f"- Kept: {fmt_count(cascade.kept)} of {fmt_count(cascade.jobs)} jobs "
        f"({fmt(cascade.coverage, '%')}); "
        f"abstained: {fmt_count(cascade.abstained)} (no judge confident enough: null `abstained`, "
        "for people to label)",
        "",
        "| judge | threshold | asked | answered | share of jobs |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in cascade.stages:
        threshold = "keeps nothing" if s.threshold is None else f"{s.threshold:.2f}"
        asked, answered = fmt_count(s.asked), fmt_count(s.answered)
        lines.append(f"| {s.judge} | {threshold} | {asked} | {answered} | {fmt(s.share, '%')} |")
    observed = cascade.observed
    fraction = None if cascade.cost_fraction is None else 100 * cascade.cost_fraction
    lines += [
        "",
        f"- Observed on this run's labelled jobs: {fmt_ci(observed.agreement, observed.interval, '%')} agree "
        f"({fmt_count(observed.labelled)} labelled and kept)"
        if observed.labelled
        else "- Observed: no labelled job of this run was kept (import labels with `judgeq labels import`)",
        f"- Cost: {fmt(cascade.cost_usd, ' USD')} against {fmt(cascade.strongest_alone_usd, ' USD')} for the "
        f"strongest judge alone ({fmt(fraction, '%')})"
        if cascade.strongest_alone_usd is not None
        else "- Cost against the strongest judge alone: unknown (a judge without a price)",
        "- What the guarantee does not say: it holds for jobs exchangeable with the calibration set, "
        "graded with the same rubric and judges; it is over kept verdicts, not over abstentions.",
    ]
    return lines


def validity_markdown(report: RunReport) -> list[str]:
    """The sections on how far the grades can be trusted: paired model comparisons, pairwise
    figures, agreement with labels, the council."""
    lines: list[str] = []
    if report.by_model_paired:
        lines += [
            "",
            "## Models on the same inputs (paired)",
            "",
            "| model | vs | shared inputs | mean difference (vs - model, 95% CI) | p (Wilcoxon) |",
            "|---|---|---:|---:|---:|",
        ]
        for d in report.by_model_paired:
            lines.append(
                f"| {d.model} | {d.vs} | {d.n} | {fmt_ci(d.mean_diff, d.ci95)} | {fmt_p(d.p_value)} |"
            )
    lines += _kind_sections(report, validity=True)
    ag = report.agreement
    if ag:
        lines += [
            "",
            f"## Agreement with labels ({ag.graded} labelled and graded; {ag.nulls} labelled nulls "
            "not scored)",
            "",
        ]
        if ag.pairs is not None:
            pa = ag.pairs
            lines.append(
                f"- Pairs: accuracy {fmt_ci(pa.accuracy_ties_half, pa.accuracy_ties_half_ci95, '%')} "
                f"(ties half), "
                + fmt_ci(pa.accuracy_ties_excluded, pa.accuracy_ties_excluded_ci95, "%")
                + " excluding ties "
                f"({pa.ties_excluded_n} jobs); Cohen's kappa {fmt(pa.kappa, nd=3)}"
            )
        if ag.pass_fail is not None:
            pf = ag.pass_fail
            lines.append(
                f"- Pass/fail: accuracy {fmt_ci(pf.accuracy, pf.accuracy_ci95, '%')} of {pf.n}; "
                f"Cohen's kappa {fmt(pf.kappa, nd=3)}"
            )
        if ag.numeric is not None:
            nu = ag.numeric
            lines.append(
                f"- Scores ({nu.n}): Spearman {fmt(nu.spearman, nd=3)}, "
                f"Kendall's tau {fmt(nu.kendall_tau, nd=3)}, "
                f"quadratic-weighted kappa {fmt(nu.qwk, nd=3)}, "
                f"mean absolute error {fmt_ci(nu.mae, nu.mae_ci95)}"
            )
        if ag.estimates is not None:
            lines += _estimates_markdown(ag.estimates)
    if report.cascade is not None:
        lines += cascade_markdown(report.cascade)
    co = report.council
    if co:
        extra = [
            (name, figures)
            for name, figures in (
                ("gave no verdict", co.absent),
                ("with the council (95% CI)", co.with_council),
                ("with the labels (95% CI)", co.with_labels),
            )
            if figures
        ]
        panel = "Jury" if co.combined.method.startswith("jury") else "Council"
        lines += [
            "",
            f"## {panel} of judges ({co.combined.method})",
            "",
            "| judge | n | mean (95% CI) |" + "".join(f" {name} |" for name, _ in extra),
            "|---|---:|---:|" + "---:|" * len(extra),
        ]
        for j, row in co.per_judge.items():
            cells = []
            for _, figures in extra:
                value = figures.get(j) if figures else None
                if isinstance(value, int) or value is None:
                    cells.append(fmt_count(value or 0))
                else:
                    cells.append(f"{fmt_ci(value.rate, value.ci95, '%')} of {value.n:,}")
            lines.append(
                f"| {j} | {row.n} | {fmt_ci(row.mean, row.ci95)} |" + "".join(f" {c} |" for c in cells)
            )
        if co.combined.method.startswith("jury") and co.combined.note:
            lines += ["", f"- Rules: {co.combined.note}"]
        lines += [
            "",
            f"- Krippendorff's alpha ({co.alpha_level}): {fmt(co.krippendorff_alpha, nd=3)} over "
            f"{co.sampled_units} jobs",
            f"- Jobs the judges disagree on: {report.flags.get('judges_disagree', 0)}"
            + (
                " (largest spreads: "
                + ", ".join(f"{d.job_id} {d.spread:g}" for d in co.disagreements[:5])
                + ")"
                if co.disagreements
                else ""
            ),
        ]
        combined = co.combined
        if combined.method == "z" and combined.n:
            lines += [
                "",
                "Combined score: mean of per-judge z-scores, "
                f"{fmt_ci(combined.mean, combined.ci95)} "
                f"over {combined.n} jobs",
                "",
                "| model | n | mean z (95% CI) |",
                "|---|---:|---:|",
            ]
            for model, row in (combined.by_model or {}).items():
                lines.append(f"| {model} | {row.n} | {fmt_ci(row.mean, row.ci95)} |")
    return lines


def _kind_sections(report: RunReport, *, validity: bool) -> list[str]:
    """Each kind's own section (:attr:`JobKind.markdown`), in the registry's order: those on the
    jobs graded after the scores, those on how far the grades can be trusted (``validity``) with
    the validity sections."""
    lines: list[str] = []
    for kind in KINDS.values():
        if kind.markdown is not None and kind.section is not None and kind.validity == validity:
            lines += kind.markdown(report.section(kind.section))
    return lines


def served_lines(served: list[dict[str, Any]]) -> list[str]:
    """``- Answered by: gpt-4.1-mini-2025-04-14 at api.openai.com (json_schema), 30 calls``: the
    provenance of the run's judge calls (the offline judge's are left out: nothing to tell)."""
    parts = []
    for s in served:
        if is_offline(s.get("provider")):
            continue
        where = f" at {s['endpoint']}" if s.get("endpoint") else ""
        how = f" ({s['response_format']})" if s.get("response_format") else ""
        parts.append(f"{s.get('model') or 'an unnamed model'}{where}{how}, {s['calls']:,} call(s)")
    return [f"- Answered by: {'; '.join(parts)}"] if parts else []


def render_markdown(document: RunReport | dict[str, Any]) -> str:
    """A readable summary of a report (its model, or report.json as a dict), with tables."""
    report = RunReport.of(document)
    c = report.counts
    r = report.rubric
    judge = report.judge
    judges = judge.council or [f"{judge.provider}:{judge.model}"]
    lines = [
        f"# judgeq report: {report.run_id}" + (" (PARTIAL)" if report.partial else ""),
        "",
        *(
            [
                "> **Partial report**: the run was stopped (canceled or interrupted) before every job "
                "was graded; jobs that did not finish are null `canceled`, and every figure covers "
                "only what finished.",
                "",
            ]
            if report.partial
            else []
        ),
        *(line for w in report.warnings or [] for line in (f"> **Warning**: {w}", "")),
        f"- Rubric: **{r.name}** {r.version} (scale {r.scale}, source `{r.source}`)",
        f"- Judge: {judges[0]}"
        if len(judges) == 1
        else f"- Judges (a cascade, cheapest first): {', '.join(judges)}"
        if judge.council_mode == "cascade"
        else f"- Judges (a council, {judge.council_mode or 'mean'}): {', '.join(judges)}",
        *served_lines(judge.served),
        f"- Jobs file: `{report.batch or ''}`",
        f"- Started {report.started_at}, finished {report.finished_at} ({report.wall_s} s)",
        *(
            [
                f"- Labels: {report.labels.given:g} from `{report.labels.file}`, imported "
                f"{report.labels.imported_at} ({report.labels.changed:g} new or changed; no judge call)"
            ]
            if report.labels is not None
            else []
        ),
        "",
        "## Counts",
        "",
        "| total | graded | null | rejected | coverage |",
        "|---:|---:|---:|---:|---:|",
        f"| {c.total} | {c.graded} | {c.null} | {c.rejected} | "
        f"{fmt_ci(report.coverage, report.coverage_ci95, '%')} |",
    ]
    if c.null_by_reason:
        lines += ["", "| null reason | jobs |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in c.null_by_reason.items()]
    o = report.overall
    lines += [
        "",
        "## Scores (graded jobs)",
        "",
        "| | n | mean (95% CI) | median | std | min | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| **overall** | {o.n} | {fmt_ci(o.mean, o.ci95)} | {fmt(o.median)} | "
        f"{fmt(o.std)} | {fmt(o.min)} | {fmt(o.max)} |",
    ]
    for name, d in report.dimensions.items():
        lines.append(
            f"| {name} | {d.n} | {fmt_ci(d.mean, d.ci95)} | {fmt(d.median)} | "
            f"{fmt(d.std)} | {fmt(d.min)} | {fmt(d.max)} |"
        )
    if report.pass_rates is not None:
        cis = report.pass_rates_ci95 or {}
        lines += ["", "## Pass rates (percent of all jobs; a null counts as not passed)", ""]
        lines += ["| threshold | pass rate (95% CI) |", "|---:|---:|"]
        lines += [f"| ≥ {t} | {fmt_ci(v, cis.get(t), '%')} |" for t, v in report.pass_rates.items()]
        lines.append(
            f"| rubric threshold ({r.pass_threshold}) | "
            f"{fmt_ci(report.pass_rate, report.pass_rate_ci95, '%')} |"
        )
    elif "pass_rate" in report.model_fields_set:
        lines += ["", "## Pass rate (percent of all jobs; a null counts as not passed)", ""]
        lines.append(f"Pass rate: **{fmt_ci(report.pass_rate, report.pass_rate_ci95, '%')}**")
    lines += _kind_sections(report, validity=False)
    if report.by_model:
        lines += [
            "",
            "## By model",
            "",
            "| model | total | graded | null | mean (95% CI) | pass rate (95% CI) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for model, g in report.by_model.items():
            lines.append(
                f"| {model} | {g.counts.total} | {g.counts.graded} | "
                f"{g.counts.null} | {fmt_ci(g.overall.mean, g.overall.ci95)} | "
                f"{fmt_ci(g.pass_rate, g.pass_rate_ci95, '%')} |"
            )
    lines += validity_markdown(report)
    lat, use = report.latency_ms, report.usage
    lines += [
        "",
        "## Latency and usage",
        "",
        f"- Grading latency: p50 {fmt(lat.p50)} ms, p95 {fmt(lat.p95)} ms, max {fmt(lat.max)} ms",
        f"- Tokens: {use.input_tokens:,} in, {use.output_tokens:,} out "
        f"({use.judge_calls:,} judge calls); estimated cost "
        + (
            f"${use.estimated_cost_usd:.4f}"
            if use.estimated_cost_usd is not None
            else f"unknown ({unpriced_text(use.unpriced_models)})"
        ),
    ]
    parts = use.cost_usd
    if parts:
        shown = ", ".join(f"{k.replace('_', ' ')} ${v:.4f}" for k, v in parts.items() if k != "total" and v)
        lines.append(f"- Cost by part: {shown or 'nothing'} (prices of {use.prices_taken})")
    lane = use.batch_api
    if lane.jobs:
        off = lane.discount_usd
        lines.append(
            f"- {lane_name(judge.provider)}: {lane.jobs:,} job(s) judged in batches"
            + (
                f", discount ${-off:.4f} included above"
                if off is not None
                else " (discount unknown: no price)"
            )
        )
    note = (use.prompt_cache or {}).get("note")
    if note:
        lines.append(f"- Prompt caching: {note}")
    hits = use.reply_cache.hits
    if hits:
        saved = use.reply_cache.saved_usd
        lines.append(
            f"- Reply cache: {hits:,} job(s) graded from cached judge replies, no judge call "
            + (f"(saved ${saved:.4f})" if saved is not None else "(saving unknown: no price)")
        )
    if report.flags:
        lines += ["", "Flags: " + ", ".join(f"{k} {v}" for k, v in report.flags.items())]
    if report.rejected:
        lines += [
            "",
            f"## Rejected input lines ({c.rejected})",
            "",
            "| line | field | reason |",
            "|---:|---|---|",
        ]
        lines += [f"| {x['line']} | {x['field']} | {x['reason']} |" for x in report.rejected[:100]]
    return "\n".join(lines) + "\n"
