"""Issue 28.6, one budget per real limit: a model's aliases and dated ids, and the models of one
rate-limit class, share one budget (the table ``judgeq/data/shared_limits.json``, each entry
with its source); the user joins names that share a limit behind a gateway with
``JUDGEQ_BUDGET_GROUPS``; two keys never share a budget, and no key is ever in a name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgeq import ConfigError
from judgeq.judges import budget_factory, budget_groups, budget_name, budget_owner
from judgeq.judges.prices import shipped_prices
from judgeq.judges.shared_limits import canonical_model, parse_shared_limits, shipped_shared_limits
from judgeq.ratelimit import MemoryBudget
from judgeq.settings import Settings, known_variables, load_settings

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "judgeq" / "data" / "shared_limits.json"
GATEWAY = "http://gw:4000/v1"


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_COMPATIBLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def settings(key: str = "sk-ant-SECRET-1", groups: str = "") -> Settings:
    return load_settings(anthropic_api_key=key, budget_groups=groups)


# ---------------------------------------------------------------- one model, one class


@pytest.mark.parametrize(
    ("provider", "alias", "dated"),
    [
        ("anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
        ("anthropic", "claude-opus-4-5", "claude-opus-4-5-20251101"),
        ("anthropic", "claude-haiku-4-5", "claude-haiku-4-5-20251001"),
        ("anthropic", "claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219"),
        ("openai", "gpt-4o", "gpt-4o-2024-08-06"),
        ("openai", "gpt-4.1", "gpt-4.1-2025-04-14"),
        ("openai", "gpt-5.5", "gpt-5.5-2026-04-23"),
    ],
)
def test_an_alias_and_its_dated_id_share_one_budget(provider: str, alias: str, dated: str) -> None:
    s = settings()
    assert budget_name(s, provider, alias) == budget_name(s, provider, dated)


def test_the_default_judge_and_its_snapshot_share_one_budget() -> None:
    """The measured case: ``anthropic`` (default model) and the dated id on one key."""
    from judgeq.judges import parse_judge_spec

    s = settings()
    default = parse_judge_spec("anthropic")
    assert budget_name(s, default.provider, default.model) == budget_name(
        s, "anthropic", "claude-sonnet-4-5-20250929"
    )


def test_a_rate_limit_class_is_one_budget_named_after_it() -> None:
    """Anthropic's "Sonnet 4.x" and "Opus 4.x" rows: one total across their models."""
    s = settings()
    sonnets = {budget_name(s, "anthropic", m) for m in ("claude-sonnet-4-5-20250929", "claude-sonnet-4-6")}
    opuses = {budget_name(s, "anthropic", f"claude-opus-4-{v}") for v in ("5", "6", "7", "8")}
    assert len(sonnets) == len(opuses) == 1
    assert sonnets.pop().startswith("anthropic:claude-sonnet-4.x:")
    assert opuses.pop().startswith("anthropic:claude-opus-4.x:")
    assert budget_owner(s, "anthropic", "claude-opus-4-5-20251101") == ("anthropic", "claude-opus-4.x")
    # a class's own name names the same budget (``judgeq budget anthropic:claude-sonnet-4.x``)
    assert canonical_model("anthropic", "claude-sonnet-4.x") == "claude-sonnet-4.x"


@pytest.mark.parametrize(
    ("provider", "one", "other"),
    [
        ("anthropic", "claude-sonnet-4-5", "claude-haiku-4-5"),
        ("anthropic", "claude-sonnet-4-6", "claude-opus-4-6"),
        ("anthropic", "claude-sonnet-4-5", "claude-sonnet-5"),  # "not part of this combined bucket"
        ("openai", "gpt-4o", "gpt-4o-mini"),
        ("openai", "gpt-4o", "gpt-4o-2024-11-20"),  # its price is gpt-4o's, its model is not
        ("openai", "gpt-4o", "gpt-4o-2024-05-13"),
        ("openai-compatible", f"qwen@{GATEWAY}", f"llama@{GATEWAY}"),
    ],
)
def test_different_models_get_different_budgets(provider: str, one: str, other: str) -> None:
    s = settings()
    assert budget_name(s, provider, one) != budget_name(s, provider, other)


