"""Fixtures for integration tests: real redis-server, real worker processes, a fake judge API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import API_KEY, RabbitServer, RedisServer, Worker, worker_env


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def rabbit_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitServer]:
    """A private RabbitMQ node (started once, on first use: it takes a few seconds)."""
    server = RabbitServer(tmp_path_factory.mktemp("rabbitmq"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    if redis_server.proc is None:
        redis_server.start()
    redis_server.client().flushall()
    return redis_server.url


SETTABLE = (
    "api_key",
    "refused_key",
    "models",
    "timeout_sleep",
    "seed",
    "limit_headers",
    "limit_model",
    "batch_latency",
)
"""The fake's settings a test may change and ``reset()`` leaves alone."""


@pytest.fixture(scope="session")
def fake_api_server() -> Iterator[tuple[FakeMessagesAPI, dict[str, object]]]:
    with FakeMessagesAPI(api_key=API_KEY, timeout_sleep=3.0) as fake:
        yield fake, {name: getattr(fake, name) for name in SETTABLE}


@pytest.fixture
def fake_api(fake_api_server: tuple[FakeMessagesAPI, dict[str, object]]) -> FakeMessagesAPI:
    """The session's fake, as it started: no requests, counters, latency or rate limits, and the
    settings of the session start (whatever an earlier test changed)."""
    fake, settings = fake_api_server
    fake.reset()  # counters, recorded requests, attempt counts, rate limits, batches
    fake.latency = 0.0
    for name, value in settings.items():
        setattr(fake, name, value)
    return fake


@pytest.fixture
def env(redis_url: str, fake_api: FakeMessagesAPI) -> dict[str, str]:
    return worker_env(redis_url, fake_api.base_url)


@pytest.fixture
def start_worker(env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(name: str = "w1", **kwargs: object) -> Worker:
        extra_env = kwargs.pop("env", None) or {}
        w = Worker({**env, **extra_env}, tmp_path, name, **kwargs).start()  # type: ignore[arg-type]
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()
