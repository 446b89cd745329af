"""``--dry-run``: validate, render every request, count tokens, estimate the cost; no judge."""

from __future__ import annotations

import math

import click

from judgeq.errors import JudgeError
from judgeq.jobs.reader import JobsFileLimits, iter_jobs
from judgeq.judges import judge_factory
from judgeq.judges.base import cache_identity
from judgeq.judges.lexical import LexicalJudge
from judgeq.judges.prices import Prices, shipped_prices, unpriced_text
from judgeq.judges.providers import JudgeSetup
from judgeq.pipeline.job import GradingContext, job_calls
from judgeq.report.aggregate import cost_breakdown
from judgeq.settings import Settings
from judgeq.store.reply_cache import ReplyCache, cache_key, get_many

from ..plan import Plan, judges_text

__all__ = ["COLUMNS", "EST_OUTPUT_TOKENS", "SAMPLE", "CacheCount", "dry_run"]

SAMPLE = 20
EST_OUTPUT_TOKENS = 250
COLUMNS = ("total", "input", "output", "cache r/w", "discount")  # a typical verdict: reasoning plus scores


def _estimate(text: str) -> int:
    """Rough token count when the API cannot count: about 4 characters per token."""
    return math.ceil(len(text) / 4)


def _usd(value: float) -> str:
    return f"-${-value:.4f}" if value < 0 else f"${value:.4f}"


class CacheCount:
    """How many of the run's judge calls the reply cache answers already, per judge model
    (looked up in chunks: one round trip per thousand calls)."""

    CHUNK = 1000

    def __init__(self, cache: ReplyCache | None) -> None:
        self.cache = cache
        self.calls: dict[str, int] = {}
        self.hits: dict[str, int] = {}
        self._keys: list[tuple[str, str]] = []

    def add(self, model: str, key: str) -> None:
        self.calls[model] = self.calls.get(model, 0) + 1
        self._keys.append((model, key))
        if len(self._keys) >= self.CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.cache is not None and self._keys:
            found = get_many(self.cache, [key for _, key in self._keys])
            for model, key in self._keys:
                self.hits[model] = self.hits.get(model, 0) + (key in found)
        self._keys = []


