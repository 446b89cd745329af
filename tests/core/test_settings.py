"""One settings object: every JUDGEQ_ variable is a field with its default there, misspelt
variables are reported with the closest name, weights and debug are fields."""

from __future__ import annotations

import pytest

from judgeq import ConfigError
from judgeq.settings import Settings, known_variables, load_settings, unknown_variables


def test_weights_and_debug_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGEQ_WEIGHT_ACCURACY", "0.4")
    monkeypatch.setenv("JUDGEQ_WEIGHT_clarity", "0.15")
    monkeypatch.setenv("JUDGEQ_DEBUG", "1")
    s = load_settings()
    assert s.weights == {"accuracy": 0.4, "clarity": 0.15}
    assert s.debug is True
    assert load_settings(weights={"x": 1.0}).weights == {"x": 1.0}  # a flag wins


def test_a_bad_weight_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGEQ_WEIGHT_ACCURACY", "lots")
    with pytest.raises(ConfigError, match="JUDGEQ_WEIGHT_ACCURACY: weight of 'accuracy' is not a number"):
        load_settings()


def test_defaults_live_in_the_settings_object() -> None:
    s = load_settings()
    assert s == Settings(weights={})
    assert s.systemic_failures == 20 and s.judge_deadline == 120.0 and s.debug is False


def test_the_cores_own_defaults_are_the_settings_defaults() -> None:
    # RunSpec, RetryPolicy, the stores, caches and the aggregator are usable without settings;
    # their defaults are read from the settings object, never written twice
    import fakeredis

    from judgeq.grading.request import DEFAULT_MAX_TOKENS
    from judgeq.jobs.reader import JobsFileLimits
    from judgeq.judges.base import RetryPolicy
    from judgeq.report.aggregate import Aggregator
    from judgeq.runspec import RunSpec
    from judgeq.store.redis import RedisStore
    from judgeq.store.reply_cache import MemoryCache

    s = load_settings()
    spec = RunSpec(run_id="r", rubric_text="", rubric_source="x", judge_provider="p", judge_model="m")
    assert (spec.judge_timeout, spec.judge_deadline, spec.max_tokens) == (
        s.judge_timeout,
        s.judge_deadline,
        s.judge_max_tokens,
    )
    assert spec.thresholds == [float(x) for x in s.thresholds.split(",")]
    assert (RetryPolicy().timeout, RetryPolicy().deadline) == (s.judge_timeout, s.judge_deadline)
    assert s.judge_max_tokens == DEFAULT_MAX_TOKENS
    assert MemoryCache().ttl_s == s.cache_ttl
    assert RedisStore(fakeredis.FakeRedis()).retention_s == s.retention_days * 86400
    assert JobsFileLimits() == JobsFileLimits(s.max_line_bytes, s.max_field_chars)
    assert Aggregator().run.thresholds == tuple(float(x) for x in s.thresholds.split(","))


@pytest.mark.parametrize(
    ("typo", "closest"),
    [
        ("JUDGEQ_JUDGE_DEADLNE", "JUDGEQ_JUDGE_DEADLINE"),
        ("JUDGEQ_REDIS_ULR", "JUDGEQ_REDIS_URL"),
        ("JUDGEQ_CONCURENCY", "JUDGEQ_CONCURRENCY"),
        ("JUDGEQ_WIEGHT_ACCURACY", "JUDGEQ_WEIGHT_<DIMENSION>"),
    ],
)
def test_a_misspelt_variable_is_reported_with_the_closest_name(typo: str, closest: str) -> None:
    (line,) = unknown_variables({typo: "1", "JUDGEQ_REDIS_URL": "redis://x", "JUDGEQ_WEIGHT_A": "1"})
    assert typo in line and f"did you mean {closest}?" in line


def test_known_variables_are_not_reported() -> None:
    environ = {name: "1" for name in known_variables()}
    environ.update(JUDGEQ_WEIGHT_ACCURACY="0.5", HOME="/root", ANTHROPIC_API_KEY="k")
    assert unknown_variables(environ) == []


def test_empty_key_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "  ")
    assert load_settings().anthropic_api_key is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://:p@ss/word@127.0.0.1:6379/0", "percent-encoded"),
        ("redis://u:12/34@host/0", "percent-encoded"),  # the authority 'u:12' would parse
        ("redis://:pa?ss@host/0", "percent-encoded"),
        ("redis://u:pa#ss@host", "percent-encoded"),
        ("redis://127.0.0.1:1/abc", "the database 'abc' is not a number"),
        ("redis://127.0.0.1:1/1/2", "the database '1/2' is not a number"),
        ("rediss://h/1?db=x", "the database 'x' is not a number"),
        # old: an '@' in the query was taken for the end of a password holding '/'
        ("redis://localhost:6379/0?client_name=ops@eu", None),
        ("redis://host?client_name=a@b", None),
        ("redis://:p@ss@host:1/0", None),  # an '@' inside the password: the last one ends it
        ("redis://:hunter2@127.0.0.1:1/0", None),
    ],
)
def test_redis_urls_redis_py_would_misread_are_refused(url: str, problem: str | None) -> None:
    from judgeq.redis_connect import check_redis_url

    if problem is None:
        check_redis_url(url)
        return
    with pytest.raises(ConfigError, match=problem) as err:
        check_redis_url(url)
    assert "ss/word" not in str(err.value) and "34@" not in str(err.value) and "pa?ss" not in str(err.value)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://user:pw@host:6379/0", "redis://user:***@host:6379/0"),
        ("redis://:pw@host:6379/0?client_name=a@eu", "redis://:***@host:6379/0?client_name=a@eu"),
        ("rediss://:pw@eu.example:6380/1?client_name=x@y", "rediss://:***@eu.example:6380/1?client_name=x@y"),
        ("redis://:p/w@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://:p?w@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://:p@w@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://:p?w@host:6379/0?client_name=a@eu", "redis://:***@host:6379/0?client_name=a@eu"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("redis://:pa@ss#word@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("redis://:pa@ss?word@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("redis://:pa@ss/0?word@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("redis://:pw@[::1]:6379/0?client_name=a@eu", "redis://:***@[::1]:6379/0?client_name=a@eu"),
        ("not a url", "not a url"),
    ],
)
def test_mask_url_hides_the_password_and_keeps_host_and_port(url: str, masked: str) -> None:
    from judgeq.redis_connect import mask_url

    assert mask_url(url) == masked
