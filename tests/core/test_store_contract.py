"""The Store contract: one set of tests, run against MemoryStore and RedisStore (on fakeredis)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import fakeredis
import pytest

from judgeq.grading.result import Result
from judgeq.jobs.kinds import make_result
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.store.base import MemoryStore, Store, live_increments
from judgeq.store.redis import CHUNK, RedisStore

RUN = "run-1"
RUBRIC_TEXT, RUBRIC_SOURCE = read_rubric_text("quality")


def make_spec(run_id: str = RUN, total: int = 5, **kw: Any) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        rubric_text=RUBRIC_TEXT,
        rubric_source=RUBRIC_SOURCE,
        judge_provider="test",
        judge_model="scripted",
        total=total,
        **kw,
    )


def graded(index: int, overall: float = 8.0, *, passed: bool | None = None, **kw: Any) -> Result:
    return make_result(
        job_id=f"j{index}",
        index=index,
        status="graded",
        overall=overall,
        scores={"accuracy": overall},
        passed=overall >= 7.0 if passed is None else passed,
        rubric_name="quality",
        rubric_version="1.0.0",
        judge_model="scripted",
        **kw,
    )


def null(index: int, reason: str = "timeout", **kw: Any) -> Result:
    return make_result(
        job_id=f"j{index}",
        index=index,
        status="null",
        null_reason=reason,
        rubric_name="quality",
        rubric_version="1.0.0",
        judge_model="scripted",
        **kw,
    )


def make_memory() -> MemoryStore:
    return MemoryStore()


def make_redis() -> RedisStore:
    return RedisStore(fakeredis.FakeRedis(decode_responses=True))


FACTORIES: dict[str, Callable[[], Store]] = {"memory": make_memory, "redis": make_redis}


@pytest.fixture(params=sorted(FACTORIES))
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield FACTORIES[request.param]()


@pytest.fixture
def registered(store: Store) -> Store:
    store.register(make_spec())
    return store


# -- runs and jobs ----------------------------------------------------------------------------


def test_register_and_spec_round_trip(store: Store) -> None:
    spec = make_spec(total=7, batch="b.jsonl", weights={}, thresholds=[8.0, 6.0], judge_deadline=12.5)
    assert store.spec(RUN) is None
    store.register(spec)
    got = store.spec(RUN)
    assert got is not None
    assert got.model_dump() == spec.model_dump()
    assert got.rubric.name == "quality"
    assert store.spec("other-run") is None


def test_put_jobs_and_job(registered: Store) -> None:
    store = registered
    payloads = {i: json.dumps({"id": f"j{i}", "input": "q", "output": f"a{i}"}) for i in range(5)}
    store.put_jobs(RUN, [(i, payloads[i]) for i in range(3)])
    store.put_jobs(RUN, iter([(3, payloads[3]), (4, payloads[4])]))  # any iterable, added to the rest
    store.put_jobs(RUN, [])
    for i in range(5):
        assert store.job(RUN, i) == payloads[i]
    assert store.job(RUN, 5) is None
    assert store.job("other-run", 0) is None


def test_missing_and_has_result(registered: Store) -> None:
    store = registered
    assert store.missing(RUN, []) == []
    assert store.missing(RUN, [0, 1, 2, 3]) == [0, 1, 2, 3]
    store.store_result(RUN, graded(1))
    store.store_result(RUN, null(3))
    assert store.missing(RUN, [0, 1, 2, 3]) == [0, 2]
    assert store.missing(RUN, [3, 2, 1]) == [2]
    assert store.has_result(RUN, 1)
    assert store.has_result(RUN, 3)  # a null result is a result
    assert not store.has_result(RUN, 0)


def test_fetch_jobs_reads_results_and_payloads_together(registered: Store) -> None:
    store = registered
    store.put_jobs(RUN, [(i, json.dumps({"id": f"j{i}"})) for i in range(4)])
    store.store_result(RUN, graded(1))
    assert store.fetch_jobs(RUN, []) == []
    got = store.fetch_jobs(RUN, [3, 1, 0, 7])
    assert got == [
        (False, json.dumps({"id": "j3"})),
        (True, None),  # graded: its payload was deleted on store
        (False, json.dumps({"id": "j0"})),
        (False, None),  # no such job
    ]


def test_store_results_is_store_result_for_many(registered: Store) -> None:
    store = registered
    store.put_jobs(RUN, [(i, json.dumps({"id": f"j{i}"})) for i in range(5)])
    assert store.store_results(RUN, []) == []
    assert store.store_result(RUN, graded(2)) == 1
    done = store.store_results(RUN, [graded(0), null(2, "lost"), null(4), graded(0, 1.0)])
    assert done == [2, None, 3, None]  # a result already stored, or twice in the batch: once
    counters = store.counters(RUN)
    assert counters["done"] == 3 and counters["graded"] == 2
    results = list(store.results(RUN, 5))
    assert results[0] is not None and results[0].overall == 8.0
    assert results[2] is not None and results[2].status == "graded"
    assert results[4] is not None and results[4].null_reason == "timeout"
    assert store.job(RUN, 0) is None and store.job(RUN, 4) is None and store.job(RUN, 1) is not None


# -- storing results ----------------------------------------------------------------------------


def test_store_result_returns_done_counts_and_ignores_second_write(registered: Store) -> None:
    store = registered
    n = 5
    store.put_jobs(RUN, [(i, json.dumps({"id": f"j{i}"})) for i in range(n)])
    order = [3, 0, 4, 1, 2]
    for k, i in enumerate(order, 1):
        assert store.store_result(RUN, graded(i, 9.0)) == k
        assert store.job(RUN, i) is None  # the payload is deleted on store
    before = store.counters(RUN)
    assert before["done"] == n
    assert before["graded"] == n
    assert before["passed"] == n

    # a second write of the same index (a redelivery) is ignored: not stored, not counted
    assert store.store_result(RUN, null(2, "lost")) is None
    assert store.store_result(RUN, graded(0, 1.0)) is None
    assert store.counters(RUN) == before
    results = list(store.results(RUN, n))
    assert [r.status for r in results if r] == ["graded"] * n
    assert results[0] is not None and results[0].overall == 9.0


def test_store_result_keeps_the_stored_result_intact(registered: Store) -> None:
    store = registered
    r = graded(
        2,
        7.25,
        flags=["ceiling_applied"],
        notes="ok",
        grading_latency_ms=123.4,
        attempts=2,
        input_tokens=10,
        model="m1",
    )
    store.store_result(RUN, r)
    got = list(store.results(RUN, 3))
    assert got[0] is None and got[1] is None
    assert got[2] == r


def test_a_run_whose_rubric_fails_to_load_still_stores_and_reads_its_nulls(store: Store) -> None:
    """Its jobs end as internal_error nulls; storing them must not need the rubric."""
    broken = RUBRIC_TEXT.replace("scale:", "scale: 9-2 #", 1)
    store.register(make_spec().model_copy(update={"rubric_text": broken}))
    r = null(1, "internal_error", raw="RubricError: scale", model="m1")
    assert store.store_result(RUN, r) == 1
    got = list(store.results(RUN, 2))
    assert got == [None, r]


def test_results_in_index_order_across_chunks(registered: Store) -> None:
    store = registered
    total = 2500
    assert total > 2 * CHUNK
    gaps = {0, CHUNK - 1, CHUNK, 2 * CHUNK - 1, 2 * CHUNK + 1, total - 1}
    for i in range(total):
        if i not in gaps:
            store.store_result(RUN, graded(i, overall=(i % 10) + 0.5))
    seen = list(store.results(RUN, total))
    assert len(seen) == total
    for i, r in enumerate(seen):
        if i in gaps:
            assert r is None, i
        else:
            assert r is not None and r.index == i and r.job_id == f"j{i}"
    # a shorter total stops early; a longer one pads with None
    assert [r.index if r else None for r in store.results(RUN, 3)] == [None, 1, 2]
    assert list(store.results(RUN, 0)) == []
    assert store.counters(RUN)["done"] == total - len(gaps)


def test_results_of_unknown_run_are_all_none(store: Store) -> None:
    assert list(store.results("nope", 3)) == [None, None, None]


def test_live_increments_by_hand() -> None:
    assert live_increments(graded(0, 8.0)) == {"graded": 1, "passed": 1, "overall_sum": 8.0}
    assert live_increments(graded(0, 5.0)) == {"graded": 1, "overall_sum": 5.0}
    assert live_increments(null(0, "parse_error")) == {"null:parse_error": 1}
    q = graded(0, 9.0, kind="question", rank=1, total_score=9.0)
    assert live_increments(q) == {
        "graded": 1,
        "overall_sum": 9.0,
        "passed": 1,
        "questions": 1,
        "rr_sum": 1.0,
        "hit1": 1,
        "pass7": 1,
    }
    q = graded(0, 7.0, kind="question", rank=4, total_score=5.95)
    assert live_increments(q) == {
        "graded": 1,
        "overall_sum": 7.0,
        "passed": 1,
        "questions": 1,
        "rr_sum": 0.25,
    }
    q = null(0, "rate_limited", kind="question", rank=None)
    assert live_increments(q) == {"null:rate_limited": 1, "questions": 1}


def test_counters_follow_live_increments(registered: Store) -> None:
    store = registered
    results = [
        graded(0, 9.0),
        graded(1, 5.0),
        graded(2, 7.0),
        null(3, "timeout"),
        null(4, "timeout"),
        null(5, "parse_error"),
        graded(6, 9.0, kind="question", rank=1, total_score=9.0),
        graded(7, 8.0, kind="question", rank=3, total_score=7.6),
        graded(8, 6.0, kind="question", rank=None, total_score=3.6),
        null(9, "rate_limited", kind="question", rank=2),
    ]
    for r in results:
        store.store_result(RUN, r)
    # a duplicate changes nothing
    store.store_result(RUN, graded(6, 9.0, kind="question", rank=1, total_score=9.0))

    expected: Counter[str] = Counter()
    for r in results:
        expected.update(live_increments(r))
    expected["done"] = len(results)
    counters = store.counters(RUN)
    assert counters == pytest.approx(dict(expected))
    # and by hand
    assert counters == pytest.approx(
        {
            "done": 10,
            "graded": 6,
            "overall_sum": 9.0 + 5.0 + 7.0 + 9.0 + 8.0 + 6.0,
            "passed": 4,  # 9.0, 7.0, and the two questions graded 9 and 8
            "null:timeout": 2,
            "null:parse_error": 1,
            "null:rate_limited": 1,
            "questions": 4,
            "hit1": 1,
            "rr_sum": 1.0 + 1 / 3 + 1 / 2,
            "pass7": 2,
        }
    )


def test_counters_of_unknown_run_are_empty(store: Store) -> None:
    assert store.counters("nope") == {}


# -- the store's clock (issue 18.8) ---------------------------------------------------------------


def test_the_last_result_is_stamped_on_the_stores_clock(registered: Store) -> None:
    store = registered
    assert store.last_progress(RUN) is None and store.last_progress("nope") is None
    before = store.now()
    store.store_results(RUN, [graded(0), null(1)])
    stamped = store.last_progress(RUN)
    assert stamped is not None and before <= stamped <= store.now()
    assert abs(store.now() - time.time()) < 60, "epoch seconds"
    assert "last_done_at" not in store.counters(RUN), "a time, not a counter"
    assert store.store_result(RUN, graded(0)) is None
    assert store.last_progress(RUN) == stamped, "a duplicate is no progress"


def test_a_memory_store_runs_on_the_clock_it_is_given() -> None:
    """The Redis store's clock is Redis's TIME (tests/integration/test_clock_skew.py skews the
    process's clock against a real redis-server); the memory store's is injected."""
    clock = [1_000.0]
    store = MemoryStore(clock=lambda: clock[0])
    store.register(make_spec())
    assert store.now() == 1_000.0
    clock[0] = 1_250.5
    store.store_result(RUN, graded(0))
    assert store.last_progress(RUN) == 1_250.5


# -- reducer, state, report ---------------------------------------------------------------------


def test_claim_reducer_once_until_released(registered: Store) -> None:
    store = registered
    assert store.claim_reducer(RUN) is True
    assert store.claim_reducer(RUN) is False
    assert store.claim_reducer(RUN) is False
    store.release_reducer(RUN)
    assert store.claim_reducer(RUN) is True
    assert store.claim_reducer(RUN) is False
    store.release_reducer("other-run")  # releasing what was never claimed is harmless
    assert store.claim_reducer("other-run") is True


def test_claim_reducer_is_exclusive_across_threads(registered: Store) -> None:
    store = registered
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def claim() -> None:
        barrier.wait()
        wins.append(store.claim_reducer(RUN))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_renew_extends_only_the_holders_lock(registered: Store) -> None:
    token = registered.claim(RUN, "reducing", 1)
    assert token is not None
    assert registered.renew(RUN, "reducing", token, 60)
    assert not registered.renew(RUN, "reducing", "someone-else", 60)
    time.sleep(1.2)  # past the first hold: the renewed one still holds
    assert registered.claim(RUN, "reducing", 60) is None
    registered.release(RUN, "reducing", token)
    assert not registered.renew(RUN, "reducing", token, 60)  # released: nothing to renew
    assert registered.claim(RUN, "reducing", 60) is not None


def test_set_state_and_state(registered: Store) -> None:
    store = registered
    assert store.state(RUN) == {}
    store.set_state(RUN, state="running", enqueued=5, started_epoch=1.5)
    assert store.state(RUN) == {"state": "running", "enqueued": "5", "started_epoch": "1.5"}
    store.set_state(RUN, state="finished", finished_at="2026-01-01T00:00:00.000Z")
    assert store.state(RUN) == {
        "state": "finished",
        "enqueued": "5",
        "started_epoch": "1.5",
        "finished_at": "2026-01-01T00:00:00.000Z",
    }
    assert store.state("other-run") == {}


def test_save_report_and_report(registered: Store) -> None:
    store = registered
    assert store.report(RUN) is None
    report = {"run_id": RUN, "counts": {"total": 5}, "overall": {"mean": 7.25, "median": None}, "x": [1, "a"]}
    store.save_report(RUN, report)
    assert store.report(RUN) == report
    report2 = {**report, "counts": {"total": 6}}
    store.save_report(RUN, report2)
    assert store.report(RUN) == report2
    assert store.report("other-run") is None


# -- concurrency ----------------------------------------------------------------------------------


def test_concurrent_redelivery_counts_each_index_once(registered: Store) -> None:
    store = registered
    n, workers = 200, 8
    store.put_jobs(RUN, [(i, json.dumps({"id": f"j{i}"})) for i in range(n)])
    returned: list[int | None] = []
    lock = threading.Lock()
    barrier = threading.Barrier(workers)

    def work(seed: int) -> None:
        barrier.wait()
        order = list(range(n))
        if seed % 2:
            order.reverse()
        mine = [store.store_result(RUN, graded(i, 8.0)) for i in order]
        with lock:
            returned.extend(mine)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counted = sorted(d for d in returned if d is not None)
    assert counted == list(range(1, n + 1))  # each done-count handed out exactly once
    assert returned.count(None) == n * (workers - 1)
    counters = store.counters(RUN)
    assert counters["done"] == n
    assert counters["graded"] == n
    assert counters["passed"] == n
    assert store.missing(RUN, list(range(n))) == []
    assert all(store.job(RUN, i) is None for i in range(n))


# -- Redis only: retention and deletion ----------------------------------------------------------


def _run_keys(store: RedisStore, run_id: str) -> list[str]:
    return sorted(store.r.scan_iter(match=f"judgeq:run:{{{run_id}}}:*"))


def test_redis_keys_expire_after_register_and_store() -> None:
    retention = 3600
    store = RedisStore(fakeredis.FakeRedis(decode_responses=True), retention_s=retention)
    store.register(make_spec(total=3))
    store.put_jobs(RUN, [(i, json.dumps({"id": f"j{i}"})) for i in range(3)])
    store.store_result(RUN, graded(0))
    store.store_result(RUN, null(1))
    keys = _run_keys(store, RUN)
    assert {k.split(":", 3)[3] for k in keys} == {"spec", "jobs", "done", "results:0", "counters"}
    for key in keys:
        assert 0 < store.r.ttl(key) <= retention, key

    store.set_state(RUN, state="running")
    assert store.claim_reducer(RUN)
    store.save_report(RUN, {"run_id": RUN})
    keys = _run_keys(store, RUN)
    assert {k.split(":", 3)[3] for k in keys} == {
        "spec",
        "jobs",
        "done",
        "results:0",
        "counters",
        "state",
        "reducer",
        "report",
    }
    for key in keys:
        assert 0 < store.r.ttl(key) <= retention, key
    assert store.runs() == [RUN]


def test_redis_results_key_expires_when_first_write_is_a_store() -> None:
    # no register / put_jobs beforehand: the Lua script itself sets the retention
    store = RedisStore(fakeredis.FakeRedis(decode_responses=True), retention_s=100)
    store.store_result(RUN, graded(0))
    for key in _run_keys(store, RUN):
        assert 0 < store.r.ttl(key) <= 100, key


def test_redis_delete_run_removes_every_key() -> None:
    store = RedisStore(fakeredis.FakeRedis(decode_responses=True))
    other = "run-2"
    for run_id in (RUN, other):
        store.register(make_spec(run_id=run_id, total=3))
        store.put_jobs(run_id, [(i, json.dumps({"id": f"j{i}"})) for i in range(3)])
        store.store_result(run_id, graded(0))
        store.set_state(run_id, state="running")
        store.claim_reducer(run_id)
        store.save_report(run_id, {"run_id": run_id})
    assert len(_run_keys(store, RUN)) == 8
    store.delete_run(RUN)
    assert _run_keys(store, RUN) == []
    assert RUN not in store.runs()
    assert store.spec(RUN) is None
    assert store.report(RUN) is None
    assert store.counters(RUN) == {}
    # the other run is untouched
    assert len(_run_keys(store, other)) == 8
    assert store.runs() == [other]


# -- the stored form: a version byte, an unknown version is one clear error ------------------


def test_a_result_in_a_newer_storage_format_is_named_and_the_reduce_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from judgeq.pipeline.stages import reduce_run
    from judgeq.store.redis import _bucket, _k

    store = RedisStore(fakeredis.FakeRedis(decode_responses=True))
    store.register(make_spec(total=3))
    for i in range(3):
        store.store_result(RUN, graded(i, 8.0))
    bucket = _k(RUN, _bucket(0))
    newer = b"\x07" + (1).to_bytes(4, "big") + b"a body this judgeq cannot read"
    store.r.lset(bucket, 1, newer)  # the entry of job #1: results are kept in the order stored
    with caplog.at_level("ERROR", logger="judgeq.store.redis"):
        results = list(store.results(RUN, 3))
        report = reduce_run(store, RUN)
    assert [r is None for r in results] == [False, True, False]
    message = f"stored result {bucket}[1] (job #1) is in storage format 7, which this judgeq cannot read"
    assert any(message in r.getMessage() for r in caplog.records)
    assert report["counts"]["missing"] == 1  # type: ignore[index]
    assert report["counts"]["graded"] == 2  # type: ignore[index]


def test_unpack_names_the_entry_of_an_unknown_format_and_reads_plain_json() -> None:
    from judgeq.store.packing import UnknownFormat, pack_result, packing_dictionary, unpack_result

    dictionary = packing_dictionary({}, [])
    result = graded(4)
    blob = pack_result(result, dictionary)
    assert blob[0] == 1 and unpack_result(blob, dictionary) == result
    assert unpack_result(result.model_dump_json().encode(), dictionary) == result
    with pytest.raises(UnknownFormat, match=r"entry x \(job #4\) is in storage format 2"):
        unpack_result(b"\x02" + (4).to_bytes(4, "big") + blob[1:], dictionary, "entry x")
    with pytest.raises(UnknownFormat, match=r"entry y is in storage format 255"):
        unpack_result(b"\xff", dictionary, "entry y")


def test_a_cached_reply_in_an_unknown_format_is_a_miss_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from judgeq.judges.base import JudgeReply
    from judgeq.store.reply_cache import decode_reply, encode_reply

    reply = JudgeReply(text='{"score": 8}', input_tokens=10, output_tokens=3)
    assert decode_reply(encode_reply(reply)) == reply
    with caplog.at_level("WARNING", logger="judgeq.store.reply_cache"):
        assert decode_reply(b"\x02" + encode_reply(reply)[1:], "reply cache entry k1") is None
    assert any("reply cache entry k1 is in storage format 2" in r.getMessage() for r in caplog.records)
    assert decode_reply(b"\x01not deflate") is None  # damaged: a miss


def test_a_result_is_built_without_inspecting_a_factory_and_owns_its_provenance_list() -> None:
    # pydantic 2.13 inspects a private attribute's default_factory on every instance
    # (pydantic#13376): 0.1 ms a result, built three times a job; a default is copied instead
    served = Result.__private_attributes__["_served"]
    assert served.default_factory is None and served.default == []

    def made(i: int) -> Result:
        return make_result(
            index=i, job_id=str(i), status="graded", rubric_name="r", rubric_version="1", judge_model="m"
        )

    a, b = made(0), made(1)
    a._served.append("anthropic api.anthropic.com m -")
    assert b._served == [] and made(2)._served == []


# -- waiting for a judge that answers no one ------------------------------------------------------


def test_a_wait_for_the_judge_is_noted_once_and_ended_by_an_answer_only(registered: Store) -> None:
    store = registered
    store.set_state(RUN, state="running")
    assert store.wait_for_judge(RUN, "api_error: connection refused")
    since = store.state(RUN)["waiting_since"]
    assert abs(float(since) - store.now()) < 5
    assert not store.wait_for_judge(RUN, "timeout: later")  # the wait goes on: since is kept
    state = store.state(RUN)
    assert state["waiting_since"] == since and state["waiting_reason"] == "timeout: later"
    # a null nobody answered, and a job graded from the cache, say nothing about the judge
    store.store_result(RUN, null(0, "api_error"))
    store.store_result(RUN, graded(1, cached=True))
    assert store.state(RUN)["waiting_since"] == since and "last_answer_at" not in store.state(RUN)
    assert "answered" not in store.counters(RUN)
    # the judge answered one (even a verdict that failed to parse): the wait ends
    answered = null(2, "parse_error")
    answered._served = ["test:scripted"]
    assert live_increments(answered)["answered"] == 1
    store.store_result(RUN, answered)
    state = store.state(RUN)
    assert "waiting_since" not in state and "waiting_reason" not in state
    assert float(state["last_answer_at"]) >= float(since)
    assert store.counters(RUN)["answered"] == 1


def test_a_pause_or_resume_ends_a_wait(registered: Store) -> None:
    store = registered
    store.set_state(RUN, state="running")
    store.wait_for_judge(RUN, "api_error: down")
    assert store.pause(RUN, "auth_error: 401") and "waiting_since" not in store.state(RUN)
    store.wait_for_judge(RUN, "api_error: down")
    assert store.resume(RUN) and "waiting_since" not in store.state(RUN)
