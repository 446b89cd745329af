"""Judge prices: what a judge call costs, per model id.

The shipped prices are ``judgeq/data/prices.json`` (USD per million tokens). A file of the
user's own in the same format (``JUDGEQ_PRICES=path``, or ``--prices path``) goes on top: each
of its entries adds a model or replaces the shipped entry of that model whole, and its
``"_aliases"`` add to the shipped ones. A model id is priced by its own entry, or by the alias
table (``"_aliases"``: an id such as a dated snapshot ``claude-sonnet-4-5-20250929`` or a
``-latest`` id, mapped to the entry whose prices it has), and by nothing else: an id that is
neither has no price, and its cost is unknown (never $0). No prefix of an id is ever looked
up, so a newer model never takes an older family's prices.

A run records the resolved price of each of its LLM judges in its spec
(:attr:`judgeq.RunSpec.prices`): the workers and the reducer price its calls as the producer
did, without reading the user's file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from judgeq.errors import ConfigError

USD = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]

SHIPPED = "judgeq/data/prices.json"
HOW_TO_PRICE = f"add it to a prices file given with JUDGEQ_PRICES=path (format of {SHIPPED})"
"""What a user does about a model without a price (the end of every such message)."""


class Price(BaseModel):
    """One model's prices, USD per million tokens (an entry of the prices file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: USD
    """Uncached input tokens."""
    output: USD
    cache_write: USD
    """5-minute prompt-cache writes; when left out: 1.25 x ``input`` (the API's rule)."""
    cache_read: USD
    """Prompt-cache reads; when left out: 0.1 x ``input``."""
    batch_discount: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False, strict=True)] = 0.5
    """The share the Message Batches lane takes off every price."""
    min_cache_tokens: Annotated[int, Field(ge=0, strict=True)] = 1024
    """The shortest prefix the model caches."""

    @model_validator(mode="before")
    @classmethod
    def _cache_prices_by_the_apis_rule(cls, data: Any) -> Any:
        value = data.get("input") if isinstance(data, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            data = {"cache_write": 1.25 * value, "cache_read": 0.1 * value, **data}
        return data

    @property
    def dearest_input(self) -> float:
        """The highest price an input token can have (uncached, cache write or cache read)."""
        return max(self.input, self.cache_write, self.cache_read)


_ALIASES: TypeAdapter[dict[str, str]] = TypeAdapter(dict[Annotated[str, Field(min_length=1)], str])


@dataclass(frozen=True, slots=True)
class Prices:
    """A price table: entries by exact model id, and the alias table."""

    entries: Mapping[str, Price]
    aliases: Mapping[str, str] = field(default_factory=dict)
    taken: str = "unknown"
    """Where and when the prices were taken (shown beside every cost)."""

    def lookup(self, model: str) -> Price | None:
        """The model's price: its own entry, else its alias's; an OpenAI-compatible judge's
        ``MODEL@URL`` its own entry, else the model's (a gateway serving ``gpt-4.1-mini`` is
        priced as it); None when it has none."""
        hit = self.entries.get(model)
        if hit is None and model in self.aliases:
            hit = self.entries.get(self.aliases[model])
        name, at, url = model.rpartition("@")
        if hit is None and at and "://" in url and name:
            hit = self.lookup(name)
        return hit

    def resolve(self, models: Iterable[str]) -> dict[str, Price]:
        """``{model: price}`` of the models that have one (for :attr:`RunSpec.prices`)."""
        return {m: p for m in dict.fromkeys(models) if (p := self.lookup(m)) is not None}

    def cost(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cache_read: int = 0,
        cache_write: int = 0,
        *,
        batch: bool = False,
    ) -> dict[str, float] | None:
        """USD per part of a usage: ``input`` (uncached input tokens), ``output``,
        ``cache_read``, ``cache_write``, ``batch_discount`` (negative: the Message Batches
        lane's share off everything, when ``batch``) and their ``total``. None: the model has
        no price (its cost is unknown, whatever the tokens).

        The counts have the Messages API's meaning: cache reads and writes are apart from
        ``input_tokens``."""
        p = self.lookup(model)
        if p is None:
            return None
        parts = {
            "input": input_tokens * p.input / 1e6,
            "output": output_tokens * p.output / 1e6,
            "cache_read": cache_read * p.cache_read / 1e6,
            "cache_write": cache_write * p.cache_write / 1e6,
        }
        gross = sum(parts.values())
        parts["batch_discount"] = -gross * p.batch_discount if batch else 0.0
        parts["total"] = gross + parts["batch_discount"]
        return {k: round(v, 6) for k, v in parts.items()}


def json_object(text: str, origin: str, what: str) -> dict[str, Any]:
    """A data file's text as the JSON object it must be; ConfigError, one line naming ``origin``,
    when it is not valid JSON or not an object (of ``what``)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{origin}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a JSON object of {what}")
    return data


def parse_prices(text: str, origin: str) -> tuple[dict[str, Price], dict[str, str], str | None]:
    """The entries, aliases and ``_taken`` date of a prices file's text; ConfigError (one
    line naming ``origin`` and the bad field) when it is not a valid prices file.

    The format: a JSON object of model id -> ``{"input", "output", "cache_write",
    "cache_read", "batch_discount", "min_cache_tokens"}`` (USD per million tokens; ``input``
    and ``output`` required), keys starting with ``_`` being notes, except ``"_aliases"``
    (``{"id": "priced id"}``) and ``"_taken"`` (the date the prices were taken)."""
    data = json_object(text, origin, f"model id -> prices (as in {SHIPPED})")
    entries: dict[str, Price] = {}
    for key, value in data.items():
        if key.startswith("_"):
            continue
        if not key.strip():
            raise ConfigError(f"{origin}: a model id is empty")
        try:
            entries[key] = Price.model_validate(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in (key, *err["loc"]))
            raise ConfigError(f"{origin}: {where}: {err['msg']}") from None
    try:
        aliases = _ALIASES.validate_python(data.get("_aliases", {}))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in ("_aliases", *err["loc"]))
        raise ConfigError(
            f"{origin}: {where}: {err['msg']} (an alias maps a model id to a priced id)"
        ) from None
    taken = data.get("_taken")
    return entries, aliases, str(taken) if taken is not None else None


def _check_aliases(prices: Prices, origin: str) -> None:
    for alias, target in prices.aliases.items():
        if target not in prices.entries:
            raise ConfigError(f"{origin}: _aliases.{alias}: {target!r} has no prices entry")


@cache
def shipped_prices() -> Prices:
    """The prices of ``judgeq/data/prices.json``."""
    text = resources.files("judgeq").joinpath("data/prices.json").read_text(encoding="utf-8")
    entries, aliases, taken = parse_prices(text, SHIPPED)
    prices = Prices(entries, aliases, taken or "unknown")
    _check_aliases(prices, SHIPPED)
    return prices


def load_prices(path: Path | str | None) -> Prices:
    """The shipped prices with the user's file ``path`` on top (None: the shipped ones alone).
    ConfigError, one line naming the file and what is wrong, for a file that cannot be read or
    is not a valid prices file."""
    base = shipped_prices()
    if path is None or str(path) == "":
        return base
    origin = f"prices file {path}"
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"{origin} (JUDGEQ_PRICES / --prices): cannot be read: {why}") from None
    entries, aliases, taken = parse_prices(text, origin)
    merged = Prices(
        {**base.entries, **entries},
        {**base.aliases, **aliases},
        f"{base.taken}, with {path}" + (f" of {taken}" if taken else ""),
    )
    _check_aliases(merged, origin)
    return merged


def unpriced_text(models: Iterable[str] | None) -> str:
    """Why a cost is unknown: ``no price for model 'x': add it to a prices file ...``."""
    names = " or ".join(repr(m) for m in models or ()) or "the judge model"
    return f"no price for {names}: {HOW_TO_PRICE}"


def no_price_message(model: str) -> str:
    """The one line refusing a cost limit for a judge model without a price."""
    return f"no price for model {model!r}: {HOW_TO_PRICE}, or leave out --max-cost"


__all__ = [
    "HOW_TO_PRICE",
    "Price",
    "Prices",
    "json_object",
    "load_prices",
    "no_price_message",
    "parse_prices",
    "shipped_prices",
    "unpriced_text",
]