def dry_run(plan: Plan, settings: Settings, cache: ReplyCache | None = None) -> None:
    """Print what the run would send and cost; ``cache``: the reply cache the run would use
    (its answered calls cost nothing), None when there is none or it is off."""
    spec = plan.spec
    ctx = GradingContext(
        rubric=spec.rubric,
        judge=LexicalJudge(),
        max_tokens=spec.max_tokens,
        retrieval=spec.retrieval,
        swap=spec.swap,
    )
    limits = JobsFileLimits(settings.max_line_bytes, settings.max_field_chars)
    system_chars = sum(len(s) for s in ctx.system)
    user_chars = 0
    samples = []
    llm_models = list(dict.fromkeys(j.model for j in plan.judges if not j.api.offline))
    in_cache = CacheCount(cache if settings.cache and llm_models else None)
    # the key the workers use names each judge's provider, server and model: the judge is
    # built as a worker builds it (from this machine's settings: a worker whose base URL
    # differs looks up other keys)
    identities: dict[str, str] = {}
    if in_cache.cache is not None:
        build = judge_factory(settings)
        for j in plan.judges:
            if not j.api.offline and j.model not in identities:
                identities[j.model] = cache_identity(build(j.provider, j.model))
    calls = (
        0  # one judge's calls: a pair's two orders, a conversation's turns, none for one the checks settle
    )
    for index, job in iter_jobs(plan.scan, limits):
        for call in job_calls(ctx, job):  # (ctx has one judge: the calls each judge makes)
            calls += 1
            user_chars += len(call.request.user)
            if index < SAMPLE:
                samples.append(call.request)
            for model, identity in identities.items():
                in_cache.add(model, cache_key(identity, call.request, spec.rubric))
    in_cache.flush()
    n = spec.total
    method = "estimate (about 4 characters per token)"
    per_char = 0.25
    system_tokens = _estimate("".join(ctx.system))
    count = plan.judge.api.token_counter(plan.judge.model, JudgeSetup.of(settings))
    if count is not None:
        try:
            counted = [count(r) for r in samples]
            sample_chars = sum(system_chars + len(r.user) for r in samples)
            per_char = sum(counted) / sample_chars
            system_tokens = round(system_chars * per_char)
            method = f"the token counting API on {len(samples)} sampled requests, extrapolated"
        except JudgeError as exc:
            click.echo(f"judgeq: token counting failed ({exc}); using an estimate", err=True)
    header = (
        f"dry run: {n} jobs valid ({plan.scan.invalid} rejected), rubric {spec.rubric.name} "
        f"{spec.rubric.version}, judge {judges_text(plan)}; every request rendered"
    )
    llm = [j for j in plan.judges if not j.api.offline]
    if not llm:
        click.echo(header)
        click.echo("  the lexical judge calls no LLM: no tokens, no cost")
        return
    # every judge call of a job sends the same request (a swapped pair: the same size)
    input_tokens = round((system_chars * calls + user_chars) * per_char)
    output_tokens = EST_OUTPUT_TOKENS * calls
    click.echo(header)
    if calls == 2 * n and spec.rubric.is_pairwise:
        per = " per judge (2 calls a job: each pair in both orders)"
    elif calls != n:
        per = (
            f" per judge ({calls:,} calls for {n:,} jobs: a call per turn graded, none for a job the "
            "checks settle)"
        )
    else:
        per = " per judge"
    click.echo(
        f"  tokens ({method}): {input_tokens:,} input "
        f"(stable prefix {system_tokens:,} per call), ~{output_tokens:,} output "
        f"(~{EST_OUTPUT_TOKENS} per verdict, max {spec.max_tokens})"
        + (per if len(plan.judges) > 1 or calls != n else "")
    )
    prices = plan.prices or shipped_prices()
    for judge_spec in llm:
        _cost_rows(prices, judge_spec.model, calls, input_tokens, output_tokens, system_tokens)
        if in_cache.cache is not None:
            hits, total = in_cache.hits.get(judge_spec.model, 0), in_cache.calls.get(judge_spec.model, 0)
            share = 1 - hits / total if total else 1.0
            click.echo(
                f"  reply cache: {hits:,} of {total:,} calls to {judge_spec.model} are answered already "
                f"(they cost nothing): with it, every cost above is {100 * share:.1f}% of its figure"
            )
    if not settings.cache:
        click.echo("  the reply cache is off (--no-cache)")
    elif in_cache.cache is None:
        click.echo("  no reply cache to look in: every call is counted")


def _cost_rows(
    prices: Prices, model: str, n: int, input_tokens: int, output_tokens: int, system_tokens: int
) -> None:
    """The cost table of one judge model: live and batch lane, with and without prompt caching."""
    price = prices.lookup(model)
    if price is None:
        click.echo(f"  cost: unknown ({unpriced_text([model])})")
        return
    # with prompt caching: the first job writes the prefix to the cache, the others read it
    # (only when the prefix reaches the model's minimum cacheable length)
    minimum = price.min_cache_tokens
    cacheable = system_tokens >= minimum
    reads = max(system_tokens * (n - 1), 0) if cacheable else 0
    writes = system_tokens if cacheable else 0
    plain = (input_tokens, output_tokens)
    cached = (input_tokens - reads - writes, output_tokens, reads, writes)
    rows = {
        ("live", "no"): cost_breakdown(model, *plain, prices=prices),
        ("live", "yes"): cost_breakdown(model, *cached, prices=prices),
        ("batch", "no"): cost_breakdown(model, *plain, batch=True, prices=prices),
        ("batch", "yes"): cost_breakdown(model, *cached, batch=True, prices=prices),
    }
    click.echo(f"  estimated cost for {model} (prices of {prices.taken}):")
    click.echo(f"    {'lane':<6}  {'prompt caching':<14} " + " ".join(f"{h:>10}" for h in COLUMNS))
    for (lane, caching), c in rows.items():
        assert c is not None
        values = (
            c["total"],
            c["input"],
            c["output"],
            c["cache_read"] + c["cache_write"],
            c["batch_discount"],
        )
        click.echo(f"    {lane:<6}  {caching:<14} " + " ".join(f"{_usd(v):>10}" for v in values))
    if not cacheable:
        click.echo(
            f"  prompt caching does not apply: the rubric prefix (~{system_tokens:,} tokens) is below "
            f"{model}'s minimum cacheable length ({minimum:,})"
        )
