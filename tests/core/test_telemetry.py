"""Issue 22: the pipeline's events (judgeq.telemetry), the worker's Prometheus metrics made of
them, the JSON log lines, and the exporter's figures read from Redis (fakeredis here; the real
Prometheus server is tests/integration/test_monitoring.py)."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import fakeredis
import pytest
from prometheus_client import CollectorRegistry

import judgeq
from judgeq.grading.request import JudgeRequest
from judgeq.pipeline.stages import Contexts, Outcome, process_job, reduce_run
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.store.base import MemoryStore
from judgeq.store.redis import RedisStore
from judgeq.telemetry import Event, JobStored, JudgeCall, RunChanged, observing
from judgeq.telemetry.jsonlog import EVENTS_LOGGER, JsonFormatter, log_event, redact
from judgeq.testing.mock_messages import verdict_for_schema
from judgeq.workers.metrics import Metrics

QUALITY_TEXT, _ = read_rubric_text("quality")
SECRET = "sk-ant-api03-SECRET0123456789abcdef"


class FaultyJudge:
    """A verdict for most jobs; for job outputs naming a fault: a 429 once, a 500 every time, or
    garbage."""

    provider = "anthropic"
    model = "claude-test"

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        output = str(request.fields.get("output", ""))
        if output == "429" and output not in self.seen:
            self.seen.add(output)
            raise judgeq.JudgeRateLimited("429 too many requests", retry_after=0.0)
        if output == "500":
            raise judgeq.JudgeAPIError(f"500 internal error (key {SECRET})")
        text = (
            "no verdict here"
            if output == "garbage"
            else json.dumps(verdict_for_schema(request.output_schema, 7))
        )
        return judgeq.JudgeReply(text=text, input_tokens=1000, output_tokens=100, model="claude-test-2026")


def run(
    outputs: list[str], store: Any | None = None, run_id: str = "tel", max_cost: float | None = None
) -> tuple[Any, RunSpec]:
    store = store or MemoryStore()
    spec = RunSpec(
        run_id=run_id,
        rubric_text=QUALITY_TEXT,
        rubric_source="builtin:quality",
        judge_provider="anthropic",
        judge_model="claude-test",
        total=len(outputs),
        judge_deadline=1.0,
        prices={"claude-test": {"input": 10.0, "output": 50.0}},
    )
    store.register(spec)
    store.put_jobs(
        run_id, [(i, json.dumps({"id": f"j{i}", "input": "q", "output": o})) for i, o in enumerate(outputs)]
    )
    store.set_state(run_id, state="running")
    if max_cost is not None:
        store.set_state(run_id, max_cost_usd=str(max_cost))
    judge = FaultyJudge()
    contexts = Contexts(lambda provider, model: judge)
    for i in range(len(outputs)):
        assert process_job(store, contexts, run_id, i) in (Outcome.STORED, Outcome.LAST, Outcome.PAUSED)
    return store, spec


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_the_metrics_count_what_the_report_counts() -> None:
    outputs = ["fine"] * 6 + ["429", "500", "garbage"]
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    with observing(metrics.observe):
        store, spec = run(outputs)
        report = reduce_run(store, spec.run_id)
    judge = {"provider": "anthropic", "model": "claude-test"}
    calls = {
        o: sample(registry, "judgeq_judge_calls_total", **judge, outcome=o)
        for o in ("ok", "rate_limited", "api_error")
    }
    assert calls["rate_limited"] == 1 and calls["ok"] == 8  # the 429 job answered on its second attempt
    assert sum(calls.values()) == report["usage"]["judge_calls"]  # every attempt, as the report counts them
    stored = {
        reason: sample(
            registry, "judgeq_jobs_stored_total", judge="anthropic:claude-test", status="null", reason=reason
        )
        for reason in report["counts"]["null_by_reason"]
    }
    assert stored == report["counts"]["null_by_reason"] == {"api_error": 1, "parse_error": 1}
    graded = sample(
        registry, "judgeq_jobs_stored_total", judge="anthropic:claude-test", status="graded", reason=""
    )
    assert graded == report["counts"]["graded"] == 7
    assert (
        sample(registry, "judgeq_judge_tokens_total", **judge, kind="input")
        == report["usage"]["input_tokens"]
    )
    assert (
        sample(registry, "judgeq_judge_tokens_total", **judge, kind="output")
        == report["usage"]["output_tokens"]
    )
    assert sample(registry, "judgeq_judge_cost_usd_total", model="claude-test") == pytest.approx(
        report["usage"]["estimated_cost_usd"]
    )
    assert sample(registry, "judgeq_verdicts_total", **judge, outcome="parse_error") == 1
    assert sample(registry, "judgeq_judge_call_seconds_count", **judge) == report["usage"]["judge_calls"]
    assert sample(registry, "judgeq_run_state_changes_total", state="finalized") == 1
    # series a dashboard rates over exist from the judge's first call, at 0
    assert registry.get_sample_value("judgeq_reply_cache_hits_total", judge) == 0.0
    assert registry.get_sample_value("judgeq_budget_wait_seconds_total", judge) == 0.0
    exposition = "".join(
        f"{s.name}{s.labels}{s.value}" for family in registry.collect() for s in family.samples
    )
    assert SECRET not in exposition and "run" not in {
        k for f in registry.collect() for s in f.samples for k in s.labels
    }


def test_provenance_is_counted_once_per_answered_call() -> None:
    store, spec = run(["fine", "fine", "500"])
    report = reduce_run(store, spec.run_id)
    assert report["judge"]["served"] == [
        {
            "provider": "anthropic",
            "endpoint": None,
            "model": "claude-test-2026",
            "response_format": None,
            "calls": 2,
        }
    ]


def test_json_logs_have_one_object_a_line_with_run_job_judge_outcome_timing_and_no_secret() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(EVENTS_LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with observing(log_event):
            store, spec = run(["fine", "429", "500"])
            store.pause(spec.run_id, f"auth_error: invalid x-api-key {SECRET}")
            store.resume(spec.run_id)
            reduce_run(store, spec.run_id)
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    calls = [x for x in lines if x["event"] == "judge_call"]
    assert {(c["index"], c["outcome"]) for c in calls} >= {
        (0, "ok"),
        (1, "rate_limited"),
        (1, "ok"),
        (2, "api_error"),
    }
    assert all(
        c["run_id"] == "tel" and c["judge"] == "anthropic:claude-test" and c["seconds"] >= 0 for c in calls
    )
    stored = [x for x in lines if x["event"] == "job_stored"]
    assert sorted((x["index"], x["outcome"]) for x in stored) == [
        (0, "graded"),
        (1, "graded"),
        (2, "api_error"),
    ]
    states = [(x["state"], x["level"]) for x in lines if x["event"] == "run_state"]
    assert states == [("paused", "WARNING"), ("resumed", "WARNING"), ("finalized", "WARNING")]
    text = stream.getvalue()
    assert SECRET not in text and "q" not in {x.get("input") for x in lines}  # no secret, no job text
    assert all({"ts", "level", "logger", "message"} <= set(x) for x in lines)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Incorrect API key provided: sk-proj-abc123***xyz9.", "Incorrect API key provided: sk-proj-***."),
        ("Authorization: Bearer abcdefgh12345678", "Authorization: Bearer ***"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic ***"),
        ("Bearer: abcdefgh12345678", "Bearer: ***"),
        ("x-api-key: sk-ant-test-SECRET-0123", "x-api-key: ***"),
        ("api_key=hunter2secret", "api_key=***"),
        ("https://gw.example.com/v1?key=abcd1234&x=1", "https://gw.example.com/v1?key=***&x=1"),
        ('{"password": "hunter2!"}', '{"password": "***"}'),
        ("redis://:s3cret-pass@redis:6379/0", "redis://***@redis:6379/0"),
        ("groq gsk_abcdefghijkl and google AIzaSyA1234567890", "groq gsk_*** and google AIza***"),
        (
            "disk-123456789, task-42, input_tokens: 1200, max_tokens=512 stay",
            "disk-123456789, task-42, input_tokens: 1200, max_tokens=512 stay",
        ),
        # a password holding '@' is masked whole, to the authority's last '@'
        ("redis://:p@ss-word@host:6379/0", "redis://***@host:6379/0"),
        ("rediss//:S3cret@PW@127.0.0.1:6390/0 then", "rediss//***@127.0.0.1:6390/0 then"),
        ("see https://a:b1@c/d then http://e:f2@g", "see https://***@c/d then http://***@g"),
        # a variable named like a key, in NAME=value or NAME: value form
        ("ANTHROPIC_API_KEY=abcd1234xyz set", "ANTHROPIC_API_KEY=*** set"),
        ("REDIS_PASSWORD: hunter22", "REDIS_PASSWORD: ***"),
        ("token ghp1234567890abc", "token ***"),
        # words after token, key or basic that are no credential stay
        ("the output token limit of 8000 per minute", "the output token limit of 8000 per minute"),
        ("Basic authentication failed", "Basic authentication failed"),
        ("dimension key: accuracy", "dimension key: accuracy"),
    ],
)
def test_redact_masks_keys_and_leaves_the_rest(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_an_observer_that_fails_never_fails_the_grade(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("metrics backend down")

    with observing(broken):
        store, spec = run(["fine", "fine"])
    assert store.counters(spec.run_id)["done"] == 2
    assert "telemetry observer" in caplog.text


def test_the_exporter_exports_active_runs_and_budgets_never_keys() -> None:
    from prometheus_client import generate_latest

    from judgeq.producer.exporter import ClusterCollector, serve_exporter  # noqa: F401
    from judgeq.ratelimit.redis import RedisBudget

    client = fakeredis.FakeRedis(decode_responses=True)
    store = RedisStore(client)  # type: ignore[arg-type]
    run(["fine", "500", "garbage", "fine"], store=store, run_id="active")
    store.set_state("active", max_cost_usd="0.05")
    budget = RedisBudget(client, "anthropic:claude-test:" + "ab" * 32)  # type: ignore[arg-type]
    budget.observe(
        {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49"}
    )
    budget.acquire(100, 10)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(store, "judgeq", lambda: 7, grace=300))
    text = generate_latest(registry).decode()
    value = lambda name, **labels: registry.get_sample_value(name, labels)  # noqa: E731
    assert value("judgeq_exporter_up") == 1.0
    assert value("judgeq_queue_messages", queue="judgeq") == 7.0
    assert (
        value("judgeq_run_jobs", run="active") == 4.0 and value("judgeq_run_jobs_done", run="active") == 4.0
    )
    assert value("judgeq_run_nulls", run="active", reason="api_error") == 1.0
    assert value("judgeq_run_nulls", run="active", reason="parse_error") == 1.0
    assert (
        value("judgeq_run_max_cost_usd", run="active") == 0.05
        and value("judgeq_run_paused", run="active") == 0.0
    )
    who = {"provider": "anthropic", "model": "claude-test", "budget": "abababab"}
    assert value("judgeq_budget_limit_per_minute", **who, dimension="requests") == 50.0
    assert value("judgeq_budget_requests_last_minute", **who) == 1.0
    assert "ab" * 32 not in text and SECRET not in text
    # a finished run stays for the grace period, then goes: the run label never accumulates
    reduce_run(store, "active")
    assert value("judgeq_run_jobs", run="active") == 4.0
    gone = CollectorRegistry(auto_describe=False)
    gone.register(ClusterCollector(store, "judgeq", lambda: 0, grace=0))
    assert gone.get_sample_value("judgeq_run_jobs", {"run": "active"}) is None


def test_the_exporter_says_when_redis_is_down() -> None:
    class Down:
        def runs(self, limit: int) -> list[str]:
            raise ConnectionError("Redis is down")

        def workers(self, queue: str) -> list[str]:
            raise ConnectionError("Redis is down")

        def states(self, run_ids: list[str]) -> list[dict[str, str]]:
            raise ConnectionError("Redis is down")

    from judgeq.producer.exporter import ClusterCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(Down(), "judgeq", lambda: 0))  # type: ignore[arg-type]
    assert registry.get_sample_value("judgeq_exporter_up") == 0.0


def test_events_carry_no_text_of_a_job() -> None:
    seen: list[Event] = []
    with observing(seen.append):
        run(["the secret answer 42", "fine"])
    for event in seen:
        assert "secret answer" not in json.dumps(
            event.__dict__ if hasattr(event, "__dict__") else {f: getattr(event, f) for f in event.__slots__},
            default=str,
        )  # type: ignore[union-attr]
    kinds = {type(e) for e in seen}
    assert {JudgeCall, JobStored} <= kinds and RunChanged not in kinds


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_the_cost_cap_pausing_a_run_is_one_state_change_event(backend: str) -> None:
    """The pause the store decides (its Lua script, in Redis) is an event like any other: one
    ``paused`` with the cost reason, however many results are stored after it."""
    store = MemoryStore() if backend == "memory" else RedisStore(fakeredis.FakeRedis(decode_responses=True))  # type: ignore[arg-type]
    seen: list[Event] = []
    with observing(seen.append):
        store, spec = run(["fine"] * 5, store=store, max_cost=0.02)  # a job costs $0.015 here
    changes = [e for e in seen if isinstance(e, RunChanged)]
    assert [(e.state, e.reason.startswith("max_cost: $")) for e in changes] == [("paused", True)]
    assert store.state(spec.run_id)["state"] == "paused"
    assert store.counters(spec.run_id)["done"] == 5  # stored after the pause too, without a second event


def test_json_log_extras_are_redacted_however_deep() -> None:
    record = logging.LogRecord("judgeq", logging.INFO, __file__, 1, "plain", None, None)
    record.judgeq = {"nested": {"headers": ["Authorization: Bearer abcdefgh12345678"]}, "n": 3}  # type: ignore[attr-defined]
    line = json.loads(JsonFormatter().format(record))
    assert line["nested"] == {"headers": ["Authorization: Bearer ***"]} and line["n"] == 3


def test_the_live_gauges_of_dead_children_stop_counting(tmp_path: Any) -> None:
    import os

    from judgeq.workers.metrics import DeadChildren

    dead, alive = tmp_path / "gauge_livesum_999999999.db", tmp_path / f"gauge_livesum_{os.getpid()}.db"
    counter = tmp_path / "counter_999999999.db"
    for path in (dead, alive, counter):
        path.write_bytes(b"")
    assert list(DeadChildren(str(tmp_path)).collect()) == []
    assert not dead.exists() and alive.exists() and counter.exists()  # a dead child's counts stay summed


def test_judgeq_run_with_json_logs_writes_its_events_to_stderr(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_"))}
    env.update(HOME=str(tmp_path), JUDGEQ_RESULTS_DIR=str(tmp_path / "r"), JUDGEQ_LOG_FORMAT="json")
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", "run", str(root / "examples" / "responses.jsonl"),
         "--rubric", "quality", "--judge", "lexical", "--run-id", "js"],
        capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events]
    assert kinds.count("judge_call") == 30 and kinds.count("job_stored") == 30
    assert [e["state"] for e in events if e["event"] == "run_state"] == ["finalized"]
    assert all(e["run_id"] == "js" for e in events)
    assert any(
        line.startswith("judgeq:") for line in proc.stderr.splitlines()
    )  # its own lines stay as they were


def test_provenance_of_a_reply_read_back_after_a_redelivery_names_the_judges_format() -> None:
    """Found by the fault suite: a job redelivered after its worker was killed is graded from the
    reply it paid for, read back from the cache, which keeps no format; its provenance must equal
    an undisturbed run's."""
    from judgeq.pipeline.job import provenance

    class Judge:
        provider, model, endpoint, response_format = "anthropic", "claude-test", "api.example", "json_schema"

    fresh = judgeq.JudgeReply(model="claude-test-1", response_format="json_schema")
    cached = judgeq.JudgeReply(model="claude-test-1")
    assert (
        provenance(Judge(), cached)
        == provenance(Judge(), fresh)
        == "anthropic api.example claude-test-1 json_schema"
    )  # type: ignore[arg-type]


