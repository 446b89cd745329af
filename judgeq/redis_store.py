"""The Redis implementation of :class:`judgeq.Store`, and :func:`connect`.

It lives outside the pure core (it imports redis) and outside the worker package, so the
producer, the workers and the tests import it without building a Celery app.

Keys of a run (all expire after the retention period; the ``{run_id}`` hash tag keeps them
on one slot of a cluster):

====================================  ======  ==================================================
``judgeq:run:{ID}:spec``              string  the RunSpec JSON (rubric text, judge, settings)
``judgeq:run:{ID}:jobs``              hash    index -> job JSON; deleted as each job is stored
``judgeq:run:{ID}:results``           hash    index -> Result JSON, written once (HSETNX)
``judgeq:run:{ID}:counters``          hash    done, graded, passed, null:<reason>, … (live)
``judgeq:run:{ID}:state``             hash    state, enqueued, started_at, finished_at, …
``judgeq:run:{ID}:reducer``           string  set once by the worker that enqueues the reducer
``judgeq:run:{ID}:report``            string  the report JSON
``judgeq:runs``                       zset    run ids by creation time (for listings)
====================================  ======  ==================================================

Storing a result is one Lua script: write the result if absent, delete the payload, bump the
counters and return the done-count, atomically; a redelivered job therefore never counts
twice, and exactly one worker sees the count reach the total.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

from judgeq._cache import decode_reply, encode_reply
from judgeq._errors import ConfigError, StoreError
from judgeq._judge import JudgeReply
from judgeq._result import Result
from judgeq._run import RunSpec
from judgeq._settings import mask_url
from judgeq._store import live_increments

_STORE_RESULT = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return -1 end
redis.call('HDEL', KEYS[2], ARGV[1])
for i = 5, #ARGV, 2 do redis.call('HINCRBYFLOAT', KEYS[3], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[3], 'last_done_at', ARGV[4])
redis.call('HDEL', KEYS[5], 'systemic_streak')
local done = redis.call('HINCRBY', KEYS[3], 'done', 1)
-- the run's cost limit: the write that reaches it pauses the run (no new judge calls)
local limit = tonumber(redis.call('HGET', KEYS[5], 'max_cost_usd') or '')
if limit and limit > 0 then
  local spent = tonumber(redis.call('HGET', KEYS[3], 'cost_usd') or '0')
  if spent >= limit and redis.call('HGET', KEYS[5], 'state') == 'running' then
    redis.call('HSET', KEYS[5], 'state', 'paused', 'pause_reason', string.format(
      'max_cost: $%.4f spent of the $%.4f allowed (raise it with: judgeq resume RUN --max-cost USD)',
      spent, limit))
  end
end
local ttl = tonumber(ARGV[3])
-- a run that grades for longer than half the retention keeps all its keys alive
if ttl > 0 and redis.call('TTL', KEYS[1]) < ttl / 2 then
  for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ttl) end
end
return done
"""

_TRANSITION = """
if redis.call('HGET', KEYS[1], 'state') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'pause_reason', ARGV[3], 'systemic_streak', 0)
return 1
"""
"""Pause (running -> paused) or resume (paused -> running) atomically, with the reason."""

CHUNK = 1000


def _k(run_id: str, what: str) -> str:
    return f"judgeq:run:{{{run_id}}}:{what}"


RECONNECT_RETRIES = 40
"""Retries of a command after a connection error, with exponential backoff capped at 2 s:
about a minute, so clients ride out a Redis restart."""