def test_a_model_without_an_entry_keeps_its_name_as_before() -> None:
    s = settings()
    assert budget_owner(s, "anthropic", "claude-test") == ("anthropic", "claude-test")
    assert budget_owner(s, "openai-compatible", f"claude-sonnet-4-5@{GATEWAY}") == (
        "openai-compatible",
        f"claude-sonnet-4-5@{GATEWAY}",
    )
    assert budget_owner(s, "python", "pkg.mod:Factory") == ("python", "pkg.mod:Factory")


# ---------------------------------------------------------------- keys


def test_different_keys_get_different_budgets_and_no_key_is_in_a_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one, two = settings("sk-ant-SECRET-1"), settings("sk-ant-SECRET-2")
    for model in ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"):
        assert budget_name(one, "anthropic", model) != budget_name(two, "anthropic", model)
        assert "SECRET" not in budget_name(one, "anthropic", model)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-SECRET-A")
    a = budget_name(one, "openai", "gpt-4o")
    assert a == budget_name(one, "openai", "gpt-4o-2024-08-06") and "SECRET" not in a
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-SECRET-B")
    assert budget_name(one, "openai", "gpt-4o") != a
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-SECRET-A")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://example.test/v1")  # another server: another budget
    assert budget_name(one, "openai", "gpt-4o") != a


# ---------------------------------------------------------------- groups


def test_a_group_joins_the_names_it_lists_under_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    groups = f"gw=openai-compatible:claude@{GATEWAY},openai-compatible:sonnet@{GATEWAY}"
    s = settings(groups=groups)
    claude = budget_name(s, "openai-compatible", f"claude@{GATEWAY}")
    assert claude == budget_name(s, "openai-compatible", f"sonnet@{GATEWAY}")
    assert claude.startswith("group:gw:")
    assert budget_name(s, "openai-compatible", f"llama@{GATEWAY}").startswith("openai-compatible:llama@")
    # still hashed with the provider's key: another key, another budget; the key never shown
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-gw-SECRET")
    keyed = budget_name(s, "openai-compatible", f"claude@{GATEWAY}")
    assert keyed != claude and keyed.startswith("group:gw:") and "SECRET" not in keyed


def test_a_group_naming_a_model_takes_its_aliases_and_its_class() -> None:
    s = settings(groups=" proxy = anthropic:claude-sonnet-4-5 , openai-compatible:x@http://p:1/v1 ;")
    names = {
        budget_name(s, "anthropic", m)
        for m in ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "claude-sonnet-4-6")
    }
    assert len(names) == 1 and names.pop().startswith("group:proxy:")
    assert budget_groups(s)[("anthropic", "claude-sonnet-4.x")] == "proxy"


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGEQ_BUDGET_GROUPS", f"gw=openai-compatible:a@{GATEWAY}")
    assert "JUDGEQ_BUDGET_GROUPS" in known_variables()
    s = load_settings()
    assert s.budget_group_map() == {"gw": (f"openai-compatible:a@{GATEWAY}",)}
    assert budget_owner(s, "openai-compatible", f"a@{GATEWAY}") == ("group", "gw")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("gw", "'gw' has no '='"),
        ("my group=anthropic", "group name 'my group'"),
        ("a:b=anthropic", "group name 'a:b'"),
        ("gw=", "group 'gw' names no judge"),
        ("gw=anthropic;gw=openai:gpt-4o", "group 'gw' is given twice"),
        ("a=anthropic;b=anthropic", "judge 'anthropic' is in two groups, 'a' and 'b'"),
    ],
)
def test_a_malformed_group_setting_is_a_clear_config_error(value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=r"^JUDGEQ_BUDGET_GROUPS: ") as caught:
        load_settings(budget_groups=value)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("a=lexical", "group 'a': the lexical judge has no rate limit"),
        ("a=foo:bar", "group 'a': unknown judge 'foo:bar'"),
        ("a=openai-compatible:nourl", "group 'a': 'openai-compatible:nourl': give the model and the server"),
        (
            "a=anthropic:claude-sonnet-4-5;b=anthropic:claude-sonnet-4-6",
            "share one rate limit already (anthropic:claude-sonnet-4.x): put them in one group",
        ),
    ],
)
def test_a_group_of_judges_no_run_could_use_is_refused_before_any_call(value: str, says: str) -> None:
    s = settings(groups=value)  # well formed: the judges are checked where they are read
    with pytest.raises(ConfigError, match=r"^JUDGEQ_BUDGET_GROUPS: ") as caught:
        budget_factory(s, MemoryBudget)  # a worker or `judgeq run` refuses it as it starts
    assert says in str(caught.value)


