"""Custom judges: a judge of your own, with judgeq's retries, rate limit, reply cache, councils
and reports (``--judge python:package.module:Factory`` or ``--judge plugin:NAME``).

``Factory`` is a callable that takes no argument and returns a :class:`~judgeq.Judge`: an
object with ``provider`` and ``model`` attributes and ``complete(request, *, timeout)``
returning a :class:`~judgeq.JudgeReply` (raising :class:`~judgeq.JudgeError` subclasses for
failures, so each becomes the right null reason); an optional ``check(*, timeout)`` is the
preflight. A package may register factories under the entry point group ``judgeq.judges``
(``plugin:NAME``): installed on a machine, they are trusted there.

A ``python:`` judge's module must be named in ``JUDGEQ_JUDGE_MODULES`` on every machine that
loads it (workers, and the producer that checks it): a run's spec lives in Redis, and a worker
must never import and call code because a spec names it.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from judgeq.errors import ConfigError, JudgeError
from judgeq.judges.base import Adopted, Judge, cache_identity
from judgeq.judges.providers import JudgeSetup, Provider

if TYPE_CHECKING:
    from judgeq.settings import Settings

__all__ = [
    "GROUP",
    "PROVIDERS",
    "CustomJudge",
    "PluginProvider",
    "PythonProvider",
    "check_target",
    "load_custom_judge",
]

GROUP = "judgeq.judges"
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def check_target(provider: str, target: str) -> None:
    """Raise ValueError unless ``target`` is ``package.module:Factory`` (python) or a NAME (plugin)."""
    if provider == "python" and not _TARGET.match(target):
        raise ValueError("give the factory as package.module:Factory (e.g. python:my_judges:make)")
    if provider == "plugin" and not re.match(r"^[\w.-]+$", target):
        raise ValueError("give the name of a judge registered under the entry point group judgeq.judges")


def _factory(provider: str, target: str, modules: Sequence[str]) -> Callable[[], Any]:
    if provider == "plugin":
        found = [ep for ep in entry_points(group=GROUP) if ep.name == target]
        if not found:
            names = sorted(ep.name for ep in entry_points(group=GROUP))
            raise ConfigError(
                f"judge plugin:{target}: no judge of that name is installed "
                f"(installed: {', '.join(names) or 'none'})"
            )
        loaded: Callable[[], Any] = found[0].load()
        return loaded
    module_name, _, attr = target.partition(":")
    if module_name not in modules:
        raise ConfigError(
            f"judge python:{target}: set JUDGEQ_JUDGE_MODULES={module_name} on every machine that runs "
            "this judge (judge code is loaded only from the modules named there)"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"judge python:{target}: cannot import {module_name}: {exc}") from None
    factory: Callable[[], Any] | None = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"judge python:{target}: {module_name} has no callable {attr!r}")
    return factory


class CustomJudge(Adopted):
    """A custom judge as judgeq uses it: its ``provider`` and ``model`` are the spec's (so a
    run's results, budget and reply cache name it consistently); what else it offers (a
    ``check``, an endpoint) is the judge's own (:class:`~judgeq.judges.base.Adopted`)."""

    def __init__(self, provider: str, target: str, inner: Judge) -> None:
        super().__init__(inner, provider, target)

    @property
    def has_credentials(self) -> bool:
        """A custom judge brings its own credentials (checked by its ``check``, if any)."""
        return True

    @property
    def cache_identity(self) -> str:
        """With the inner judge's own identity: its server too when it names one (a wrapped SDK
        judge)."""
        return f"{self.provider}:{self.model}:{cache_identity(self.inner)}"


def load_custom_judge(provider: str, target: str, modules: Sequence[str] = ()) -> CustomJudge:
    """The judge ``python:TARGET`` or ``plugin:NAME`` names; ConfigError (one line) when it
    cannot be loaded or is not a judge."""
    factory = _factory(provider, target, modules)
    try:
        judge = factory()
    except (JudgeError, ConfigError):
        raise
    except Exception as exc:
        raise ConfigError(
            f"judge {provider}:{target}: its factory failed: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(judge, Judge):
        raise ConfigError(
            f"judge {provider}:{target}: the factory returned {type(judge).__name__}, not a judge "
            "(it needs provider, model and complete(request, *, timeout))"
        )
    return CustomJudge(provider, target, judge)


class _CustomProvider(Provider):
    """Custom judges: code brings its own credentials (checked by its ``check``, if any), and
    its workers name its budget with whatever key they hold."""

    own_key_budget = True

    def parse_model(self, model: str) -> str:
        check_target(self.name, model.strip())
        return model.strip()

    def build(self, model: str, setup: JudgeSetup) -> CustomJudge:
        return load_custom_judge(self.name, model, setup.modules)

    def check_setup(self, model: str, setup: JudgeSetup) -> None:
        self.build(model, setup)  # allowed here, and loads


class PythonProvider(_CustomProvider):
    """``python:package.module:Factory``, loaded only from the modules of ``JUDGEQ_JUDGE_MODULES``."""

    name = "python"
    spec_form = "python:MODULE:FACTORY"
    serves_text = "the custom judges of JUDGEQ_JUDGE_MODULES"
    serve_needs = "JUDGEQ_JUDGE_MODULES naming the judge's module"
    plural = "python judges"

    def can_serve(self, settings: Settings, model: str) -> bool:
        module = model.partition(":")[0]
        if module not in settings.judge_module_list():
            return False
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False

    def serves_any(self, settings: Settings) -> bool:
        return bool(settings.judge_module_list())


class PluginProvider(_CustomProvider):
    """``plugin:NAME``: a judge installed under the entry point group :data:`GROUP`."""

    name = "plugin"
    spec_form = "plugin:NAME"
    serves_text = "plugin judges"
    serve_needs = "the judge's plugin installed"
    plural = "plugin judges"

    def can_serve(self, settings: Settings, model: str) -> bool:
        return any(ep.name == model for ep in entry_points(group=GROUP))

    def serves_any(self, settings: Settings) -> bool:
        return bool(entry_points(group=GROUP))


PROVIDERS = (PythonProvider(), PluginProvider())
