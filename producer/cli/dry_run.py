"""``--dry-run``: validate, render every request, count tokens, estimate the cost; no judge."""

from __future__ import annotations

import math

import click

from judgeq._aggregate import estimate_cost, price_for
from judgeq._batch import BatchLimits, iter_jobs
from judgeq._errors import JudgeError
from judgeq._grading import GradingContext
from judgeq._settings import Settings
from judgeq.judges.lexical import LexicalJudge

from ..plan import Plan

SAMPLE = 20
EST_OUTPUT_TOKENS = 250  # a typical verdict: reasoning plus scores


def _estimate(text: str) -> int:
    """Rough token count when the API cannot count: about 4 characters per token."""
    return math.ceil(len(text) / 4)


def dry_run(plan: Plan, settings: Settings) -> None:
    spec = plan.spec
    ctx = GradingContext(
        rubric=spec.rubric, judge=LexicalJudge(), max_tokens=spec.max_tokens, retrieval=spec.retrieval
    )
    limits = BatchLimits(settings.max_line_bytes, settings.max_field_chars)
    system_chars = sum(len(s) for s in ctx.system)
    user_chars = 0
    samples = []
    for index, job in iter_jobs(plan.scan, limits):
        request = ctx.request_for(job)
        user_chars += len(request.user)
        if index < SAMPLE:
            samples.append(request)
    n = spec.total
    method = "estimate (about 4 characters per token)"
    per_char = 0.25
    system_tokens = _estimate("".join(ctx.system))
    if plan.judge.provider == "anthropic" and settings.anthropic_api_key is not None:
        from judgeq.judges.anthropic import AnthropicJudge

        judge = AnthropicJudge(
            plan.judge.model,
            api_key=settings.anthropic_api_key.get_secret_value(),
            base_url=settings.anthropic_base_url,
        )
        try:
            counted = [judge.count_tokens(r) for r in samples]
            sample_chars = sum(system_chars + len(r.user) for r in samples)
            per_char = sum(counted) / sample_chars
            system_tokens = round(system_chars * per_char)
            method = f"the token counting API on {len(samples)} sampled requests, extrapolated"
        except JudgeError as exc:
            click.echo(f"judgeq: token counting failed ({exc}); using an estimate", err=True)
    if plan.judge.provider == "lexical":
        click.echo(
            f"dry run: {n} jobs valid ({plan.scan.invalid} rejected), rubric {spec.rubric.name} "
            f"{spec.rubric.version}, judge {plan.judge}; every request rendered"
        )
        click.echo("  the lexical judge calls no LLM: no tokens, no cost")
        return
    input_tokens = round((system_chars * n + user_chars) * per_char)
    output_tokens = EST_OUTPUT_TOKENS * n
    click.echo(
        f"dry run: {n} jobs valid ({plan.scan.invalid} rejected), rubric {spec.rubric.name} "
        f"{spec.rubric.version}, judge {plan.judge}; every request rendered"
    )
    click.echo(
        f"  tokens ({method}): {input_tokens:,} input "
        f"(stable prefix {system_tokens:,} per job), ~{output_tokens:,} output "
        f"(~{EST_OUTPUT_TOKENS} per verdict, max {spec.max_tokens})"
    )
    if price_for(plan.judge.model) is None:
        click.echo(f"  cost: no price known for {plan.judge.model!r} (judgeq/data/prices.json)")
        return
    full = estimate_cost(plan.judge.model, input_tokens, output_tokens)
    # with caching: the first job writes the prefix to the cache, the others read it
    reads = max(system_tokens * (n - 1), 0)
    cached = estimate_cost(
        plan.judge.model,
        input_tokens - reads - system_tokens,
        output_tokens,
        cache_read=reads,
        cache_write=system_tokens,
    )
    click.echo(
        f"  estimated cost for {plan.judge.model}: ${full:.4f} without prompt caching, "
        f"${cached:.4f} if the stable prefix is read from the cache"
    )