def test_the_producer_and_the_workers_make_one_budget_for_an_alias_and_its_snapshot() -> None:
    made: list[str] = []

    def make(name: str) -> MemoryBudget:
        made.append(name)
        return MemoryBudget(name)

    factory = budget_factory(settings(), make)
    factory("anthropic", "claude-sonnet-4-5")
    factory("anthropic", "claude-sonnet-4-5-20250929")
    assert factory("lexical", "lexical-overlap-v1") is None
    assert len(made) == 2 and made[0] == made[1]


# ---------------------------------------------------------------- the table


def test_the_table_names_a_source_for_every_entry() -> None:
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    assert data["_taken"] and data["_comment"]
    providers = {k: v for k, v in data.items() if not k.startswith("_")}
    assert set(providers) == {"anthropic", "openai"}
    for provider, entry in providers.items():
        assert entry["_source"].strip(), provider
        for name, shared in entry.get("shared", {}).items():
            assert shared["source"].strip() and len(shared["models"]) >= 2, f"{provider}.{name}"
        for alias, why in entry.get("not_same_model", {}).items():
            assert why.strip(), f"{provider}.not_same_model.{alias}"
        if entry.get("prices_aliases"):  # the aliases taken have prices.json's source
            prices = json.loads((ROOT / "judgeq" / "data" / "prices.json").read_text(encoding="utf-8"))
            assert prices["_source"].strip() and prices["_aliases"]


def test_the_aliases_are_written_once_in_the_prices_file() -> None:
    """Every alias of prices.json is an alias for the budgets too, but for those the table says
    are models of their own; the classes list models by the ids the aliases leave."""
    tables = shipped_shared_limits()
    aliases = shipped_prices().aliases
    assert dict(tables["anthropic"].aliases) == dict(aliases)
    assert dict(tables["openai"].aliases) == {a: t for a, t in aliases.items() if a != "gpt-4o-2024-11-20"}
    for table in tables.values():
        assert not set(table.classes) & set(table.aliases)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"prices_aliases": True}, "anthropic._source: Field required"),
        (
            {
                "_source": "s",
                "prices_aliases": True,
                "shared": {"c": {"models": ["m-alias", "n"], "source": "s"}},
            },
            "'m-alias' is an alias of 'm': give that id",
        ),
        (
            {
                "_source": "s",
                "shared": {
                    "c": {"models": ["a", "b"], "source": "s"},
                    "d": {"models": ["b", "e"], "source": "s"},
                },
            },
            "'b' is also in 'c'",
        ),
        (
            {"_source": "s", "shared": {"c": {"models": ["a", "b"]}}},
            "anthropic.shared.c.source: Field required",
        ),
        ({"_source": "s", "not_same_model": {"x": "why"}}, "not_same_model.x: not an alias of prices.json"),
    ],
)
def test_a_bad_table_is_refused_naming_the_entry(entry: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=r"^table: ") as caught:
        parse_shared_limits(json.dumps({"anthropic": entry}), "table", {"m-alias": "m"})
    assert says in str(caught.value)


@pytest.mark.parametrize(
    "groups",
    [
        "gw=openai-compatible:m@http://user:S3cretPW@gw:4000/v1",
        "a=openai-compatible:m@http://u:S3cretPW@gw/v1;a=openai-compatible:n@http://u:S3cretPW@gw/v1",
        "gw openai-compatible:m@http://user:S3cretPW@gw:4000/v1",
    ],
)
def test_a_bad_group_setting_never_echoes_a_secret(groups: str) -> None:
    from judgeq.judges import budget_groups
    from judgeq.settings import Settings

    with pytest.raises((ConfigError, ValueError)) as caught:
        budget_groups(Settings.model_construct(budget_groups=groups))
    assert "S3cretPW" not in str(caught.value)
