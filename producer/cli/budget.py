"""``judgeq budget``: each judge's rate limit as every worker sees it; set and reset it.

judgeq budget                      every judge's budget
judgeq budget JUDGE                one judge (PROVIDER:MODEL, or a name as listed)
judgeq budget set JUDGE --rpm N    set its limits for every run and worker on it
judgeq budget reset JUDGE          forget its limits (set and learned), levels and counts

The list is every budget a worker uses: a worker lists its budget again every
:data:`~judgeq.ratelimit.redis.RELIST` seconds while it uses it, so a budget reset, or dropped
after it expired unused, is listed again as soon as a worker calls its judge.

Which budget JUDGE names (:func:`resolve`). A budget is named as the workers name it: provider,
model and a hash of the key they call the judge with (never the key; ``budget_name``). A name as
listed is that budget. ``PROVIDER:MODEL`` is the budget of this machine's key of that provider
(its provider's ``key_variable``), which workers with the same key use. Without that key
here, and always for a custom judge (``python:``, ``plugin:``: its workers name its budget with
whatever key they hold, which this machine cannot know), it is the one budget of that provider
and model listed, and the command says which; with several listed it is refused, naming them.
With none listed, ``set`` is refused, naming the variable to set (it never writes a budget no
worker uses), and ``show`` and ``reset`` say there is none (``reset``: exit 0, nothing to
forget). Errors are one ``judgeq: error:`` line, exit 2, as every bad input of the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from judgeq.errors import ConfigError
from judgeq.ratelimit import COMBINED, BudgetState, Limits
from judgeq.settings import Settings

from .options import redis_option, settings_from

if TYPE_CHECKING:
    from judgeq.judges import JudgeSpec

__all__ = [
    "ACTIONS",
    "BudgetGroup",
    "Resolved",
    "budget",
    "describe",
    "listed_of",
    "missing_key",
    "reset",
    "resolve",
    "set_limits",
    "show",
]

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


@dataclass(frozen=True, slots=True)
class Resolved:
    """The budget a JUDGE argument names. ``name``: None when none is listed and this machine
    cannot name the workers' one; ``judge``: the argument; ``prefix``: the budget names of that
    judge without their key's hash, as the workers name them (``provider:model``, or what
    ``budget_name`` makes of it); ``provider``: the judge's ("" when given as listed);
    ``missing``: why this machine could not name it itself ("" when it could, or when it was
    given as listed), said when the one listed budget of that judge was taken instead."""

    name: str | None
    judge: str
    prefix: str
    provider: str = ""
    missing: str = ""


def missing_key(settings: Settings, provider: str) -> str:
    """Why this machine cannot name ``provider``'s budget as its workers do, "" when it can:
    the variable of their key is unset (or blank) here; a custom judge's workers name it with
    their own key. Never the key itself."""
    from judgeq.judges.providers import provider as named

    api = named(provider)
    if api.own_key_budget:
        return f"the workers of a {provider}: judge name its budget with their own key"
    return "" if api.key_present(settings) else f"{api.key_variable or f'the {provider} key'} is not set here"


def _spec(judge: str) -> JudgeSpec:
    """The judge JUDGE names (one with a budget), or a ConfigError that says what is wrong."""
    from judgeq.judges import parse_judge_spec

    try:
        spec = parse_judge_spec(judge)
    except ConfigError as exc:
        raise ConfigError(f"JUDGE {judge!r}: {str(exc).removeprefix('--judge: ')}") from None
    if spec.api.offline:
        raise ConfigError(f"the {spec} judge has no rate limit (it calls no API)")
    return spec


def listed_of(known: list[str], prefix: str) -> list[str]:
    """The listed budgets named ``prefix:HASH``: one judge's, whatever their key."""
    return [n for n in known if n.rpartition(":")[0] == prefix]


