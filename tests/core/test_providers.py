"""The provider seam (issue 31, point 1): every provider is one object registered in one place,
what varies by provider is asked of it, and no code outside a provider's module compares
provider names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import judgeq
from judgeq.judges import JudgeSpec, build_judge, judge_name, parse_judge_spec, stored_judge
from judgeq.judges.providers import (
    REGISTRY,
    JudgeSetup,
    Provider,
    is_offline,
    lane_name,
    provider,
    registered,
)
from judgeq.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
HOMES = {"judgeq/judges/providers.py"} | {m.replace(".", "/") + ".py" for m in REGISTRY.values()}
"""The providers' modules: the only product code that may name a provider."""
NOT_PROVIDERS = {"producer/cli/importer.py": "its --from names message formats (openai), not judges"}


@pytest.mark.parametrize("name", registered())
def test_every_registered_provider_is_one_object_with_its_facts(name: str) -> None:
    api = provider(name)
    assert isinstance(api, Provider) and api.name == name
    assert provider(name) is api  # one object per provider
    assert api.serves_text and api.plural
    if not api.offline and not api.own_key_budget:
        assert api.key_variable, f"{name}: an API provider names its key's variable"
    if api.batch_api is not None:
        assert api.lane_name and lane_name(name) == api.lane_name
    assert REGISTRY[name].startswith("judgeq.judges.")


def test_an_unknown_provider_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(judgeq.ConfigError, match=r"unknown judge provider 'gemeni'.*anthropic"):
        provider("gemeni")
    with pytest.raises(judgeq.ConfigError, match="unknown judge 'gemeni:x'"):
        parse_judge_spec("gemeni:x")
    assert not is_offline("gemeni") and lane_name("gemeni") == Provider.lane_name
    assert str(JudgeSpec("gemeni", "x")) == "gemeni:x"  # a stored run of a provider this version lacks


