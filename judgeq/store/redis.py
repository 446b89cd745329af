"""The Redis implementation of :class:`judgeq.Store`, and :func:`connect`.

It lives outside the pure core (it imports redis) and outside the worker package, so the
producer, the workers and the tests import it without building a Celery app.

Keys of a run (all expire after the retention period; the ``{run_id}`` hash tag keeps them
on one slot of a cluster):

====================================  ======  ==================================================
``judgeq:run:{ID}:spec``              string  the RunSpec JSON (rubric text, judge, settings)
``judgeq:run:{ID}:jobs``              hash    index -> job JSON; deleted as each job is stored
``judgeq:run:{ID}:done``              bitmap  bit i set once job i has a result (decides "once")
``judgeq:run:{ID}:results:{N}``       list    packed results of jobs N*1024 … N*1024+1023, in
                                              the order stored (:func:`judgeq.store.packing.pack_result`)
``judgeq:run:{ID}:counters``          hash    done, graded, passed, null:<reason>, … (live)
``judgeq:run:{ID}:state``             hash    state, enqueued, started_at, finished_at, …
``judgeq:run:{ID}:reducer``           string  set once by the worker that enqueues the reducer
``judgeq:run:{ID}:report``            string  the report JSON
``judgeq:run:{ID}:lane``              hash    batch lane: index -> batch token ('' = buffered)
``judgeq:run:{ID}:buffer``            list    batch lane: buffered jobs ``index:time``, oldest first
``judgeq:run:{ID}:batches``           hash    batch lane: token -> Message Batch record JSON
``judgeq:run:{ID}:batch_states``      hash    batch lane: token -> state (changed by compare-and-set)
``judgeq:run:{ID}:batch:{TOKEN}``     list    batch lane: the job indices of one batch
``judgeq:run:{ID}:reserved``          hash    batch lane: token -> USD reserved by a batch in flight
``judgeq:runs``                       zset    run ids by creation time (for listings)
``judgeq:lane:runs``                  set     runs with buffered jobs or batches in flight
====================================  ======  ==================================================

Storing a result is one Lua script: write the result if absent, delete the payload, bump the
counters and return the done-count, atomically; a redelivered job therefore never counts
twice, and exactly one worker sees the count reach the total.

Times that one process writes and another compares with (``last_done_at``, the lane's
buffer times and batch records, ``started_epoch``, ``producer_heartbeat``) are on Redis's
clock: ``TIME`` (:meth:`RedisStore.now`), or read inside the script that writes them; a
machine whose own clock is off decides as the others do.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from importlib import resources
from typing import Any, cast

import redis
from redis.client import NEVER_DECODE
from redis.typing import EncodableT, FieldT

from judgeq.errors import RubricError
from judgeq.grading.result import Result
from judgeq.judges.prices import Prices, shipped_prices
from judgeq.redis_connect import connect
from judgeq.runspec import RunSpec
from judgeq.settings import RETENTION_S, Settings
from judgeq.store.base import live_increments
from judgeq.store.packing import UnknownFormat, pack_result, packing_dictionary, unpack_result
from judgeq.telemetry import RunChanged, emit

__all__ = [
    "BUCKET",
    "CHUNK",
    "LANE_RUNS",
    "RedisStore",
    "run_constants",
]

log = logging.getLogger(__name__)


def _lua(name: str) -> str:
    """The text of ``judgeq/store/lua/<name>.lua``: each is one atomic step of the store (its
    first comment says which)."""
    return resources.files("judgeq.store").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


LANE_RUNS = "judgeq:lane:runs"
CHUNK = 1000


def _k(run_id: str, what: str) -> str:
    return f"judgeq:run:{{{run_id}}}:{what}"


class RedisStore:
    """:class:`judgeq.Store` on Redis."""

    @classmethod
    def open(cls, settings: Settings, client: redis.Redis | None = None) -> RedisStore:
        """The store at ``settings.redis_url`` (or on ``client``), keeping runs for
        ``JUDGEQ_RETENTION_DAYS``."""
        client = connect(settings.redis_url) if client is None else client
        return cls(client, retention_s=int(settings.retention_days * 86400))

    def __init__(self, client: redis.Redis, *, retention_s: int = RETENTION_S) -> None:
        # a client of connect() (decode_responses=True): its replies are str where redis-py's
        # types say bytes | str (the casts below), raw bytes only through _raw (NEVER_DECODE)
        self.r = client
        self.retention_s = int(retention_s)
        self._store = client.register_script(_lua("store_result"))
        self._transition = client.register_script(_lua("transition"))
        self._lane_add = client.register_script(_lua("lane_add"))
        self._lane_take = client.register_script(_lua("lane_take"))
        self._lane_return = client.register_script(_lua("lane_return"))
        self._lane_set = client.register_script(_lua("lane_set"))
        self._lane_reserve = client.register_script(_lua("lane_reserve"))
        self._release = client.register_script(_lua("release"))
        self._renew = client.register_script(_lua("renew"))
        self._lock = threading.Lock()
        self._dictionaries: dict[str, tuple[bytes, Prices]] = {}

    def now(self) -> float:
        """Redis's clock (``TIME``): every process compares times on it, whatever its own says."""
        seconds, micros = self.r.time()
        return int(seconds) + int(micros) / 1e6

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
        return cast(list[str], self.r.zrevrange("judgeq:runs", 0, limit - 1))

    # -- jobs ----------------------------------------------------------------------
    def put_jobs(self, run_id: str, jobs: Iterable[tuple[int, str]]) -> None:
        mapping: dict[FieldT, EncodableT] = dict(jobs)
        if mapping:
            p = self.r.pipeline(transaction=False)
            p.hset(_k(run_id, "jobs"), mapping=mapping)
            p.expire(_k(run_id, "jobs"), self.retention_s)
            p.execute()

    def job(self, run_id: str, index: int) -> str | None:
        return cast(str | None, self.r.hget(_k(run_id, "jobs"), str(index)))

    def missing(self, run_id: str, indices: list[int]) -> list[int]:
        if not indices:
            return []
        done = self._done_bitmap(run_id)
        return [i for i in indices if not _bit(done, i)]

    def _done_bitmap(self, run_id: str) -> bytes:
        return bytes(self._raw("GET", _k(run_id, "done")) or b"")

    def _raw(self, *command: Any) -> Any:
        """A command whose reply is bytes (packed results, bitmaps), not decoded text."""
        return self.r.execute_command(*command, **{NEVER_DECODE: True})

    # -- results -------------------------------------------------------------------
    def has_result(self, run_id: str, index: int) -> bool:
        return bool(self.r.getbit(_k(run_id, "done"), index))

    def store_result(self, run_id: str, result: Result) -> int | None:
        return self.store_results(run_id, [result])[0]

    def fetch_jobs(self, run_id: str, indices: list[int]) -> list[tuple[bool, str | None]]:
        """For each job: whether it has a result, and its payload; one round trip."""
        if not indices:
            return []
        p = self.r.pipeline(transaction=False)
        for i in indices:
            p.getbit(_k(run_id, "done"), i)
        p.hmget(_k(run_id, "jobs"), [str(i) for i in indices])
        *present, payloads = p.execute()
        return [(bool(has), raw) for has, raw in zip(present, payloads, strict=True)]

    def store_results(self, run_id: str, results: list[Result]) -> list[int | None]:
        """Store each result once, atomically (``lua/store_result.lua``), all in one round trip."""
        if not results:
            return []
        dictionary, prices = self._constants(run_id)
        p = self.r.pipeline(transaction=False)
        for result in results:
            args: list[Any] = [result.index, pack_result(result, dictionary), self.retention_s]
            for key, inc in live_increments(result, prices).items():
                args += [key, repr(float(inc))]
            where = ("done", _bucket(result.index), "jobs", "counters", "spec", "state")
            keys = [_k(run_id, w) for w in where]
            self._store(keys=keys, args=args, client=p)
        out: list[int | None] = []
        for done in map(int, p.execute()):
            if done <= -2:  # this write reached the cost limit and paused the run
                reason = self.state(run_id).get("pause_reason", "max_cost")
                emit(RunChanged(run_id, "paused", reason))
                done = -2 - done
            out.append(None if done < 0 else done)
        return out

    def _dictionary(self, run_id: str) -> bytes:
        """The deflate dictionary of the run's packed results (from its spec; kept per process)."""
        return self._constants(run_id)[0]

    def _constants(self, run_id: str) -> tuple[bytes, Prices]:
        """What the run's spec fixes for storing its results, kept per process: the deflate
        dictionary of its packed results and its prices (:meth:`RunSpec.price_book`)."""
        with self._lock:
            hit = self._dictionaries.get(run_id)
        if hit is None:
            spec = self.spec(run_id)
            if spec is None:  # not registered (yet): not kept, the spec decides once it exists
                return packing_dictionary({}, []), shipped_prices()
            hit = packing_dictionary(*run_constants(spec)), spec.price_book()
            with self._lock:
                self._dictionaries[run_id] = hit
                while len(self._dictionaries) > 256:
                    self._dictionaries.pop(next(iter(self._dictionaries)))
        return hit

    def results(self, run_id: str, total: int) -> Iterator[Result | None]:
        """Every job's result in index order (None: no result), a bucket of
        :data:`BUCKET` results at a time whatever the run's size."""
        dictionary = self._dictionary(run_id)
        for start in range(0, total, BUCKET):
            bucket = _k(run_id, _bucket(start))
            found = {r.index: r for r in self._unpack(bucket, self._raw("LRANGE", bucket, 0, -1), dictionary)}
            for index in range(start, min(start + BUCKET, total)):
                yield found.get(index)

    @staticmethod
    def _unpack(bucket: str, blobs: list[bytes] | None, dictionary: bytes) -> Iterator[Result]:
        for position, blob in enumerate(blobs or []):
            try:
                yield unpack_result(bytes(blob), dictionary, f"stored result {bucket}[{position}]")
            except UnknownFormat as e:  # written by a newer judgeq: that job counts as missing
                log.error("%s; it is counted as a result missing from the report", e)

    def counters(self, run_id: str) -> dict[str, float]:
        raw = cast(dict[str, str], self.r.hgetall(_k(run_id, "counters")))
        return {k: float(v) for k, v in raw.items() if k != "last_done_at"}

    def last_progress(self, run_id: str) -> float | None:
        """When a result was last stored for the run (epoch seconds on Redis's clock), if ever."""
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

    def wait_for_judge(self, run_id: str, reason: str) -> bool:
        key = _k(run_id, "state")
        p = self.r.pipeline(transaction=True)
        p.hsetnx(key, "waiting_since", repr(self.now()))
        p.hset(key, "waiting_reason", reason)
        began = bool(p.execute()[0])
        if began:
            emit(RunChanged(run_id, "waiting", reason))
        return began

    def pause(self, run_id: str, reason: str) -> bool:
        won = bool(self._transition(keys=[_k(run_id, "state")], args=["running", "paused", reason]))
        if won:
            emit(RunChanged(run_id, "paused", reason))
        return won

    def resume(self, run_id: str) -> bool:
        won = bool(self._transition(keys=[_k(run_id, "state")], args=["paused", "running", ""]))
        if won:
            emit(RunChanged(run_id, "resumed"))
        return won

    def claim(self, run_id: str, what: str, seconds: float) -> str | None:
        """A lock shared by every worker, held for ``seconds``: its token, or None."""
        token = secrets.token_hex(8)
        ok = self.r.set(_k(run_id, what), token, nx=True, ex=max(1, int(seconds)))
        return token if ok else None

    def release(self, run_id: str, what: str, token: str | None = None) -> None:
        if token is None:
            self.r.delete(_k(run_id, what))
        else:
            self._release(keys=[_k(run_id, what)], args=[token])

    def renew(self, run_id: str, what: str, token: str, seconds: float) -> bool:
        return bool(self._renew(keys=[_k(run_id, what)], args=[token, max(1, int(seconds))]))

    # -- the Message Batches lane ---------------------------------------------------
    def lane_add(self, run_id: str, index: int, now: float) -> bool:
        keys = [_k(run_id, w) for w in ("done", "lane", "buffer")]
        return bool(self._lane_add(keys=keys, args=[str(index), repr(now), self.retention_s]))

    def lane_take(self, run_id: str, n: int, token: str, now: float) -> list[int]:
        keys = [_k(run_id, w) for w in ("lane", "buffer", "batches", "batch_states", f"batch:{token}")]
        record = json.dumps({"token": token, "id": None, "state": "creating", "created": now})
        taken = self._lane_take(keys=keys, args=[max(1, n), token, self.retention_s, record])
        return [int(i) for i in taken]

    def lane_return(self, run_id: str, indices: list[int], now: float, token: str) -> int:
        keys = [_k(run_id, w) for w in ("done", "lane", "buffer")]
        back = 0
        for start in range(0, len(indices), 10 * CHUNK):
            part = [str(i) for i in indices[start : start + 10 * CHUNK]]
            back += int(self._lane_return(keys=keys, args=[repr(now), token, self.retention_s, *part]))
        return back

    def lane_done(self, run_id: str, indices: list[int]) -> None:
        for start in range(0, len(indices), 10 * CHUNK):
            self.r.hdel(_k(run_id, "lane"), *(str(i) for i in indices[start : start + 10 * CHUNK]))

    def lane_counts(self, run_id: str) -> tuple[int, int, float | None]:
        p = self.r.pipeline(transaction=False)
        p.llen(_k(run_id, "buffer"))
        p.hlen(_k(run_id, "lane"))
        p.lindex(_k(run_id, "buffer"), 0)
        buffered, in_lane, oldest = p.execute()
        return int(buffered), int(in_lane), float(oldest.partition(":")[2]) if oldest else None

    def lane_set_batch(self, run_id: str, record: dict[str, Any], expect: tuple[str, ...]) -> bool:
        keys = [_k(run_id, "batches"), _k(run_id, "batch_states"), _k(run_id, "reserved")]
        args = [record["token"], record["state"], json.dumps(record), self.retention_s, *expect]
        return bool(self._lane_set(keys=keys, args=args))

    def lane_reserve(self, run_id: str, token: str, usd: float) -> bool:
        keys = [_k(run_id, w) for w in ("counters", "state", "reserved", "batch_states")]
        return int(self._lane_reserve(keys=keys, args=[token, repr(float(usd)), self.retention_s])) == 1

    def lane_reserved(self, run_id: str) -> float:
        return sum(float(v) for v in self.r.hvals(_k(run_id, "reserved")))

    def lane_batches(self, run_id: str) -> list[dict[str, Any]]:
        p = self.r.pipeline(transaction=False)
        p.hgetall(_k(run_id, "batches"))
        p.hgetall(_k(run_id, "batch_states"))
        raw, states = p.execute()
        records = []
        for token, text in raw.items():
            record = json.loads(text)
            record["state"] = states.get(token, record.get("state"))
            records.append(record)
        return sorted(records, key=lambda r: (r.get("created", 0), r["token"]))

    def lane_batch(self, run_id: str, token: str) -> dict[str, Any] | None:
        p = self.r.pipeline(transaction=False)
        p.hget(_k(run_id, "batches"), token)
        p.hget(_k(run_id, "batch_states"), token)
        raw, state = p.execute()
        if not raw:
            return None
        record: dict[str, Any] = json.loads(raw)
        record["state"] = state or record.get("state")
        return record

    def lane_batch_indices(self, run_id: str, token: str) -> list[int]:
        taken = self.r.lrange(_k(run_id, f"batch:{token}"), 0, -1)
        still: list[int] = []
        for start in range(0, len(taken), 10 * CHUNK):
            part = taken[start : start + 10 * CHUNK]
            owners = self.r.hmget(_k(run_id, "lane"), part)
            still += [int(i) for i, owner in zip(part, owners, strict=True) if owner == token]
        return still

    def lane_runs(self) -> list[str]:
        return sorted(cast(set[str], self.r.smembers(LANE_RUNS)))

    def lane_track(self, run_id: str, active: bool) -> None:
        if active:
            self.r.sadd(LANE_RUNS, run_id)
        else:
            self.r.srem(LANE_RUNS, run_id)

    # -- workers -------------------------------------------------------------------
    def worker_heartbeat(
        self, queue: str, name: str, ttl: float, *, serves: tuple[str, ...] | None = None
    ) -> None:
        """A worker consuming ``queue`` says it lives (``judgeq:worker:QUEUE:NAME``, expiring):
        a lease on Redis's clock, whoever reads it; its value says when (the worker's clock,
        only shown) and which judge providers it can call (``serves``; None: unknown)."""
        value = json.dumps({"at": time.time(), "serves": list(serves) if serves is not None else None})
        self.r.set(f"judgeq:worker:{queue}:{name}", value, ex=max(1, int(ttl)))

    def worker_gone(self, queue: str, name: str) -> None:
        """A worker of ``queue`` stopped on purpose: its heartbeat goes at once."""
        self.r.delete(f"judgeq:worker:{queue}:{name}")

    def worker_judges(self, queue: str) -> dict[str, list[str] | None]:
        """The live workers of ``queue`` and the judge providers each can call (None: not
        said, e.g. an older worker: taken as any)."""
        names = self.workers(queue)
        values = self.r.mget([f"judgeq:worker:{queue}:{n}" for n in names]) if names else []
        out: dict[str, list[str] | None] = {}
        for name, raw in zip(names, values, strict=True):
            try:
                serves = json.loads(raw).get("serves") if raw else None
            except (ValueError, AttributeError):
                serves = None
            out[name] = list(serves) if isinstance(serves, list) else None
        return out

    def workers(self, queue: str) -> list[str]:
        """The workers that said they consume ``queue`` within their heartbeat's lifetime."""
        prefix = f"judgeq:worker:{queue}:"
        return sorted(key.removeprefix(prefix) for key in self.r.scan_iter(match=prefix + "*", count=1000))

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
        return dict(cast(dict[str, str], self.r.hgetall(_k(run_id, "state"))))

    def states(self, run_ids: list[str]) -> list[dict[str, str]]:
        """:meth:`state` of each run, in one round trip."""
        p = self.r.pipeline(transaction=False)
        for run_id in run_ids:
            p.hgetall(_k(run_id, "state"))
        return [dict(cast(dict[str, str], found)) for found in p.execute()]

    def save_report(self, run_id: str, report: dict[str, Any]) -> None:
        p = self.r.pipeline()
        p.set(_k(run_id, "report"), json.dumps(report), ex=self.retention_s)
        # the run is complete: keep everything until the same retention from now
        for what in ("spec", "done", "counters", "state", "jobs", "batches", "batch_states", "reserved"):
            p.expire(_k(run_id, what), self.retention_s)
        for what in self._buckets(run_id):
            p.expire(_k(run_id, what), self.retention_s)
        p.execute()

    def report(self, run_id: str) -> dict[str, Any] | None:
        raw = self.r.get(_k(run_id, "report"))
        return json.loads(raw) if raw else None

    def mark_archived(self, run_id: str, folder: str) -> None:
        """The run's data is in ``folder`` now: drop it here, keeping its state as a marker
        (``archived``, ``archived_to``) and its place in the list of runs."""
        self.delete_run(run_id, keep_listing=True)
        self.set_state(run_id, state="archived", archived_to=folder, archived_at=repr(time.time()))

    def _buckets(self, run_id: str) -> list[str]:
        spec = self.spec(run_id)
        return [_bucket(start) for start in range(0, spec.total if spec else 0, BUCKET)]

    def delete_run(self, run_id: str, *, keep_listing: bool = False) -> None:
        """Drop every key of the run (and, unless ``keep_listing``, its place in the list)."""
        names = (
            "spec", "jobs", "done", "counters", "state", "reducer", "reducing", "report",
            "lane", "buffer", "batches", "batch_states", "reserved", "repair", "archive",
        )  # fmt: skip
        self.r.delete(*(_k(run_id, w) for w in (*names, *self._buckets(run_id))))
        for key in self.r.scan_iter(match=_k(run_id, "batch:*"), count=1000):
            self.r.delete(key)
        self.r.srem(LANE_RUNS, run_id)
        if not keep_listing:
            self.r.zrem("judgeq:runs", run_id)


BUCKET = 1024
"""Results per list (``results:<n>``): a reader holds one bucket at a time."""


def _bucket(index: int) -> str:
    return f"results:{index // BUCKET}"


def _bit(bitmap: bytes, index: int) -> bool:
    """Bit ``index`` of a Redis bitmap (bit 0 is the high bit of the first byte)."""
    byte = index >> 3
    return byte < len(bitmap) and bool(bitmap[byte] & (0x80 >> (index & 7)))


def run_constants(spec: RunSpec) -> tuple[dict[str, str], list[str]]:
    """What every result of a run repeats (for :func:`packing_dictionary`).

    A rubric that fails to load still gets a dictionary (its jobs end as ``internal_error``
    nulls, which must be stored): the judge model alone, the same for writer and reader."""
    try:
        rubric = spec.rubric
    except RubricError:
        return {"judge_model": spec.judge_model}, []
    constants = {"rubric_name": rubric.name, "rubric_version": rubric.version}
    constants["judge_model"] = spec.judge_model
    return constants, [d.name for d in rubric.dimensions]


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