def resolve(settings: Settings, judge: str, known: list[str]) -> Resolved:
    """The budget ``judge`` names among ``known`` (the listed ones), as its workers name it:
    see the module's docstring. Raises ConfigError for a bad JUDGE, the lexical judge (it has
    no budget), and several listed budgets of the judge when this machine cannot tell which."""
    from judgeq.judges import budget_name

    if judge in known:
        return Resolved(judge, judge, judge.rpartition(":")[0])
    spec = _spec(judge)
    mine = budget_name(settings, spec.provider, spec.model)
    prefix = mine.rpartition(":")[0]  # the name without the key's hash, as every worker makes it
    missing = missing_key(settings, spec.provider)
    if not missing:
        return Resolved(mine, judge, prefix, spec.provider)
    same = listed_of(known, prefix)
    if len(same) > 1:
        raise ConfigError(
            f"{missing}, so which of the {len(same)} budgets of {judge} listed is the workers' "
            f"cannot be told: give its name, one of {', '.join(same)}"
        )
    return Resolved(same[0] if same else None, judge, prefix, spec.provider, missing)


def _taken(found: Resolved) -> str:
    """The line that says which listed budget was taken for a judge named without its key."""
    return f"{found.judge}: {found.missing}; taking the one budget of it listed: {found.name}"


def _unnamed(found: Resolved) -> str:
    """Why ``set`` refuses a judge whose budget this machine cannot name and none is listed."""
    from judgeq.judges.providers import provider as named

    api = named(found.provider)
    if api.own_key_budget:
        todo = "start its workers with JUDGEQ_JUDGE_RPM/ITPM/OTPM"
    else:
        todo = f"set {api.key_variable or 'its key'} to the key the workers use"
    return (
        f"{found.missing}, and no budget of {found.judge} is listed: {todo}, or give the "
        "budget's name as 'judgeq budget' lists it once a worker has called the judge"
    )


def _elsewhere(known: list[str], found: Resolved, form: str) -> str:
    """The listed budgets of the same judge with another key than the one named, said in
    ``form`` ("" when there are none): a judge named here with a key its workers do not hold."""
    others = [n for n in listed_of(known, found.prefix) if n != found.name]
    return form.format(f"listed for {found.judge} with another key: {', '.join(others)}") if others else ""


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
            why = "429s under it: cut below it" if given or stated else "no limit known; found from 429s"
            parts.append(f"{state.adaptive_rpm:,.0f}/min adaptive ({why})")
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
    names = known
    if judge:
        found = resolve(settings, judge, known)
        if found.name is None or found.name not in known:
            click.echo(
                f"{found.name or judge}: no budget yet (no call made and no limit set)"
                + _elsewhere(known, found, " ({})")
            )
            return
        if found.missing:
            click.echo(_taken(found))
        names = [found.name]
    if not names:
        click.echo("no judge budgets yet (a budget appears with a judge's first call or 'judgeq budget set')")
        return
    for i, name in enumerate(names):
        if i:
            click.echo("")
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
    found = resolve(settings, judge, known)
    if found.name is None:
        raise ConfigError(_unnamed(found))
    if found.missing:
        click.echo(_taken(found))
    name = found.name
    RedisBudget(client, name).configure(limits)
    new = ""
    if name not in known:
        also = _elsewhere(known, found, "; {}")
        new = f" (a new budget: no worker has called this judge with this key yet{also})"
    click.echo(f"{name}: limits set: {read_state(client, name).configured.describe()}{new}")
    click.echo(
        "  (a worker started with JUDGEQ_JUDGE_RPM/ITPM/OTPM sets its own when it first calls the judge)"
    )


@budget.command("reset")
@click.argument("judge")
@redis_option
def reset(judge: str, **flags: Any) -> None:
    """Forget JUDGE's limits (set and learned), levels and counts; it starts afresh. A judge
    without a budget has nothing to forget: said, exit 0."""
    from judgeq.ratelimit.redis import budget_names, reset_budget

    settings = settings_from(**flags)
    client = _client(settings)
    known = budget_names(client)
    found = resolve(settings, judge, known)
    if found.name is None or found.name not in known:
        click.echo(f"no budget for {judge}: nothing to reset" + _elsewhere(known, found, " ({})"))
        return
    if found.missing:
        click.echo(_taken(found))
    reset_budget(client, found.name)
    click.echo(f"{found.name}: reset (workers learn the server's limits again from its next answers)")
