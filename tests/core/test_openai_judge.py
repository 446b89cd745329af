"""The OpenAI judge (issue 21, in part): the real ``openai`` SDK against the stand-in
Chat Completions server on loopback: structured output and its fallbacks, the error mapping to
null reasons, usage, rate-limit headers, the preflight, and a whole run through the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from judgeq.errors import (
    JudgeAPIError,
    JudgeAuthError,
    JudgeBillingError,
    JudgeInvalidRequest,
    JudgeModelNotFound,
    JudgeOverloaded,
    JudgeRateLimited,
)
from judgeq.grading.request import render_request
from judgeq.grading.score import score_verdict
from judgeq.grading.verdict import parse_verdict
from judgeq.judges import parse_judge_spec
from judgeq.judges.openai import OpenAIJudge
from judgeq.ratelimit import server_limits
from judgeq.rubric.model import load_rubric
from judgeq.testing.fake_openai import FakeChatAPI

ROOT = Path(__file__).parent.parent.parent
RUBRIC = load_rubric("quality")


@pytest.fixture
def fake() -> Iterator[FakeChatAPI]:
    with FakeChatAPI(api_key="k", models=("gpt-test",)) as server:
        yield server


def judge_for(fake: FakeChatAPI, model: str = "gpt-test", key: str = "k") -> OpenAIJudge:
    return OpenAIJudge(model, api_key=key, base_url=fake.base_url + "/v1")


def request(output: str = "Paris is the capital of France.") -> object:
    return render_request(RUBRIC, input="What is the capital of France?", output=output)


def test_a_verdict_comes_back_as_structured_output_and_scores(fake: FakeChatAPI) -> None:
    judge = judge_for(fake)
    reply = judge.complete(request("Paris. [[fake:score=7]]"), timeout=5)  # type: ignore[arg-type]
    sent = fake.requests[-1]
    assert sent["response_format"]["type"] == "json_schema" and "max_completion_tokens" in sent
    assert "temperature" not in sent and sent["messages"][0]["role"] == "system"
    assert judge.response_format == "json_schema"
    parsed = parse_verdict(RUBRIC, text=reply.text)
    assert score_verdict(RUBRIC, parsed).overall == pytest.approx(7.0)
    assert reply.input_tokens > 0 and reply.output_tokens > 0 and reply.model == "gpt-test"


@pytest.mark.parametrize(
    ("structured", "json_mode", "expected"),
    [(False, True, "json_object"), (False, False, "text")],
)
def test_a_server_without_structured_output_gets_the_next_shape_once_and_keeps_it(
    structured: bool, json_mode: bool, expected: str
) -> None:
    with FakeChatAPI(api_key="k", structured=structured, json_mode=json_mode) as fake:
        judge = judge_for(fake)
        first = judge.complete(request("a [[fake:score=4]]"), timeout=5)  # type: ignore[arg-type]
        assert judge.response_format == expected
        tried = [r.get("response_format", {}).get("type", "text") for r in fake.requests]
        judge.complete(request("b"), timeout=5)  # type: ignore[arg-type]
        again = [r.get("response_format", {}).get("type", "text") for r in fake.requests[len(tried) :]]
    assert tried[-1] == expected and tried[0] == "json_schema"  # each shape tried once, in order
    assert again == [expected]  # kept for the judge's later calls
    assert score_verdict(RUBRIC, parse_verdict(RUBRIC, text=first.text)).overall == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("marker", "error", "reason"),
    [
        ("[[fake:401]]", JudgeAuthError, "auth_error"),
        ("[[fake:quota]]", JudgeBillingError, "billing_error"),
        ("[[fake:404]]", JudgeModelNotFound, "model_not_found"),
        ("[[fake:429]]", JudgeRateLimited, "rate_limited"),
        ("[[fake:500]]", JudgeAPIError, "api_error"),
        ("[[fake:529]]", JudgeOverloaded, "overloaded"),
        ("[[fake:400]]", JudgeInvalidRequest, "invalid_request"),
    ],
)
def test_errors_map_to_null_reasons(fake: FakeChatAPI, marker: str, error: type, reason: str) -> None:
    with pytest.raises(error) as info:
        judge_for(fake).complete(request(f"x {marker}"), timeout=5)  # type: ignore[arg-type]
    assert info.value.reason == reason
    if reason == "rate_limited":
        assert info.value.retry_after == pytest.approx(0.05)


def test_a_refusal_and_a_length_cut_are_reported(fake: FakeChatAPI) -> None:
    judge = judge_for(fake)
    refused = judge.complete(request("x [[fake:refusal]]"), timeout=5)  # type: ignore[arg-type]
    assert refused.stop_reason == "refusal" and refused.text
    cut = judge.complete(request("x [[fake:truncated]]"), timeout=5)  # type: ignore[arg-type]
    assert cut.stop_reason == "max_tokens"


def test_rate_limit_headers_teach_the_budget_its_request_limit() -> None:
    with FakeChatAPI(api_key="k", rpm=600) as fake:
        reply = judge_for(fake).complete(request(), timeout=5)  # type: ignore[arg-type]
    assert reply.headers["x-ratelimit-limit-requests"] == "600"
    assert server_limits(reply.headers) == {"requests": 600}


def test_the_preflight_check_knows_the_key_and_the_model(fake: FakeChatAPI) -> None:
    judge_for(fake).check(timeout=5)
    with pytest.raises(JudgeModelNotFound):
        judge_for(fake, model="gpt-nope").check(timeout=5)
    with pytest.raises(JudgeAuthError):
        judge_for(fake, key="wrong").check(timeout=5)
    with FakeChatAPI(api_key="k", models=("gpt-test",), model_endpoint=False) as vllm_like:
        judge_for(vllm_like).check(timeout=5)  # the list says it serves the model
        with pytest.raises(JudgeModelNotFound, match="serves: gpt-test"):
            judge_for(vllm_like, model="gpt-nope").check(timeout=5)


def test_no_key_is_no_client_and_the_spec_names_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert not OpenAIJudge("gpt-test").has_credentials
    monkeypatch.setenv("OPENAI_API_KEY", "   ")
    assert not OpenAIJudge("gpt-test").has_credentials
    assert str(parse_judge_spec("openai:gpt-4.1-mini")) == "openai:gpt-4.1-mini"
    with pytest.raises(Exception, match="give the OpenAI model"):
        parse_judge_spec("openai")


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_"))}
    env.update(HOME=str(tmp_path), JUDGEQ_RESULTS_DIR=str(tmp_path / "r"), **extra)
    return env


def test_judgeq_run_grades_with_an_openai_judge(tmp_path: Path) -> None:
    with FakeChatAPI(api_key="k", models=("gpt-test",), structured=False) as fake:
        host = fake.base_url.split("://")[1]
        env = cli_env(tmp_path, OPENAI_API_KEY="k", OPENAI_BASE_URL=fake.base_url + "/v1")
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
             "--rubric", "quality", "--judge", "openai:gpt-test", "--run-id", "oa"],
            capture_output=True, text=True, env=env, timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r" / "oa" / "report.json").read_text())
    assert report["judge"]["provider"] == "openai" and report["counts"]["graded"] == 30
    assert report["usage"]["input_tokens"] > 0
    # provenance: where the calls went (no credential), the model as answered, the format used
    # (this server has no structured output: JSON mode, found by asking)
    assert report["judge"]["served"] == [
        {
            "provider": "openai",
            "endpoint": host,
            "model": "gpt-test",
            "response_format": "json_object",
            "calls": 30,
        }
    ]
    md = (tmp_path / "r" / "oa" / "report.md").read_text()
    assert f"- Answered by: gpt-test at {host} (json_object), 30 call(s)" in md


def test_an_openai_judge_without_a_key_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
         "--rubric", "quality", "--judge", "openai:gpt-test"],
        capture_output=True, text=True, env=cli_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "needs an OpenAI API key, and OPENAI_API_KEY is not set" in proc.stderr


def test_batch_api_with_an_openai_compatible_judge_is_refused_with_a_clear_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
         "--rubric", "quality", "--judge", "openai-compatible:m@http://127.0.0.1:9/v1", "--batch-api"],
        capture_output=True, text=True, timeout=120,
        env=cli_env(tmp_path, JUDGEQ_JUDGE_URLS="http://127.0.0.1:9"),
    )  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "OpenAI-compatible servers have none: grade without --batch-api" in proc.stderr


def test_a_council_across_families_grades_every_job_with_each(tmp_path: Path) -> None:
    from judgeq.testing import FakeMessagesAPI

    with FakeMessagesAPI(api_key="a") as claude, FakeChatAPI(api_key="o", seed="other") as gpt:
        env = cli_env(
            tmp_path, ANTHROPIC_API_KEY="a", ANTHROPIC_BASE_URL=claude.base_url,
            OPENAI_API_KEY="o", OPENAI_BASE_URL=gpt.base_url + "/v1",
        )  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
             "--rubric", "quality", "--judge", "anthropic:claude-test", "--judge", "openai:gpt-test",
             "--run-id", "mixed"],
            capture_output=True, text=True, env=env, timeout=180,
        )  # fmt: skip
        calls = (claude.request_count, gpt.request_count)
    assert proc.returncode == 0, proc.stderr
    assert "council of 2 judges: anthropic:claude-test, openai:gpt-test" in proc.stdout
    assert calls == (30, 30)  # every job graded by each judge
    council = json.loads((tmp_path / "r" / "mixed" / "report.json").read_text())["council"]
    assert council["per_judge"]["claude-test"]["n"] == 30 and council["per_judge"]["gpt-test"]["n"] == 30
    assert council["krippendorff_alpha"] is not None


# -- openai-compatible:MODEL@URL (vLLM, Ollama, LiteLLM, OpenRouter) ---------------------------


def test_an_openai_compatible_server_needs_no_key_and_gets_the_shape_it_serves(tmp_path: Path) -> None:
    with FakeChatAPI(api_key=None, models=("qwen",), structured=False, model_endpoint=False) as vllm:
        url = vllm.base_url + "/v1"
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
             "--rubric", "quality", "--judge", f"openai-compatible:qwen@{url}", "--run-id", "compat"],
            capture_output=True, text=True, timeout=180,
            env=cli_env(tmp_path, JUDGEQ_JUDGE_URLS=vllm.base_url),
        )  # fmt: skip
        shapes = [r.get("response_format", {}).get("type", "text") for r in vllm.requests]
        models = {r["model"] for r in vllm.requests}
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r" / "compat" / "report.json").read_text())
    assert report["judge"]["provider"] == "openai-compatible" and report["counts"]["graded"] == 30
    assert models == {"qwen"}  # the model name the server knows, not MODEL@URL
    # refused once, then JSON mode for every call (the shape kept; concurrent first calls
    # may each have tried the refused shape once)
    assert shapes.count("json_object") == 30 and set(shapes) <= {"json_schema", "json_object"}


def test_an_openai_compatible_spec_is_checked_and_never_carries_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from judgeq.judges.openai import OpenAICompatibleJudge

    for bad, why in (
        ("openai-compatible:qwen", "give the model and the server"),
        ("openai-compatible:qwen@ftp://x", r"is not an http\(s\) URL"),
        ("openai-compatible:qwen@http://user:secret@host:8000/v1", "holds credentials"),
    ):
        with pytest.raises(Exception, match=why):
            parse_judge_spec(bad)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    allowed = ("http://127.0.0.1:1", "http://127.0.0.1:2/v1")
    a = OpenAICompatibleJudge("qwen@http://127.0.0.1:1/v1", allowed=allowed)
    assert a.has_credentials and a.wire_model == "qwen"
    assert a._client is not None and a._client.api_key != "sk-openai-secret"  # OpenAI's key stays home
    b = OpenAICompatibleJudge("qwen@http://127.0.0.1:2/v1", allowed=allowed)
    assert a.cache_identity != b.cache_identity  # two servers of one model name share no reply


def test_a_server_not_allowed_is_never_called(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a run's spec lives in Redis and names the server: a machine calls (and sends its key to)
    # only the servers its operator allowed
    from judgeq.errors import ConfigError
    from judgeq.judges import can_serve
    from judgeq.judges.openai import OpenAICompatibleJudge
    from judgeq.settings import load_settings

    with FakeChatAPI(api_key=None, models=("qwen",)) as server:
        url = server.base_url + "/v1"
        with pytest.raises(ConfigError, match="JUDGEQ_JUDGE_URLS"):
            OpenAICompatibleJudge(f"qwen@{url}", allowed=("http://127.0.0.1:1",))
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
             "--rubric", "quality", "--judge", f"openai-compatible:qwen@{url}"],
            capture_output=True, text=True, env=cli_env(tmp_path), timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2 and "set JUDGEQ_JUDGE_URLS=" in proc.stderr, proc.stderr
        assert server.request_count == 0
        monkeypatch.setenv("JUDGEQ_JUDGE_URLS", server.base_url)
        assert can_serve(load_settings(), "openai-compatible", f"qwen@{url}")
        monkeypatch.setenv("JUDGEQ_JUDGE_URLS", server.base_url + "0")  # a prefix, not a boundary
        assert not can_serve(load_settings(), "openai-compatible", f"qwen@{url}")


def test_a_200_that_is_not_a_completion_is_a_clear_null_not_a_crash() -> None:
    from judgeq.testing.canned import canned_server

    with canned_server(b"<html><body>Open WebUI</body></html>") as url:
        judge = OpenAIJudge("m", api_key="k", base_url=url)
        with pytest.raises(JudgeInvalidRequest, match="usually ends in /v1"):
            judge.complete(request(), timeout=5)  # type: ignore[arg-type]
        with pytest.raises(JudgeInvalidRequest, match="does not serve the OpenAI API"):
            judge.check(timeout=5)


def test_a_worker_checks_its_default_openai_judge_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21.3, the worker start-up check for each provider: an OpenAI default judge without
    a key, with a refused key, or naming an unknown model is broken (the worker takes no job);
    one that works is not; an OpenAI-compatible server the worker does not allow is broken."""
    from judgeq.settings import load_settings
    from workers.health import judge_setup_problem

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    no_key = judge_setup_problem(load_settings(judge="openai:gpt-test"))
    assert no_key is not None and "needs OPENAI_API_KEY set" in no_key
    with FakeChatAPI(api_key="k", models=("gpt-test",)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        assert judge_setup_problem(load_settings(judge="openai:gpt-test")) is None
        unknown = judge_setup_problem(load_settings(judge="openai:gpt-nope")) or ""
        assert "model_not_found" in unknown
        monkeypatch.setenv("OPENAI_API_KEY", "wrong")
        assert "auth_error" in (judge_setup_problem(load_settings(judge="openai:gpt-test")) or "")
        url = fake.base_url + "/v1"
        refused = judge_setup_problem(load_settings(judge=f"openai-compatible:gpt-test@{url}")) or ""
        assert "JUDGEQ_JUDGE_URLS" in refused
        allowed = load_settings(judge=f"openai-compatible:gpt-test@{url}", judge_urls=fake.base_url)
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "k")
        assert judge_setup_problem(allowed) is None