@pytest.mark.parametrize("command", ["run", "submit", "rubrics calibrate"])
def test_the_judge_help_and_the_unknown_judge_error_name_every_provider(command: str) -> None:
    """Both come from the registry: a provider added there is offered without another edit."""
    with pytest.raises(judgeq.ConfigError) as refused:
        parse_judge_spec("gemeni:x")
    shown = subprocess.run(
        [sys.executable, "-m", "judgeq", *command.split(), "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    flat = " ".join(shown.split()).replace("- ", "-")  # click wraps at hyphens
    for name in registered():
        form = provider(name).form
        assert form.startswith(name)
        assert form in str(refused.value)
        assert form in flat, (name, command)


@pytest.mark.parametrize(
    ("text", "provider_name", "model", "shown"),
    [
        ("anthropic", "anthropic", "claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
        ("Anthropic:claude-haiku-4-5", "anthropic", "claude-haiku-4-5", "anthropic:claude-haiku-4-5"),
        ("openai:gpt-4.1-mini", "openai", "gpt-4.1-mini", "openai:gpt-4.1-mini"),
        ("openai-compatible:m@http://h:1/v1", "openai-compatible", "m@http://h:1/v1", None),
        ("python:mod:make", "python", "mod:make", None),
        ("plugin:my-judge", "plugin", "my-judge", None),
        ("lexical", "lexical", "lexical-overlap-v1", "lexical"),
    ],
)
def test_a_spec_is_parsed_once_into_one_typed_value_that_round_trips(
    text: str, provider_name: str, model: str, shown: str | None
) -> None:
    spec = parse_judge_spec(text)
    assert spec == JudgeSpec(provider_name, model) == (provider_name, model)  # it unpacks as a pair
    assert str(spec) == (shown or text) == judge_name(provider_name, model)
    assert stored_judge(str(spec)) == spec  # as a run's stored spec names it, read back
    assert spec.api is provider(provider_name)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("anthropic:claude x", "contains white space"),
        ("openai", "give the OpenAI model"),
        ("openai-compatible:m", "give the model and the server"),
        ("openai-compatible:m@http://user:pw@h/v1", "holds credentials"),
        ("python:nocolon", "package.module:Factory"),
        ("lexical:x", "takes no model"),
    ],
)
def test_a_bad_spec_is_refused_by_its_provider_in_one_line(text: str, why: str) -> None:
    with pytest.raises(judgeq.ConfigError) as err:
        parse_judge_spec(text)
    message = str(err.value)
    assert message.startswith(f"--judge: {text!r}: ") and why in message and "\n" not in message
    if "pw" in text:
        assert "pw" not in message.removeprefix(f"--judge: {text!r}: ")


def test_the_providers_facts_are_known_without_importing_any_sdk() -> None:
    """A provider's module names its SDK lazily: asking every provider what it is (a status
    line, routing, the report) imports no SDK; building its judge does."""
    code = (
        "import sys\n"
        "from judgeq.judges.providers import provider, registered\n"
        "facts = [(provider(p).serves_text, provider(p).key_variable) for p in registered()]\n"
        "print(sorted(m for m in ('anthropic', 'openai', 'google.genai') if m in sys.modules))\n"
        "from judgeq.judges import build_judge\n"
        "build_judge('openai', 'gpt-x')\n"
        "print(sorted(m for m in ('anthropic', 'openai') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split("\n")[:2] == ["[]", "['openai']"]


def test_a_judge_is_built_by_its_provider_with_this_machines_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    settings = load_settings()
    setup = JudgeSetup.of(settings)
    assert setup.api_key == "sk-test" and setup.modules == () and setup.urls == ()
    judge = build_judge("anthropic", "claude-x", api_key="sk-test")
    assert (judge.provider, judge.model) == ("anthropic", "claude-x")
    assert build_judge("lexical", "lexical-overlap-v1").provider == "lexical"
    with pytest.raises(judgeq.ConfigError, match="JUDGEQ_JUDGE_URLS=http://h:1/v1"):
        provider("openai-compatible").check_setup("m@http://h:1/v1", setup)
    with pytest.raises(judgeq.ConfigError, match="JUDGEQ_JUDGE_MODULES=mod"):
        provider("python").check_setup("mod:make", setup)
    provider("anthropic").check_setup("claude-x", setup)  # an SDK's judge builds anywhere


def test_credentials_and_budget_keys_are_each_providers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_COMPATIBLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "   ")
    settings = load_settings()
    assert not provider("anthropic").has_credentials(settings)  # blank: no key
    assert not provider("openai").has_credentials(settings)
    assert provider("lexical").has_credentials(settings) and provider("python").has_credentials(settings)
    assert not provider("openai-compatible").key_present(settings)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-c")
    assert provider("openai").has_credentials(settings)
    assert provider("openai-compatible").key_present(settings)
    secrets = {p: provider(p).budget_secret(settings) for p in ("openai", "openai-compatible")}
    assert secrets == {"openai": "sk-o@", "openai-compatible": "sk-c"}  # hashed in a budget name, not shown


def test_no_product_code_outside_a_providers_module_compares_provider_names() -> None:
    """The if/elif chains on provider strings are gone: a comparison with, or a mapping keyed
    by, a registered provider's name outside the providers' modules is refused."""
    found = []
    files = [*ROOT.joinpath("judgeq").rglob("*.py"), *ROOT.joinpath("producer").rglob("*.py")]
    files += ROOT.joinpath("workers").rglob("*.py")
    for path in sorted(files):
        rel = path.relative_to(ROOT).as_posix()
        if rel in HOMES or rel in NOT_PROVIDERS or rel.startswith("judgeq/testing/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named: list[ast.expr] = []
            if isinstance(node, ast.Compare):
                for side in (node.left, *node.comparators):
                    named += side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            elif isinstance(node, ast.Dict):
                named += [k for k in node.keys if k is not None]
            found += [
                f"{rel}:{k.lineno}: {k.value!r}"
                for k in named
                if isinstance(k, ast.Constant) and k.value in REGISTRY
            ]
    assert found == []
