"""The provider seam: what a judge provider is, and the one place providers are registered.

A provider (``anthropic``, ``openai``, ``openai-compatible``, ``lexical``, ``python``,
``plugin``) is a :class:`Provider`: its facts (its key's variable, what a worker needs to call
it, its batch API, whose models it serves) and what varies with it (reading a ``--judge``
model, building a judge, whether this machine holds its credential, what names its budget's
key) are members of one object, declared in the provider's own module beside its adapter (the
SDK and its wire format). :data:`REGISTRY` names each provider's module; a provider's module
is imported when that provider is first asked for, so a run of one provider never imports
another's SDK.

Adding a provider: write its module (a :class:`Provider` named ``PROVIDER``, or a tuple
``PROVIDERS`` for a module serving several) and add one line to :data:`REGISTRY`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from judgeq.errors import ConfigError

if TYPE_CHECKING:
    from judgeq.grading.request import JudgeRequest
    from judgeq.judges.base import JudgeBase
    from judgeq.settings import Settings

__all__ = [
    "REGISTRY",
    "JudgeSetup",
    "LazyModule",
    "Provider",
    "family_of",
    "is_offline",
    "lane_name",
    "provider",
    "registered",
    "spec_forms",
]


class LazyModule:
    """A module imported at the first read of one of its attributes: a provider's module names
    its SDK with it, so what the provider is (its facts) is known without the SDK's import
    (anthropic's takes over a second); the judge it builds imports it. Each read goes through
    :func:`importlib.import_module` (the import lock, then ``sys.modules``): safe from threads."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


@dataclass(frozen=True, slots=True)
class JudgeSetup:
    """What this machine gives a judge it builds: the Anthropic key and base URL of its settings
    (other SDKs read their own variables), the modules a ``python:`` judge may be loaded from
    (``JUDGEQ_JUDGE_MODULES``) and the servers an ``openai-compatible:`` judge may call
    (``JUDGEQ_JUDGE_URLS``)."""

    api_key: str | None = None
    base_url: str | None = None
    modules: Sequence[str] = ()
    urls: Sequence[str] = ()

    @classmethod
    def of(cls, settings: Settings) -> JudgeSetup:
        key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
        modules, urls = tuple(settings.judge_module_list()), tuple(settings.judge_url_list())
        return cls(key, settings.anthropic_base_url, modules, urls)


class Provider:
    """A judge provider. Subclasses set the facts and override what differs; the defaults are
    those of an LLM provider whose SDK finds its own credential."""

    name: str = ""
    """As ``--judge`` names it (``anthropic`` in ``anthropic:MODEL``)."""
    family: str = ""
    """Whose models its judges are (``anthropic``, ``openai``): two judges of one family are
    not independent (juries, self-grading). "" when it cannot be told (a server, custom code)."""
    model_prefixes: tuple[str, ...] = ()
    """How its family's model names begin (``claude``): the family of a graded output's
    ``model``, and of a model a gateway serves (:func:`family_of`)."""
    offline: bool = False
    """Calls no API: no credential, budget, reply cache, preflight or routing; every worker
    serves it."""
    key_variable: str | None = None
    """The environment variable of its key, as its SDK reads it (None: none of judgeq's)."""
    key_name: str = ""
    """Its key in a sentence: ``an Anthropic API key``."""
    served_by_key: bool = False
    """A machine holding its key (:attr:`key_variable`) can call any of its judges."""
    serves_text: str = ""
    """What a worker serving it calls, in the worker's ready line (``any Anthropic model``)."""
    serve_needs: str = ""
    """What a machine needs to call its judges (said when a worker cannot)."""
    batch_api: str | None = None
    """Its batch API (``Anthropic's Message Batches API``): the ``--batch-api`` lane; None: none."""
    lane_name: str = "Message Batches lane"
    """Its batch lane, in the report and messages."""
    batch_one_model: bool = False
    """Its batch API takes one model per batch (OpenAI's: one per input file)."""
    plural: str = ""
    """Its judges, in a sentence (``OpenAI-compatible servers``)."""
    own_key_budget: bool = False
    """Its workers name its budget with whatever key they hold (custom judges): another
    machine cannot name it."""
    default_model: str = ""
    """The model of ``--judge NAME`` with none ("" : one must be given)."""
    spec_form: str = ""
    """How ``--judge`` names one of its judges, in help and errors ("": ``NAME:MODEL``)."""
    limit_headers: tuple[str, ...] = ()
    """The rate-limit header families its servers state their limits in, by prefix
    (``anthropic-ratelimit-``, ``x-ratelimit-``): its judges hand these headers to the shared
    budget, which learns the server's limits from them (how a family is read, once for every
    server that states it: :mod:`judgeq.ratelimit.headers`). (): its servers state none; the
    budget learns from their 429s alone."""

    @property
    def form(self) -> str:
        """:attr:`spec_form`, or ``NAME:MODEL``."""
        return self.spec_form or f"{self.name}:MODEL"

    def parse_model(self, model: str) -> str:
        """The model of ``--judge NAME:MODEL`` as kept; raise ValueError saying what is wrong."""
        model = model.strip() or self.default_model
        if not model:
            raise ValueError(f"give the model, e.g. {self.name}:MODEL")
        if any(c.isspace() for c in model):
            raise ValueError(f"model name {model!r} contains white space")
        return model

    def spec_text(self, model: str) -> str:
        """How a judge of it is named to people and in stored specs: ``provider:model``."""
        return f"{self.name}:{model}"

    def build(self, model: str, setup: JudgeSetup) -> JudgeBase:
        """A judge calling ``model`` (its SDK imported now, not before)."""
        raise NotImplementedError

    def check_setup(self, model: str, setup: JudgeSetup) -> None:
        """Raise ConfigError (one line) when this machine may not build ``model``'s judge (a
        server or module it does not allow, code that does not load); before a run is sent.
        Nothing by default: an SDK's judge builds anywhere (its credential is checked apart)."""

    def token_counter(self, model: str, setup: JudgeSetup) -> Callable[[JudgeRequest], int] | None:
        """Its token counting API for ``model``'s requests (a dry run's estimate), when it has
        one and this machine holds the key; None: the estimate is 4 characters a token."""
        return None

    def has_credentials(self, settings: Settings) -> bool:
        """Whether a judge of it would have a credential here (no request)."""
        return True

    def can_serve(self, settings: Settings, model: str) -> bool:
        """Whether this machine can call ``model``'s judge (nothing imported or called)."""
        return self.has_credentials(settings)

    def serves_any(self, settings: Settings) -> bool:
        """Whether this machine can call some judge of it (a worker's routing)."""
        return self.has_credentials(settings)

    def budget_secret(self, settings: Settings) -> str | None:
        """What its budgets' names hash (never shown): the key its calls are made with."""
        return None

    def key_present(self, settings: Settings) -> bool:
        """Whether this machine holds the key its workers name its budget with."""
        return self.has_credentials(settings)


REGISTRY: dict[str, str] = {
    "anthropic": "judgeq.judges.anthropic",
    "bedrock": "judgeq.judges.anthropic",
    "vertex": "judgeq.judges.anthropic",
    "openai": "judgeq.judges.openai",
    "openai-compatible": "judgeq.judges.openai",
    "python": "judgeq.judges.plugins",
    "plugin": "judgeq.judges.plugins",
    "gemini": "judgeq.judges.gemini",
    "lexical": "judgeq.judges.lexical",
}
"""Every provider, as ``--judge`` names it, and the module that holds it (the one place a
provider is registered)."""


def registered() -> tuple[str, ...]:
    """The names of every provider, in :data:`REGISTRY`'s order."""
    return tuple(REGISTRY)


@cache
def provider(name: str) -> Provider:
    """The provider ``name``; ConfigError naming the known ones for any other."""
    path = REGISTRY.get(name)
    if path is None:
        raise ConfigError(f"unknown judge provider {name!r} (known: {', '.join(REGISTRY)})")
    module = importlib.import_module(path)
    declared: tuple[Provider, ...] = getattr(module, "PROVIDERS", None) or (module.PROVIDER,)
    for found in declared:
        if found.name == name:
            return found
    raise ConfigError(f"{path} declares no provider {name!r}")  # a registry mistake: said, not guessed


def spec_forms() -> str:
    """Every provider's ``--judge`` form, in :data:`REGISTRY`'s order, for help and errors
    (``anthropic:MODEL, ..., or lexical``)."""
    forms = [provider(name).form for name in registered()]
    return ", ".join(forms[:-1]) + f" or {forms[-1]}"


def is_offline(name: str | None) -> bool:
    """Whether ``name`` is a registered provider that calls no API (a stored name that is not
    registered is taken for one that does)."""
    return name in REGISTRY and provider(name).offline


def lane_name(name: str | None) -> str:
    """What a run's batch lane is called for its judge's provider (:attr:`Provider.lane_name`)."""
    return provider(name).lane_name if name is not None and name in REGISTRY else Provider.lane_name


def family_of(model: str | None) -> str:
    """The family a model's name says it is of (``claude-3-5-sonnet`` -> ``anthropic``; a
    gateway's ``anthropic/claude-3.5-sonnet`` too), by its providers' :attr:`Provider.model_prefixes`;
    "" when no registered provider's prefix begins it."""
    name = (model or "").strip().lower().rsplit("/", 1)[-1]
    for api in map(provider, registered()):
        if api.family and name.startswith(api.model_prefixes):
            return api.family
    return ""