def connect(url: str) -> redis.Redis:
    """A client checked with one PING (a clear error at once if Redis is down), which then
    retries commands across connection errors for about a minute (a Redis restart)."""
    try:
        client = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=5,
            socket_timeout=30,
            health_check_interval=30,
            retry=Retry(NoBackoff(), 0),
        )
        client.ping()
        client.set_retry(Retry(ExponentialBackoff(cap=2.0, base=0.1), RECONNECT_RETRIES))
    except redis.AuthenticationError:  # a ConnectionError subclass: test it first
        raise StoreError(f"Redis at {mask_url(url)} refused the password") from None
    except redis.ResponseError as exc:  # e.g. "DB index is out of range"
        raise ConfigError(f"Redis URL {mask_url(url)}: {_scrub(str(exc), url)}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise StoreError(f"cannot reach Redis at {mask_url(url)}: {_scrub(str(exc), url)}") from None
    except ValueError:
        raise ConfigError(f"invalid Redis URL {mask_url(url)} (e.g. redis://:PASSWORD@host:6379/0)") from None
    return client


def _scrub(text: str, url: str) -> str:
    """``text`` without the URL's password (error messages never show it)."""
    userinfo = url.partition("://")[2].rpartition("@")[0]
    password = userinfo.split(":", 1)[1] if ":" in userinfo else ""
    return text.replace(password, "***") if password else text


class RedisCache:
    """The judge-reply cache in Redis (:mod:`judgeq._cache`): ``judgeq:cache:<key>`` strings
    with a TTL, shared by every worker."""

    def __init__(self, client: redis.Redis, ttl_s: float) -> None:
        self.r, self.ttl_s = client, max(1, int(ttl_s))

    def get(self, key: str) -> JudgeReply | None:
        return decode_reply(self.r.get(f"judgeq:cache:{key}"))

    def put(self, key: str, reply: JudgeReply) -> None:
        self.r.set(f"judgeq:cache:{key}", encode_reply(reply), ex=self.ttl_s)


class RedisStore:
    """:class:`judgeq.Store` on Redis."""

    def __init__(self, client: redis.Redis, *, retention_s: int = 7 * 86400) -> None:
        self.r = client
        self.retention_s = int(retention_s)
        self._store = client.register_script(_STORE_RESULT)
        self._transition = client.register_script(_TRANSITION)

    # -- runs ----------------------------------------------------------------------
    def register(self, spec: RunSpec) -> None:
        p = self.r.pipeline()
        p.set(_k(spec.run_id, "spec"), spec.model_dump_json(), ex=self.retention_s)
        p.zadd("judgeq:runs", {spec.run_id: _epoch(spec.created_at)})
        p.zremrangebyscore("judgeq:runs", "-inf", _epoch(spec.created_at) - self.retention_s)
        p.execute()

    def spec(self, run_id: str) -> RunSpec | None:
        raw = self.r.get(_k(run_id, "spec"))
        return RunSpec.model_validate_json(raw) if raw else None

    def runs(self, limit: int = 20) -> list[str]:
        return list(self.r.zrevrange("judgeq:runs", 0, limit - 1))

    # -- jobs ----------------------------------------------------------------------
    def put_jobs(self, run_id: str, jobs: Iterable[tuple[int, str]]) -> None:
        mapping = dict(jobs)
        if mapping:
            p = self.r.pipeline(transaction=False)
            p.hset(_k(run_id, "jobs"), mapping=mapping)
            p.expire(_k(run_id, "jobs"), self.retention_s)
            p.execute()

    def job(self, run_id: str, index: int) -> str | None:
        return self.r.hget(_k(run_id, "jobs"), str(index))

    def missing(self, run_id: str, indices: list[int]) -> list[int]:
        if not indices:
            return []
        have = self.r.hmget(_k(run_id, "results"), [str(i) for i in indices])
        return [i for i, v in zip(indices, have, strict=True) if v is None]

    # -- results -------------------------------------------------------------------
    def has_result(self, run_id: str, index: int) -> bool:
        return bool(self.r.hexists(_k(run_id, "results"), str(index)))

    def store_result(self, run_id: str, result: Result) -> int | None:
        args: list[Any] = [str(result.index), result.model_dump_json(), self.retention_s, repr(time.time())]
        for key, inc in live_increments(result).items():
            args += [key, repr(float(inc))]
        done = self._store(
            keys=[_k(run_id, w) for w in ("results", "jobs", "counters", "spec", "state")], args=args
        )
        return None if int(done) < 0 else int(done)

    def results(self, run_id: str, total: int) -> Iterator[Result | None]:
        key = _k(run_id, "results")
        for start in range(0, total, CHUNK):
            fields = [str(i) for i in range(start, min(start + CHUNK, total))]
            for raw in self.r.hmget(key, fields):
                yield Result.model_validate_json(raw) if raw else None

    def counters(self, run_id: str) -> dict[str, float]:
        raw = self.r.hgetall(_k(run_id, "counters"))
        return {k: float(v) for k, v in raw.items() if k != "last_done_at"}

    def last_progress(self, run_id: str) -> float | None:
        """When a result was last stored for the run (epoch seconds), if ever."""
        value = self.r.hget(_k(run_id, "counters"), "last_done_at")
        return float(value) if value else None

    def pending_indices(self, run_id: str) -> list[int]:
        """Indices of the jobs without a result yet (payloads are deleted as results are stored)."""
        # HKEYS, not HSCAN NOVALUES (Redis >= 7.4 only): the hash holds only jobs sent and not
        # yet graded, which the producer's queue bound keeps small
        return sorted(int(k) for k in self.r.hkeys(_k(run_id, "jobs")))

    def job_ids(self, run_id: str, indices: list[int]) -> list[str]:
        """The ids of some jobs still pending (for display in task arguments)."""
        raws = self.r.hmget(_k(run_id, "jobs"), [str(i) for i in indices])
        return [str(json.loads(raw).get("id", "")) if raw else "" for raw in raws]

    def note_systemic(self, run_id: str) -> int:
        return int(self.r.hincrby(_k(run_id, "state"), "systemic_streak", 1))

    def pause(self, run_id: str, reason: str) -> bool:
        return bool(self._transition(keys=[_k(run_id, "state")], args=["running", "paused", reason]))

    def resume(self, run_id: str) -> bool:
        return bool(self._transition(keys=[_k(run_id, "state")], args=["paused", "running", ""]))

    def claim(self, run_id: str, what: str, seconds: float) -> bool:
        """A lock shared by every worker, held for ``seconds``."""
        return bool(self.r.set(_k(run_id, what), "1", nx=True, ex=max(1, int(seconds))))

    # -- reducer, state, report -----------------------------------------------------
    def claim_reducer(self, run_id: str) -> bool:
        return bool(self.r.set(_k(run_id, "reducer"), "1", nx=True, ex=self.retention_s))

    def release_reducer(self, run_id: str) -> None:
        self.r.delete(_k(run_id, "reducer"))

    def set_state(self, run_id: str, **fields: Any) -> None:
        p = self.r.pipeline()
        p.hset(_k(run_id, "state"), mapping={k: str(v) for k, v in fields.items()})
        p.expire(_k(run_id, "state"), self.retention_s)
        p.execute()

    def state(self, run_id: str) -> dict[str, str]:
        return dict(self.r.hgetall(_k(run_id, "state")))

    def save_report(self, run_id: str, report: dict[str, Any]) -> None:
        p = self.r.pipeline()
        p.set(_k(run_id, "report"), json.dumps(report), ex=self.retention_s)
        # the run is complete: keep everything until the same retention from now
        for what in ("spec", "results", "counters", "state", "jobs"):
            p.expire(_k(run_id, what), self.retention_s)
        p.execute()

    def report(self, run_id: str) -> dict[str, Any] | None:
        raw = self.r.get(_k(run_id, "report"))
        return json.loads(raw) if raw else None

    def delete_run(self, run_id: str) -> None:
        self.r.delete(
            *(_k(run_id, w) for w in ("spec", "jobs", "results", "counters", "state", "reducer", "report"))
        )
        self.r.zrem("judgeq:runs", run_id)


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
