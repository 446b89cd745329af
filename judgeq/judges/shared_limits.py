"""Which model ids share one rate limit: the name a judge's budget is kept under.

A provider limits a model, not a name: an alias and the dated snapshot it points to
(``claude-sonnet-4-5`` and ``claude-sonnet-4-5-20250929``) are one model, and some providers
limit a whole class of models together (Anthropic's "Claude Sonnet 4.x" row: Sonnet 4.5 and 4.6,
one total). Two budgets for one limit would each let through the whole limit, and the server
would refuse the surplus (measured: half the requests answered 429). So a judge's budget is named
by :func:`canonical_model`: the model's own id, after

1. its aliases: the ``"_aliases"`` of ``judgeq/data/prices.json`` (a dated snapshot, ``-latest``
   or ``-0`` id mapped to the entry of the same model; the fact is written once, there), for the
   providers whose table takes them, but for those it lists as another model
   (``"not_same_model"``: an alias there for a shared price only);
2. its class: the classes the provider states several models share (``"shared"``), each named
   as its budget is.

The table is ``judgeq/data/shared_limits.json``, one entry per provider, each with its source
(the providers' model pages and rate-limit pages). It holds only what a source says: two names it
does not join keep two budgets; names that share a limit elsewhere (a gateway, an organization's
own shared limits) are joined by the user with ``JUDGEQ_BUDGET_GROUPS``
(:func:`judgeq.judges.budget_name`). It is applied whatever server a judge is sent to: a server
that takes a provider's model names is taken to limit them as the provider does; where it does
not, the worst is two names on one budget (slower, never refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judgeq.errors import ConfigError
from judgeq.judges.prices import json_object, shipped_prices

__all__ = ["SHIPPED", "SharedLimits", "canonical_model", "parse_shared_limits", "shipped_shared_limits"]

SHIPPED = "judgeq/data/shared_limits.json"

Text = Annotated[str, Field(min_length=1, strict=True)]


class SharedClass(BaseModel):
    """A rate-limit class of a provider: the models it joins and where that is stated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: tuple[Text, ...] = Field(min_length=2)
    source: Text


class ProviderTable(BaseModel):
    """One provider's entry of the table file (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    source: Text = Field(alias="_source")
    prices_aliases: bool = False
    not_same_model: dict[Text, Text] = Field(default_factory=dict)
    """Ids of prices.json's aliases that are models of their own -> why."""
    shared: dict[Text, SharedClass] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SharedLimits:
    """One provider's names: ``aliases`` (an id -> the id of the same model) and ``classes``
    (a model's id -> the name of the class whose limit it shares)."""

    aliases: Mapping[str, str] = field(default_factory=dict)
    classes: Mapping[str, str] = field(default_factory=dict)

    def canonical(self, model: str) -> str:
        """The name ``model``'s budget is kept under: its class, else its own id, else itself."""
        model = self.aliases.get(model, model)
        return self.classes.get(model, model)


def _table(
    provider: str, entry: ProviderTable, prices_aliases: Mapping[str, str], origin: str
) -> SharedLimits:
    """One provider's :class:`SharedLimits`; ConfigError for an entry that contradicts itself."""
    where = f"{origin}: {provider}"
    for alias in entry.not_same_model:
        if alias not in prices_aliases:
            raise ConfigError(f"{where}.not_same_model.{alias}: not an alias of prices.json (remove it)")
    aliases = (
        {a: t for a, t in prices_aliases.items() if a not in entry.not_same_model}
        if entry.prices_aliases
        else {}
    )
    classes: dict[str, str] = {}
    for name, shared in entry.shared.items():
        if name in aliases:
            raise ConfigError(f"{where}.shared.{name}: the class is named as an alias of a model")
        for model in shared.models:
            if model in aliases:
                raise ConfigError(
                    f"{where}.shared.{name}: {model!r} is an alias of {aliases[model]!r}: give that id"
                )
            if model in classes:
                raise ConfigError(f"{where}.shared.{name}: {model!r} is also in {classes[model]!r}")
            classes[model] = name
    return SharedLimits(aliases, classes)


def parse_shared_limits(text: str, origin: str, prices_aliases: Mapping[str, str]) -> dict[str, SharedLimits]:
    """The tables of a shared-limits file's text, by provider, with ``prices_aliases`` (the
    ``"_aliases"`` of the prices) for the providers that take them; ConfigError (one line naming
    ``origin`` and the bad entry) when it is not a valid file. Keys starting with ``_`` are
    notes."""
    data = json_object(text, origin, "provider -> table")
    tables: dict[str, SharedLimits] = {}
    for provider, value in data.items():
        if provider.startswith("_"):
            continue
        try:
            entry = ProviderTable.model_validate(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in (provider, *err["loc"]))
            raise ConfigError(f"{origin}: {where}: {err['msg']}") from None
        tables[provider] = _table(provider, entry, prices_aliases, origin)
    return tables


@cache
def shipped_shared_limits() -> dict[str, SharedLimits]:
    """The tables of ``judgeq/data/shared_limits.json``, with the shipped prices' aliases."""
    text = resources.files("judgeq").joinpath("data/shared_limits.json").read_text(encoding="utf-8")
    return parse_shared_limits(text, SHIPPED, shipped_prices().aliases)


def canonical_model(provider: str, model: str) -> str:
    """The name ``provider``'s judge ``model`` keeps its budget under: the class it shares a
    limit with, else the id of the model it is an alias of, else ``model`` as given (a provider
    without a table: ``openai-compatible``, custom judges)."""
    table = shipped_shared_limits().get(provider)
    return model if table is None else table.canonical(model)