def test_metrics_exporter_and_flower_listen_on_loopback_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (issue 29: each listened on every interface by default, and no setting changed the metrics')
    from types import SimpleNamespace

    from judgeq.producer.exporter import ClusterCollector, serve_exporter
    from judgeq.settings import Settings
    from judgeq.workers.flower_auth import bind_flower
    from judgeq.workers.metrics import serve_metrics

    assert Settings().listen_address == "127.0.0.1"
    monkeypatch.setenv("JUDGEQ_LISTEN_ADDRESS", "0.0.0.0")
    opened = Settings()
    assert opened.listen_address == "0.0.0.0"
    for server in (serve_metrics(0), serve_exporter(ClusterCollector(None, "q", lambda: 0), 0)):  # type: ignore[arg-type]
        try:
            assert server.server_address[0] == "127.0.0.1"
        finally:
            server.shutdown()
            server.server_close()
    flower = SimpleNamespace(address="", unix_socket="")
    assert bind_flower(flower, Settings(_env_file=None, listen_address="127.0.0.1")) == "127.0.0.1"
    assert bind_flower(flower, opened) == "127.0.0.1"  # set once: Flower's own --address wins
    assert bind_flower(SimpleNamespace(address="", unix_socket=""), opened) == "0.0.0.0"


def test_text_logs_are_redacted_as_json_logs_are(monkeypatch: pytest.MonkeyPatch) -> None:
    # a secret this process holds is masked by value, whatever surrounds it; a URL's password by
    # shape, malformed URLs too; a traceback as well as the message
    import io
    import logging

    from judgeq.telemetry.redact import known_secrets, redact, redact_logs

    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "plain-looking-Secret-42")
    monkeypatch.setenv("JUDGEQ_REDIS_URL", "rediss//:pw/with-slash@10.0.0.1:6379/0")
    monkeypatch.setenv("JUDGEQ_DEBUG", "true")  # not a secret by name, and a boolean by value
    secrets = known_secrets()
    assert "plain-looking-Secret-42" in secrets and "pw/with-slash" in secrets and "true" not in secrets
    assert redact("header x:plain-looking-Secret-42;") == "header x:***;"
    assert redact("e.g. redis://:PASSWORD@host:6379/0") == "e.g. redis://:PASSWORD@host:6379/0"  # an example
    assert "hunter2" not in redact("GET http://u:hunter2/x@host/v1 failed")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    redact_logs([handler])
    redact_logs([handler])  # idempotent
    assert len(handler.filters) == 1
    logger = logging.getLogger("judgeq.test.redact")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("calling %s failed", "http://127.0.0.1/v1?key=plain-looking-Secret-42")
        try:
            raise RuntimeError("auth plain-looking-Secret-42 refused")
        except RuntimeError:
            logger.exception("call failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "plain-looking-Secret-42" not in text and text.count("***") >= 2 and "RuntimeError" in text
