"""Judge implementations and the judge-spec parser.

``anthropic:MODEL`` -> :class:`AnthropicJudge`, ``openai:MODEL`` -> :class:`OpenAIJudge` (each
SDK is imported only when its judge is built); ``lexical`` -> :class:`LexicalJudge`, a
deterministic offline judge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from judgeq.errors import ConfigError
from judgeq.judges.providers import REGISTRY, JudgeSetup, Provider, provider, registered, spec_forms
from judgeq.ratelimit import Budget, budget_key

_provider = provider  # (parameters below are named ``provider``)

if TYPE_CHECKING:
    from judgeq.judges.base import JudgeBase
    from judgeq.settings import Settings

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
"""The model of ``--judge anthropic`` (:class:`judgeq.judges.anthropic.AnthropicProvider`)."""


class JudgeSpec(NamedTuple):
    """A parsed ``--judge`` value: the provider's name and the model as the provider keeps it
    (parsed once, by :func:`parse_judge_spec`; :attr:`api` is the provider). A pair: it
    unpacks, and equals, ``(provider, model)``."""

    provider: str
    model: str

    @property
    def api(self) -> Provider:
        """The provider (:mod:`judgeq.judges.providers`); ConfigError for an unknown one."""
        return provider(self.provider)

    def __str__(self) -> str:
        if self.provider not in REGISTRY:  # a stored run's provider this version does not know
            return f"{self.provider}:{self.model}"
        return self.api.spec_text(self.model)


def judge_name(provider: str, model: str) -> str:
    """How a judge is named to people: ``provider:model`` (``lexical`` alone)."""
    return str(JudgeSpec(provider, model))


def parse_judge_spec(spec: str) -> JudgeSpec:
    """``PROVIDER:MODEL`` (``anthropic`` alone: its default model; ``lexical``), read by the
    provider (:meth:`Provider.parse_model`); ConfigError saying what is wrong."""
    name, _, model = spec.strip().partition(":")
    name = name.lower()
    if name not in REGISTRY:
        raise ConfigError(f"--judge: unknown judge {spec!r} (use {spec_forms()})")
    try:
        return JudgeSpec(name, provider(name).parse_model(model))
    except ValueError as exc:
        raise ConfigError(f"--judge: {spec!r}: {exc}") from None


def stored_judge(text: str) -> JudgeSpec:
    """A judge as a run's stored spec names it (:func:`judge_name`'s form, checked when the run
    was made): ``provider:model``, or a provider alone with its default model."""
    name, _, model = text.partition(":")
    default = provider(name).default_model if name in REGISTRY else ""
    return JudgeSpec(name, model or default)


__all__ = ["DEFAULT_ANTHROPIC_MODEL", "JudgeSpec", "judge_name", "parse_judge_spec", "stored_judge"]


def build_judge(
    provider: str,
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    modules: Sequence[str] = (),
    urls: Sequence[str] = (),
) -> JudgeBase:
    """Build a judge for a provider/model pair (its provider's SDK is imported now);
    ``api_key``/``base_url``: the Anthropic key and server (other SDKs read their own
    variables); ``modules``: those a ``python:`` judge may be loaded from
    (``JUDGEQ_JUDGE_MODULES``); ``urls``: the servers an ``openai-compatible:`` judge may call
    (``JUDGEQ_JUDGE_URLS``)."""
    return _provider(provider).build(model, JudgeSetup(api_key, base_url, tuple(modules), tuple(urls)))


def judge_factory(settings: Settings) -> Callable[[str, str], JudgeBase]:
    """A ``(provider, model) -> judge`` factory with this machine's set-up from ``settings``."""
    setup = JudgeSetup.of(settings)

    def factory(name: str, model: str) -> JudgeBase:
        return _provider(name).build(model, setup)

    return factory


GROUP = "group"
"""The first part of the name of a group's budget (``group:NAME:…``; JUDGEQ_BUDGET_GROUPS)."""


@cache
def _group_index(text: str) -> dict[tuple[str, str], str]:
    """``{(provider, canonical model): group}`` of a JUDGEQ_BUDGET_GROUPS value."""
    from judgeq.judges.shared_limits import canonical_model
    from judgeq.settings import parse_budget_groups
    from judgeq.telemetry.jsonlog import redact

    try:
        groups = parse_budget_groups(text)
    except ValueError as exc:
        raise ConfigError(redact(f"JUDGEQ_BUDGET_GROUPS: {exc}")) from None
    index: dict[tuple[str, str], str] = {}
    named: dict[tuple[str, str], str] = {}
    for group, judges in groups.items():
        for judge in judges:
            try:
                spec = parse_judge_spec(judge)
            except ConfigError as exc:
                why = str(exc).removeprefix("--judge: ")
                raise ConfigError(redact(f"JUDGEQ_BUDGET_GROUPS: group {group!r}: {why}")) from None
            if spec.api.offline:
                raise ConfigError(
                    f"JUDGEQ_BUDGET_GROUPS: group {group!r}: the {spec} judge has no rate limit"
                )
            key = (spec.provider, canonical_model(spec.provider, spec.model))
            if key in index and index[key] != group:
                raise ConfigError(
                    redact(
                        f"JUDGEQ_BUDGET_GROUPS: {named[key]!r} (group {index[key]!r}) and {judge!r} (group "
                        f"{group!r}) share one rate limit already ({key[0]}:{key[1]}): put them in one group"
                    )
                )
            index[key], named[key] = group, judge
    return index


def budget_groups(settings: Settings) -> Mapping[tuple[str, str], str]:
    """The groups of ``JUDGEQ_BUDGET_GROUPS`` as ``{(provider, model): group}``, each model as
    :func:`~judgeq.judges.shared_limits.canonical_model` names it (so a group naming a model
    takes its aliases and its class too). ConfigError naming the setting, the group and what is
    wrong with a judge (one ``--judge`` would refuse, the lexical judge, two groups holding names
    of one limit)."""
    return _group_index(settings.budget_groups)


def budget_owner(settings: Settings, provider: str, model: str) -> tuple[str, str]:
    """The two first parts of a judge's budget name (the last is its key's hash): ``("group",
    GROUP)`` for a judge of a group of ``JUDGEQ_BUDGET_GROUPS``; else the provider and the model
    as :func:`~judgeq.judges.shared_limits.canonical_model` names it (the class it shares a limit
    with, or the id its alias stands for)."""
    from judgeq.judges.shared_limits import canonical_model

    canonical = canonical_model(provider, model)
    group = budget_groups(settings).get((provider, canonical))
    return (GROUP, group) if group is not None else (provider, canonical)


def budget_name(settings: Settings, provider: str, model: str) -> str:
    """The name of a judge's budget, one per real limit and key (:func:`budget_key`:
    ``first:second:sha256(key)[:16]``, never the key): the names of one model (an alias and its
    dated snapshot) and the models of one rate-limit class get one budget, named by
    :func:`budget_owner` from the table of shared limits (``judgeq/data/shared_limits.json``,
    its sources in it); the judges of a group of ``JUDGEQ_BUDGET_GROUPS`` get the group's. The
    key hashed is the provider's (:meth:`Provider.budget_secret`: the Anthropic key of
    ``settings``, ``OPENAI_API_KEY`` with ``OPENAI_BASE_URL``, ``OPENAI_COMPATIBLE_API_KEY``): two keys never
    share a budget, a group's judges called with two keys get two. The producer and the workers
    both name budgets here."""
    first, second = budget_owner(settings, provider, model)
    return budget_key(first, second, _provider(provider).budget_secret(settings))


def budget_factory(settings: Settings, make: Callable[[str], Budget]) -> Callable[[str, str], Budget | None]:
    """A ``(provider, model) -> budget`` factory: one budget per judge and key, named by
    :func:`budget_name` and made by ``make`` (in Redis for workers, in memory for ``judgeq
    run``); the offline lexical judge has none. Limits given in ``settings``
    (``JUDGEQ_JUDGE_RPM/ITPM/OTPM``, ``--rpm/--itpm/--otpm``) are set on the judge's budget."""
    limits = settings.judge_limits()
    budget_groups(settings)  # a bad JUDGEQ_BUDGET_GROUPS is refused now, not at a judge's first call

    def factory(provider: str, model: str) -> Budget | None:
        if _provider(provider).offline:
            return None
        budget = make(budget_name(settings, provider, model))
        if limits:
            budget.configure(limits)
        return budget

    return factory


def has_anthropic_credentials(settings: Settings) -> bool:
    """Whether an Anthropic judge would have a credential here (no request)."""
    return has_credentials(settings, "anthropic")


def default_judge(settings: Settings) -> tuple[JudgeSpec, str]:
    """The judge of a run, or of a worker, when none is given: the one place it is decided,
    for ``run``, ``submit``, ``worker`` and the Python API. ``JUDGEQ_JUDGE`` when set; else
    the Anthropic judge (default model) when there is a credential; else the offline lexical
    judge. Returns the judge and why it was chosen (every command says it)."""
    if settings.judge:
        return parse_judge_spec(settings.judge), "JUDGEQ_JUDGE"
    if has_anthropic_credentials(settings):
        return parse_judge_spec("anthropic"), "ANTHROPIC_API_KEY is set"
    return parse_judge_spec("lexical"), "no ANTHROPIC_API_KEY"


def has_credentials(settings: Settings, provider: str) -> bool:
    """Whether a judge of ``provider`` would have a credential here (no request)."""
    return _provider(provider).has_credentials(settings)


def can_serve(settings: Settings, provider: str, model: str) -> bool:
    """Whether this machine can call the judge ``provider:model`` (:meth:`Provider.can_serve`:
    a credential for an LLM provider; an allowed server for an OpenAI-compatible one; an
    allowed, importable module or an installed entry point for a custom one). Nothing is
    imported or called but the provider's module."""
    return _provider(provider).can_serve(settings, model)


def served_providers(settings: Settings) -> tuple[str, ...]:
    """The judge providers a worker with ``settings`` can call (:meth:`Provider.serves_any`:
    the offline judge always, an LLM provider with a credential, OpenAI-compatible servers and
    custom judges when this machine allows some), in the registry's order. A run's messages
    are routed by them."""
    return tuple(p for p in registered() if _provider(p).serves_any(settings))


__all__ += [
    "GROUP",
    "budget_factory",
    "budget_groups",
    "budget_name",
    "budget_owner",
    "build_judge",
    "can_serve",
    "default_judge",
    "has_anthropic_credentials",
    "has_credentials",
    "judge_factory",
    "served_providers",
]
