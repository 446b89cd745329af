"""Judge implementations and the judge-spec parser.

``anthropic:MODEL`` -> :class:`AnthropicJudge`, ``openai:MODEL`` -> :class:`OpenAIJudge` (each
SDK is imported only when its judge is built); ``lexical`` -> :class:`LexicalJudge`, a
deterministic offline judge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from judgeq.errors import ConfigError
from judgeq.ratelimit import Budget, budget_key

if TYPE_CHECKING:
    from judgeq.judges.base import Judge
    from judgeq.settings import Settings

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    """A parsed ``--judge`` value."""

    provider: str
    model: str

    def __str__(self) -> str:
        return self.provider if self.provider == "lexical" else f"{self.provider}:{self.model}"


def judge_name(provider: str, model: str) -> str:
    """How a judge is named to people: ``provider:model`` (``lexical`` alone)."""
    return str(JudgeSpec(provider, model))


def parse_judge_spec(spec: str) -> JudgeSpec:
    """``anthropic:MODEL``, ``anthropic`` (default model) or ``lexical``."""
    provider, _, model = spec.strip().partition(":")
    provider = provider.lower()
    if provider == "anthropic":
        model = model.strip() or DEFAULT_ANTHROPIC_MODEL
        if any(c.isspace() for c in model):
            raise ConfigError(f"--judge: model name {model!r} contains white space")
        return JudgeSpec("anthropic", model)
    if provider == "lexical":
        if model:
            raise ConfigError("--judge: 'lexical' takes no model")
        return JudgeSpec("lexical", "lexical-overlap-v1")
    if provider == "openai":
        model = model.strip()
        if not model or any(c.isspace() for c in model):
            raise ConfigError(f"--judge: {spec!r}: give the OpenAI model, e.g. openai:gpt-4.1-mini")
        return JudgeSpec("openai", model)
    if provider in ("python", "plugin"):
        from judgeq.judges.plugins import check_target

        try:
            check_target(provider, model.strip())
        except ValueError as exc:
            raise ConfigError(f"--judge: {spec!r}: {exc}") from None
        return JudgeSpec(provider, model.strip())
    if provider == "openai-compatible":
        from judgeq.judges.openai import split_endpoint

        try:
            split_endpoint(model)
        except ValueError as exc:
            raise ConfigError(f"--judge: {spec!r}: {exc}") from None
        return JudgeSpec("openai-compatible", model.strip())
    raise ConfigError(
        f"--judge: unknown judge {spec!r} (use anthropic:MODEL, openai:MODEL, "
        "openai-compatible:MODEL@URL or lexical)"
    )


__all__ = ["DEFAULT_ANTHROPIC_MODEL", "JudgeSpec", "judge_name", "parse_judge_spec"]


def build_judge(
    provider: str,
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    modules: Sequence[str] = (),
    urls: Sequence[str] = (),
) -> Judge:
    """Build a judge for a provider/model pair (each SDK is imported only for its judge);
    ``modules``: those a ``python:`` judge may be loaded from (``JUDGEQ_JUDGE_MODULES``);
    ``urls``: the servers an ``openai-compatible:`` judge may call (``JUDGEQ_JUDGE_URLS``)."""
    if provider == "lexical":
        from judgeq.judges.lexical import LexicalJudge

        return LexicalJudge(model)
    if provider == "anthropic":
        from judgeq.judges.anthropic import AnthropicJudge

        return AnthropicJudge(model, api_key=api_key, base_url=base_url)
    if provider == "openai":  # the SDK reads OPENAI_API_KEY / OPENAI_BASE_URL itself
        from judgeq.judges.openai import OpenAIJudge

        return OpenAIJudge(model)
    if provider == "openai-compatible":  # model is MODEL@URL; the key OPENAI_COMPATIBLE_API_KEY
        from judgeq.judges.openai import OpenAICompatibleJudge

        return OpenAICompatibleJudge(model, allowed=urls)
    if provider in ("python", "plugin"):
        from judgeq.judges.plugins import load_custom_judge

        return load_custom_judge(provider, model, modules)
    raise ConfigError(f"unknown judge provider {provider!r}")


def judge_factory(settings: Settings) -> Callable[[str, str], Judge]:
    """A ``(provider, model) -> judge`` factory with the key and base URL from ``settings``."""
    key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None

    modules, urls = settings.judge_module_list(), settings.judge_url_list()

    def factory(provider: str, model: str) -> Judge:
        return build_judge(
            provider,
            model,
            api_key=key,
            base_url=settings.anthropic_base_url,
            modules=modules,
            urls=urls,
        )

    return factory


GROUP = "group"
"""The first part of the name of a group's budget (``group:NAME:…``; JUDGEQ_BUDGET_GROUPS)."""


