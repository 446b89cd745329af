"""Redis Sentinel for the store and the broker (``sentinel://`` URLs), against a real master,
replica and three Sentinels on loopback: a run goes through them, and through a failover."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from judgeq.errors import ConfigError
from judgeq.redis_connect import connect, parse_sentinel_url
from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import (
    SentinelGroup,
    Worker,
    judgeq_cli,
    response_rows,
    wait_for,
    worker_env,
    write_batch,
)
from .test_faults import FAST, finish, start_submit, verdict_ids

pytestmark = pytest.mark.integration


@pytest.fixture
def sentinels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    group = SentinelGroup(tmp_path_factory.mktemp("sentinel"))
    group.start()
    yield group
    group.stop()


@pytest.fixture
def env(sentinels: SentinelGroup, fake_api: FakeMessagesAPI) -> dict[str, str]:
    return worker_env(sentinels.url, fake_api.base_url)  # the store, and the broker with it


def master(sentinels: SentinelGroup) -> redis.Redis:
    return redis.Redis(port=sentinels.master_port(), decode_responses=True)


def done(client: redis.Redis) -> int:
    keys = list(client.scan_iter("judgeq:run:*:counters"))
    return int(float(client.hget(keys[0], "done") or 0)) if keys else 0


def test_a_sentinel_url_is_parsed_and_refused_with_a_reason() -> None:
    url = parse_sentinel_url("sentinel://:pw@h1:26379;sentinel://h2:26380/3?master_name=m")
    assert url.sentinels == (("h1", 26379), ("h2", 26380)) and url.db == 3 and url.master_name == "m"
    assert url.password == "pw" and url.kombu_url == "sentinel://:pw@h1:26379/3;sentinel://:pw@h2:26380/3"
    with pytest.raises(ConfigError, match="master_name"):
        parse_sentinel_url("sentinel://h1:26379")
    with pytest.raises(ConfigError, match="sentinel://HOST:PORT"):
        parse_sentinel_url("sentinel://h1:26379;redis://h2:6379?master_name=m")


def test_a_run_through_sentinels_survives_losing_the_master(
    tmp_path: Path,
    env: dict[str, str],
    sentinels: SentinelGroup,
    fake_api: FakeMessagesAPI,
    start_worker: Callable[..., Worker],
) -> None:
    client = connect(sentinels.url)
    assert client.ping() and client.connection_pool.connection_kwargs.get("db") == 0
    fake_api.latency = 0.05
    env = {**env, **FAST, "JUDGEQ_JUDGE_TIMEOUT": "15", "JUDGEQ_JUDGE_DEADLINE": "60"}
    start_worker("w1", env=env)
    start_worker("w2", env=env)
    n = 200
    batch = write_batch(tmp_path / "b.jsonl", response_rows(n))
    proc = start_submit(batch, env, tmp_path / "out")
    wait_for(lambda: done(master(sentinels)) >= 40, 120, "progress")
    before = sentinels.master_port()
    sentinels.lose_master()
    assert sentinels.master_port() in (sentinels.master.port, sentinels.replica.port)
    assert sentinels.master_port() != before
    run_id, report = finish(proc, tmp_path / "out", timeout=300)
    ids = verdict_ids(tmp_path / "out", run_id)
    assert len(ids) == len(set(ids)) == n, "every job once"
    assert report["counts"]["graded"] == n and report["counts"]["total"] == n
    status = judgeq_cli("status", run_id, env=env)
    assert status.returncode == 0 and "finished" in status.stdout
    assert json.loads((tmp_path / "out" / run_id / "report.json").read_text())["run_id"] == run_id
