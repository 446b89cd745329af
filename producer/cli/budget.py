"""``judgeq budget``: each judge's rate limit as every worker sees it; set and reset it.

judgeq budget                      every judge's budget
judgeq budget JUDGE                one judge (anthropic:MODEL, or a name as listed)
judgeq budget set JUDGE --rpm N    set its limits for every run and worker on it
judgeq budget reset JUDGE          forget its limits (set and learned), levels and counts
"""

from __future__ import annotations

from typing import Any

import click

from judgeq.errors import ConfigError
from judgeq.ratelimit import COMBINED, BudgetState, Limits
from judgeq.settings import Settings

from .options import redis_option, settings_from

__all__ = ["ACTIONS", "BudgetGroup", "budget", "describe", "reset", "resolve", "set_limits", "show"]

ACTIONS = ("show", "set", "reset")


class BudgetGroup(click.Group):
    """``judgeq budget [JUDGE]`` shows; ``set`` and ``reset`` act. A first word that is no
    action is the judge to show."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in (*ACTIONS, "-h", "--help"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


def _client(settings: Settings) -> Any:
    from judgeq.redis_connect import connect

    return connect(settings.redis_url)


KEY_VARIABLE = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openai-compatible": "OPENAI_COMPATIBLE_API_KEY",
}


def resolve(settings: Settings, judge: str, known: list[str]) -> str:
    """The budget name of ``judge``: a name as listed, or ``provider:model`` with this
    machine's API key (as workers name it); without a key here, the one budget of that model."""
    from judgeq.judges import budget_name, has_credentials, parse_judge_spec

    if judge in known:
        return judge
    try:
        spec = parse_judge_spec(judge)
    except ConfigError as exc:
        raise ConfigError(f"JUDGE {judge!r}: {str(exc).removeprefix('--judge: ')}") from None
    if spec.provider == "lexical":
        raise ConfigError("the lexical judge has no rate limit (it calls no API)")
    if has_credentials(settings, spec.provider):
        return budget_name(settings, spec.provider, spec.model)
    same = [n for n in known if n.rpartition(":")[0] == f"{spec.provider}:{spec.model}"]
    if len(same) == 1:
        return same[0]
    raise ConfigError(
        f"{KEY_VARIABLE.get(spec.provider, 'the key')} is not set here, so the budget of {judge} "
        "(named by a hash of the key "
        + (
            "the workers use) cannot be told apart: give its name as 'judgeq budget' lists it"
            if same
            else "the workers use) is unknown: set the key, or give the budget's name"
        )
    )


def _per_minute(value: float | None) -> str:
    return "–" if not value else f"{value:,.0f}/min"


def describe(state: BudgetState) -> list[str]:
    """The lines ``judgeq budget`` prints for one judge."""
    provider, _, rest = state.name.partition(":")
    model, _, digest = rest.rpartition(":")
    lines = [f"{provider}:{model}  (key sha256 {digest[:8]}…; budget {state.name})"]
    effective = state.effective()
    for dim, label, given, stated in zip(
        ("requests", "input-tokens", "output-tokens"),
        ("requests", "input tokens", "output tokens"),
        state.configured.as_tuple(),
        state.server.as_tuple(),
        strict=True,
    ):
        parts = []
        if given:
            parts.append(f"{given:,}/min set")
        if stated:
            parts.append(f"{stated:,}/min stated by the server")
        if dim == "requests" and state.adaptive_rpm:
            parts.append(f"{state.adaptive_rpm:,.0f}/min adaptive (no limit known; found from 429s)")
        applies = effective.get(dim)
        if not parts:
            parts.append("none known" if dim != "requests" else "none known (adaptive: no 429 yet)")
        level = state.levels.get(dim)
        now = ""
        if level is not None and applies:
            now = (
                f"; {level:,.1f} ready now" if level >= 0 else "; none ready now (a large request paid back)"
            )
        lines.append(f"  {label:<14} {', '.join(parts)}{now}")
    if state.tokens_limit:
        level = state.levels.get(COMBINED)
        now = "" if level is None else f"; {level:,.1f} ready now" if level >= 0 else "; none ready now"
        lines.append(f"  {'tokens (in+out)':<14} {state.tokens_limit:,}/min stated by the server{now}")
    if state.paused_for > 0:
        paused = f"{state.paused_for:.1f} s more"
        lines.append(f"  paused         {paused} (the server refused the calls of many jobs)")
    share = (
        f" ({100 * state.refused_last_minute / state.requests_last_minute:.1f}%)"
        if state.requests_last_minute
        else ""
    )
    sent, served = state.requests_last_minute, state.served_last_minute
    lines.append(
        f"  last minute    {sent:,} requests sent, {served:,} served, "
        f"{state.refused_last_minute:,} refused (429){share}"
    )
    lines.append(f"  waiting        {state.waiting} caller(s) waiting for this budget now")
    return lines


@click.group(cls=BudgetGroup)
def budget() -> None:
    """Each judge's rate limit (requests and tokens a minute), shared by every worker."""


@budget.command("show")
@click.argument("judge", required=False)
@redis_option
def show(judge: str | None, **flags: Any) -> None:
    """Show every judge's budget, or JUDGE's."""
    from judgeq.ratelimit.redis import budget_names, read_state

    settings = settings_from(**flags)
    client = _client(settings)
    known = budget_names(client)
    names = [resolve(settings, judge, known)] if judge else known
    if not names:
        click.echo("no judge budgets yet (a budget appears with a judge's first call or 'judgeq budget set')")
        return
    for i, name in enumerate(names):
        if i:
            click.echo("")
        if name not in known:
            click.echo(f"{name}: no budget yet (no call made and no limit set)")
            continue
        for line in describe(read_state(client, name)):
            click.echo(line)


@budget.command("set")
@click.argument("judge")
@click.option("--rpm", type=click.IntRange(min=1), default=None, help="Requests per minute.")
@click.option("--itpm", type=click.IntRange(min=1), default=None, help="Input tokens per minute.")
@click.option("--otpm", type=click.IntRange(min=1), default=None, help="Output tokens per minute.")
@redis_option
def set_limits(judge: str, rpm: int | None, itpm: int | None, otpm: int | None, **flags: Any) -> None:
    """Set JUDGE's limits for every run and worker on it (those not given stay as they are)."""
    from judgeq.ratelimit.redis import RedisBudget, budget_names, read_state

    limits = Limits(rpm, itpm, otpm)
    if not limits:
        raise ConfigError("give at least one of --rpm, --itpm, --otpm (judgeq budget reset forgets them)")
    settings = settings_from(**flags)
    client = _client(settings)
    known = budget_names(client)
    name = resolve(settings, judge, known)
    RedisBudget(client, name).configure(limits)
    new = "" if name in known else " (a new budget: no worker has called this judge with this key yet)"
    click.echo(f"{name}: limits set: {read_state(client, name).configured.describe()}{new}")
    click.echo(
        "  (a worker started with JUDGEQ_JUDGE_RPM/ITPM/OTPM sets its own when it first calls the judge)"
    )


@budget.command("reset")
@click.argument("judge")
@redis_option
def reset(judge: str, **flags: Any) -> None:
    """Forget JUDGE's limits (set and learned), levels and counts; it starts afresh."""
    from judgeq.ratelimit.redis import budget_names, reset_budget

    settings = settings_from(**flags)
    client = _client(settings)
    known = budget_names(client)
    name = resolve(settings, judge, known)
    if name not in known:
        raise ConfigError(f"no budget named {name} ('judgeq budget' lists them)")
    reset_budget(client, name)
    click.echo(f"{name}: reset (workers learn the server's limits again from its next answers)")