def _budget_secret(settings: Settings, provider: str) -> str | None:
    """What a judge's budget name hashes (:func:`budget_key`, never shown): the Anthropic key of
    ``settings``; ``OPENAI_API_KEY`` and the server, ``OPENAI_BASE_URL``, for an OpenAI judge;
    ``OPENAI_COMPATIBLE_API_KEY`` for an OpenAI-compatible one (its model names the server)."""
    import os

    if provider == "openai":
        return os.environ.get("OPENAI_API_KEY", "") + "@" + os.environ.get("OPENAI_BASE_URL", "")
    if provider == "openai-compatible":
        return os.environ.get("OPENAI_COMPATIBLE_API_KEY", "")
    return settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None


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
            if spec.provider == "lexical":
                raise ConfigError(
                    f"JUDGEQ_BUDGET_GROUPS: group {group!r}: the lexical judge has no rate limit"
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
    key hashed is the provider's (:func:`_budget_secret`: the Anthropic key of ``settings``,
    ``OPENAI_API_KEY`` with ``OPENAI_BASE_URL``, ``OPENAI_COMPATIBLE_API_KEY``): two keys never
    share a budget, a group's judges called with two keys get two. The producer and the workers
    both name budgets here."""
    first, second = budget_owner(settings, provider, model)
    return budget_key(first, second, _budget_secret(settings, provider))


def budget_factory(settings: Settings, make: Callable[[str], Budget]) -> Callable[[str, str], Budget | None]:
    """A ``(provider, model) -> budget`` factory: one budget per judge and key, named by
    :func:`budget_name` and made by ``make`` (in Redis for workers, in memory for ``judgeq
    run``); the offline lexical judge has none. Limits given in ``settings``
    (``JUDGEQ_JUDGE_RPM/ITPM/OTPM``, ``--rpm/--itpm/--otpm``) are set on the judge's budget."""
    limits = settings.judge_limits()
    budget_groups(settings)  # a bad JUDGEQ_BUDGET_GROUPS is refused now, not at a judge's first call

    def factory(provider: str, model: str) -> Budget | None:
        if provider == "lexical":
            return None
        budget = make(budget_name(settings, provider, model))
        if limits:
            budget.configure(limits)
        return budget

    return factory


def has_anthropic_credentials(settings: Settings) -> bool:
    """Whether an Anthropic judge would have a credential here: ``ANTHROPIC_API_KEY`` (a blank
    one is none), or what else the installed SDK resolves (a token, a profile). No request."""
    import os

    key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
    if key is None and os.environ.get("ANTHROPIC_API_KEY") is not None:
        return False  # set but blank: no key (the SDK would send it as it is)
    if key:  # a key is a credential: no need to import the SDK (0.6 s of a producer's start)
        return True
    from judgeq.judges.anthropic import AnthropicJudge

    return AnthropicJudge(
        DEFAULT_ANTHROPIC_MODEL, api_key=key, base_url=settings.anthropic_base_url
    ).has_credentials


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


SERVE_NEEDS = {
    "anthropic": "ANTHROPIC_API_KEY set",
    "openai": "OPENAI_API_KEY set",
    "openai-compatible": "JUDGEQ_JUDGE_URLS naming the run's server",
    "python": "JUDGEQ_JUDGE_MODULES naming the judge's module",
    "plugin": "the judge's plugin installed",
}
"""What a machine needs to call a provider's judges (said when a worker cannot)."""


def has_credentials(settings: Settings, provider: str) -> bool:
    """Whether a judge of ``provider`` would have a credential here (no request)."""
    if provider == "anthropic":
        return has_anthropic_credentials(settings)
    if provider == "openai":
        from judgeq.judges.openai import OpenAIJudge

        return OpenAIJudge("any").has_credentials
    return True


def can_serve(settings: Settings, provider: str, model: str) -> bool:
    """Whether this machine can call the judge ``provider:model``: a credential for an LLM
    provider; an allowed server for an OpenAI-compatible one; an allowed, importable module
    (or an installed entry point) for a custom one. Nothing is imported or called."""
    if provider == "openai-compatible":
        from judgeq.judges.openai import split_endpoint, url_allowed

        try:
            return url_allowed(split_endpoint(model)[1], settings.judge_url_list())
        except ValueError:
            return False
    if provider == "python":
        import importlib.util

        module = model.partition(":")[0]
        if module not in settings.judge_module_list():
            return False
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False
    if provider == "plugin":
        from importlib.metadata import entry_points

        from judgeq.judges.plugins import GROUP

        return any(ep.name == model for ep in entry_points(group=GROUP))
    return has_credentials(settings, provider)


def served_providers(settings: Settings) -> tuple[str, ...]:
    """The judge providers a worker with ``settings`` can call: the offline judge always, each
    LLM provider with a credential, OpenAI-compatible servers when it allows some
    (``JUDGEQ_JUDGE_URLS``), ``python:`` judges when it allows a module (``JUDGEQ_JUDGE_MODULES``),
    ``plugin:`` judges when one is installed. A run's messages are routed by them."""

    def serves(p: str) -> bool:
        if p == "openai-compatible":
            return bool(settings.judge_url_list())
        if p == "python":
            return bool(settings.judge_module_list())
        if p == "plugin":
            from importlib.metadata import entry_points

            from judgeq.judges.plugins import GROUP

            return bool(entry_points(group=GROUP))
        return has_credentials(settings, p)

    return tuple(
        p for p in ("anthropic", "openai", "openai-compatible", "python", "plugin", "lexical") if serves(p)
    )


__all__ += [
    "GROUP",
    "SERVE_NEEDS",
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