def test_provenance_names_the_model_a_gateway_says_answered() -> None:
    # (issue 29: LiteLLM names the real model in x-litellm-model-name, the body the route's alias)
    import json as _json

    from judgeq.grading.request import JudgeRequest
    from judgeq.judges.base import served_model
    from judgeq.testing.canned import canned_server

    assert served_model("alias", {"x-litellm-model-name": "claude-sonnet-4-5"}) == "claude-sonnet-4-5"
    assert served_model("gpt-4.1-mini", {}) == "gpt-4.1-mini"
    body = _json.dumps({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "judge-route",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": '{"score": 7}'}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }).encode()  # fmt: skip
    gateway = {"x-litellm-model-name": "claude-sonnet-4-5-20250929"}
    with canned_server(body, "application/json", gateway) as url:
        judge = OpenAIJudge("judge-route", api_key="k", base_url=url + "/v1")
        request = JudgeRequest(system=["Grade."], user="x", output_schema={"type": "object"}, max_tokens=50)
        reply = judge.complete(request, timeout=10)
    assert reply.model == "claude-sonnet-4-5-20250929" and reply.text == '{"score": 7}'


OBJ: dict[str, object] = {"type": "object", "properties": {"score": {"type": "integer"}}}


@pytest.mark.parametrize(
    ("json_schema", "refused"),
    [
        # the structured-output parameters the API documents, held: refused with its 400
        (None, "Missing required parameter: 'response_format.json_schema'"),
        ({"schema": {**OBJ, "required": ["score"]}}, "json_schema.name"),
        ({"name": "has space", "schema": OBJ}, "json_schema.name"),
        ({"name": "verdict"}, "json_schema.schema"),
        (
            {"name": "verdict", "strict": True, "schema": {**OBJ, "required": ["score"]}},
            "'additionalProperties'",
        ),
        (
            {"name": "verdict", "strict": True, "schema": {**OBJ, "additionalProperties": False}},
            "including every key in properties. Missing 'score'",
        ),
        # accepted: non-strict takes any schema (judgeq's shape), strict a closed, all-required one
        ({"name": "verdict", "strict": False, "schema": OBJ}, None),
        (
            {"name": "verdict", "strict": True,
             "schema": {**OBJ, "required": ["score"], "additionalProperties": False}},
            None,
        ),
    ],
)  # fmt: skip
def test_the_stand_in_holds_the_response_format_as_the_api_documents_it(
    fake: FakeChatAPI, json_schema: dict[str, object] | None, refused: str | None
) -> None:
    client = openai.OpenAI(api_key="k", base_url=fake.base_url + "/v1", max_retries=0)
    fmt: dict[str, object] = {"type": "json_schema"}
    if json_schema is not None:
        fmt["json_schema"] = json_schema
    ask = {"model": "gpt-test", "messages": [{"role": "user", "content": "grade"}], "response_format": fmt}
    if refused is None:
        assert json.loads(client.chat.completions.create(**ask).choices[0].message.content or "")  # type: ignore[call-overload]
        return
    with pytest.raises(openai.BadRequestError, match=re.escape(refused)):
        client.chat.completions.create(**ask)  # type: ignore[call-overload]
