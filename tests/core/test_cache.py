"""The judge-reply cache: keys, what is cached, re-runs without judge calls, the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import judgeq
from judgeq.grading.request import JudgeRequest
from judgeq.jobs.models import ResponseJob
from judgeq.pipeline.job import GradingContext, grade_job
from judgeq.rubric.model import load_rubric
from judgeq.store.reply_cache import MemoryCache, Prefetched, ReplyCache, SqliteCache, cache_key, get_many
from judgeq.testing.fake_anthropic import FakeMessagesAPI
from judgeq.testing.mock_messages import verdict_for_schema

ROOT = Path(__file__).parent.parent.parent
QUALITY = load_rubric("quality")


class CountingJudge:
    provider, model = "anthropic", "claude-x"

    def __init__(self, text: str | None = None) -> None:
        self.calls = 0
        self.text = text

    def complete(self, request: JudgeRequest, *, timeout: float) -> judgeq.JudgeReply:
        self.calls += 1
        text = self.text or json.dumps(verdict_for_schema(request.output_schema, 8))
        return judgeq.JudgeReply(text=text, input_tokens=1000, output_tokens=200)


JOB = ResponseJob(id="a", input="How do I reset it?", output="Settings > Reset.", model="m")


def test_the_key_changes_with_model_rubric_version_and_request() -> None:
    request = GradingContext(rubric=QUALITY, judge=CountingJudge()).request_for(JOB)
    key = cache_key("claude-x", request, QUALITY)
    assert key == cache_key("claude-x", request, QUALITY)  # deterministic (the nonce too)
    assert key != cache_key("claude-y", request, QUALITY)
    bumped = QUALITY.model_copy(update={"version": "9.9.9"})
    assert key != cache_key("claude-x", request, bumped)
    other = GradingContext(rubric=QUALITY, judge=CountingJudge()).request_for(
        JOB.model_copy(update={"output": "Other."})
    )
    assert key != cache_key("claude-x", other, QUALITY)


def test_a_judge_names_its_provider_server_and_model_and_never_a_credential() -> None:
    from judgeq.judges.anthropic import AnthropicJudge
    from judgeq.judges.base import cache_identity, server_of
    from judgeq.judges.openai import OpenAIJudge

    assert server_of("https://user:hunter2@API.example.com:8443/v1/?key=s3cret") == "api.example.com:8443/v1"
    assert server_of("http://[::1]:4000/proxy/") == "[::1]:4000/proxy"
    assert server_of("http://u:pw@host:port/v1") == "host:port/v1"  # (not a number: still no credential)
    assert server_of("") == ""
    real = AnthropicJudge("claude-x", api_key="k")
    stand_in = AnthropicJudge("claude-x", api_key="k", base_url="http://127.0.0.1:8765")
    assert cache_identity(real) == "anthropic:claude-x@api.anthropic.com"
    assert cache_identity(stand_in) == "anthropic:claude-x@127.0.0.1:8765"
    gateway = OpenAIJudge("gpt-x", api_key="k", base_url="http://u:hunter2@gw.local/team-a/v1")
    assert cache_identity(gateway) == "openai:gpt-x@gw.local/team-a/v1"
    assert cache_identity(CountingJudge()) == "anthropic:claude-x"  # a double names no server
    request = GradingContext(rubric=QUALITY, judge=real).request_for(JOB)
    keys = {cache_key(cache_identity(j), request, QUALITY) for j in (real, stand_in, gateway)}
    assert len(keys) == 3


@pytest.mark.parametrize("base_url", [None, "http://127.0.0.1:8765/x"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_judge_without_a_key_names_the_server_its_sdk_would_call(
    provider: str, base_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry run on a machine without a key looks up the key a worker with one writes (issue 29:
    ``anthropic:MODEL@``, no server, so it never counted a cached reply)."""
    from judgeq.judges.anthropic import AnthropicJudge
    from judgeq.judges.base import cache_identity
    from judgeq.judges.openai import OpenAIJudge

    prefix = provider.upper()
    for name in (f"{prefix}_API_KEY", f"{prefix}_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    if base_url:
        monkeypatch.setenv(f"{prefix}_BASE_URL", base_url)
    cls: Any = AnthropicJudge if provider == "anthropic" else OpenAIJudge
    keyless, keyed = cls("m"), cls("m", api_key="k")
    assert not keyless.has_credentials and keyed.has_credentials
    assert cache_identity(keyless) == cache_identity(keyed)
    assert not cache_identity(keyless).endswith("@")


def test_an_entry_written_before_the_key_named_the_server_is_never_served() -> None:
    # version 1 keyed an Anthropic judge's replies by its model alone: such an entry cannot tell
    # which server answered it (the README's stand-in try-out wrote made-up verdicts so)
    import hashlib

    from judgeq.judges.anthropic import messages_kwargs

    cache = MemoryCache()
    judge = CountingJudge()
    ctx = GradingContext(rubric=QUALITY, judge=judge, cache=cache)
    request = ctx.request_for(JOB)
    material = {
        "v": 1,
        "rubric": [QUALITY.name, QUALITY.version, QUALITY.fingerprint],
        "request": messages_kwargs(request, judge.model),
    }
    text = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    made_up = judgeq.JudgeReply(text=json.dumps(verdict_for_schema(request.output_schema, 1)))
    cache.put(hashlib.sha256(text.encode()).hexdigest(), made_up)
    result = grade_job(ctx, JOB, 0)
    assert judge.calls == 1 and not result.cached


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_graded_reply_is_reused_and_a_failure_is_asked_again(kind: str, tmp_path: Path) -> None:
    made = iter(range(10))

    def make() -> MemoryCache | SqliteCache:
        return MemoryCache() if kind == "memory" else SqliteCache(tmp_path / f"{next(made)}.db")

    cache = make()
    judge = CountingJudge()
    ctx = GradingContext(rubric=QUALITY, judge=judge, cache=cache)
    first = grade_job(ctx, JOB, 0)
    again = grade_job(ctx, JOB, 0)
    assert judge.calls == 1 and not first.cached and again.cached
    assert again.overall == first.overall and again.scores == first.scores and again.attempts == 0
    garbage = CountingJudge(text="no idea")
    ctx = GradingContext(rubric=QUALITY, judge=garbage, cache=make())
    assert grade_job(ctx, JOB, 0).null_reason == "parse_error"
    grade_job(ctx, JOB, 0)
    assert garbage.calls == 2  # an unusable reply is not cached


def test_the_report_counts_hits_as_saved_not_spent() -> None:
    from judgeq.report.aggregate import Aggregator

    cache = MemoryCache()
    ctx = GradingContext(rubric=QUALITY, judge=CountingJudge(), cache=cache)
    agg = Aggregator(dimensions=[d.name for d in QUALITY.dimensions])
    agg.add(grade_job(ctx, JOB, 0))
    agg.add(grade_job(ctx, JOB, 1))
    usage = agg.report(judge_model="claude-sonnet-4-5")["usage"]
    assert usage["input_tokens"] == 1000 and usage["output_tokens"] == 200  # spent once
    assert usage["judge_calls"] == 1
    rc = usage["reply_cache"]
    assert rc["hits"] == 1 and rc["saved_input_tokens"] == 1000 and rc["saved_output_tokens"] == 200
    assert rc["saved_usd"] == usage["estimated_cost_usd"] > 0


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_a_redelivered_job_whose_reply_was_cached_spends_it_not_saves_it(kind: str, tmp_path: Path) -> None:
    # a worker killed after it cached a reply but before it stored the result: the redelivered
    # job finds its own reply. That call was paid for by this run, so it is spent, not a saving
    # (the report must equal that of an undisturbed run); another run or job still hits.
    cache = make_reply_cache(kind, tmp_path)
    judge = CountingJudge()
    ctx = GradingContext(rubric=QUALITY, judge=judge, cache=cache, run_id="r1")
    first = grade_job(ctx, JOB, 0)
    redelivered = grade_job(ctx, JOB, 0)
    assert judge.calls == 1
    assert not first.cached and not redelivered.cached
    assert redelivered.input_tokens == first.input_tokens == 1000
    assert redelivered.output_tokens == 200 and redelivered.overall == first.overall
    assert grade_job(ctx, JOB, 1).cached  # the same request for another job of the run
    other = GradingContext(rubric=QUALITY, judge=judge, cache=cache, run_id="r2")
    assert grade_job(other, JOB, 0).cached
    assert judge.calls == 1


def make_reply_cache(kind: str, tmp_path: Path) -> ReplyCache:
    if kind == "memory":
        return MemoryCache()
    if kind == "sqlite":
        return SqliteCache(tmp_path / "c.db")
    import fakeredis

    from judgeq.store.redis_cache import RedisCache

    return RedisCache(fakeredis.FakeRedis(decode_responses=True), ttl_s=60)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_a_prefetched_view_reads_once_and_writes_on_flush(kind: str, tmp_path: Path) -> None:
    cache = make_reply_cache(kind, tmp_path)
    old = judgeq.JudgeReply(text="old", input_tokens=1, output_tokens=2)
    cache.put("k1", old)
    assert get_many(cache, []) == {}
    view = Prefetched(cache, get_many(cache, ["k1", "k2"]))
    got = view.get("k1")
    assert got is not None and got.text == "old"
    assert view.get("k2") is None
    new = judgeq.JudgeReply(text="new", input_tokens=3, output_tokens=4)
    view.put("k2", new)
    assert cache.get("k2") is None, "a new reply is written by flush, not before"
    view.flush()
    stored = cache.get("k2")
    assert stored is not None and stored.text == "new" and stored.output_tokens == 4
    view.flush()  # nothing left to write
    assert set(get_many(cache, ["k1", "k2", "k3"])) == {"k1", "k2"}


JUDGE = ("--judge", "anthropic:claude-sonnet-4-5")


def run(batch: Path, out: Path, base_url: str, *extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    env.update(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=base_url)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "judgeq",
            "run",
            str(batch),
            "--rubric",
            "quality",
            *JUDGE,
            "--out",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(next(out.glob("*/report.json")).read_text())


def test_a_re_run_of_the_same_batch_makes_no_judge_call(tmp_path: Path) -> None:
    batch = ROOT / "examples" / "responses.jsonl"
    with FakeMessagesAPI(api_key="k") as fake:
        first = run(batch, tmp_path / "a", fake.base_url)
        assert fake.request_count == 30
        second = run(batch, tmp_path / "b", fake.base_url)
        assert fake.request_count == 30, "no judge call at all (the preflight asks the Models API)"
        assert fake.model_checks == 2
        assert second["usage"]["reply_cache"]["hits"] == 30 and second["usage"]["input_tokens"] == 0
        assert second["overall"] == first["overall"] and second["dimensions"] == first["dimensions"]
        third = run(batch, tmp_path / "c", fake.base_url, "--no-cache")
        assert fake.request_count == 30 + 30
        assert third["usage"]["reply_cache"]["hits"] == 0


def test_a_reply_from_the_stand_in_is_never_served_for_another_server(tmp_path: Path) -> None:
    # the README's offline try-out grades against the stand-in judge into the machine's cache;
    # a run against another server (the real API) must ask that server, every call
    batch = ROOT / "examples" / "responses.jsonl"
    with FakeMessagesAPI(api_key="k") as stand_in, FakeMessagesAPI(api_key="k") as other:
        run(batch, tmp_path / "a", stand_in.base_url)
        assert stand_in.request_count == 30
        second = run(batch, tmp_path / "b", other.base_url)
        assert other.request_count == 30
        assert second["usage"]["reply_cache"]["hits"] == 0
        third = run(batch, tmp_path / "c", stand_in.base_url)  # the same server: its own replies
        assert third["usage"]["reply_cache"]["hits"] == 30 and stand_in.request_count == 30


def test_a_dry_run_counts_the_replies_the_workers_would_find(tmp_path: Path) -> None:
    # the dry run looks up the key the workers use, for every provider (it said 0 of 30 for an
    # OpenAI judge whose re-run then found 30)
    from judgeq.testing.fake_openai import FakeChatAPI

    batch = str(ROOT / "examples" / "responses.jsonl")
    with FakeChatAPI(api_key="k", models=("gpt-test",)) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_", "OPENAI_"))}
        env.update(
            OPENAI_API_KEY="k", OPENAI_BASE_URL=f"{fake.base_url}/v1", JUDGEQ_RESULTS_DIR=str(tmp_path)
        )
        cmd = [sys.executable, "-m", "judgeq", "run", batch, "--rubric", "quality"]
        cmd += ["--judge", "openai:gpt-test"]

        def judgeq_run(*extra: str) -> str:
            proc = subprocess.run([*cmd, *extra], capture_output=True, text=True, env=env, timeout=120)
            assert proc.returncode == 0, proc.stderr[-2000:]
            return proc.stdout

        assert "no reply cache to look in" in judgeq_run("--dry-run")
        judgeq_run()
        assert "30 of 30 calls to gpt-test are answered already" in judgeq_run("--dry-run")


def test_a_cached_reply_is_packed_and_read_back_whole() -> None:
    import dataclasses
    import json

    from judgeq.store.reply_cache import decode_reply, encode_reply

    reasoning = "The response explains the cause correctly and gives the fix, but it omits the caveat. " * 8
    reply = judgeq.JudgeReply(
        text=json.dumps({"reasoning": reasoning, "score": 7}),
        stop_reason="end_turn",
        input_tokens=2100,
        output_tokens=230,
        cache_read_input_tokens=2000,
        model="claude-sonnet-4-5",
        headers={"anthropic-ratelimit-requests-remaining": "9"},
        paid_by="run-1:17",
    )
    packed = encode_reply(reply)
    assert decode_reply(packed) == dataclasses.replace(reply, headers={}), "every field but the headers"
    as_json = json.dumps({k: v for k, v in dataclasses.asdict(reply).items() if k != "headers"})
    assert len(packed) < len(as_json) / 2
    assert decode_reply(as_json) == decode_reply(packed), "entries written before packing still read"
    assert decode_reply(packed[:-5]) is None and decode_reply(b"\x01garbage") is None  # damaged: a miss


def test_a_key_is_its_own_recipe_not_a_providers_wire_format() -> None:
    """Pinned: the key of one request as version 2 made it (issue 31 moved the Messages API's
    wire format into the Anthropic adapter; no key changed, so no cache was lost). A change of
    recipe must bump KEY_VERSION, and this value with it."""
    from judgeq.grading.request import render_request

    req = render_request(QUALITY, input="What is 2+2?", output="4", expected_answer="4")
    key = cache_key("anthropic:claude-x@api.anthropic.com", req, QUALITY)
    assert key == "00c0f3c1933260df7134f14e59c1f8310908850d059976454e0345b63a52d5d0"
