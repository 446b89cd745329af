"""The Gemini judge (issue 31, point 2, the live path): Google's own SDK (``google-genai``)
against the Gemini stand-in on loopback: structured output, thinking, usage, every error class
mapped to its null reason (429 ``RESOURCE_EXHAUSTED``'s RetryInfo as the retry-after), the
preflight, credentials as the SDK reads them, and a whole run through the CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import judgeq
from judgeq.errors import (
    JudgeAPIError,
    JudgeAuthError,
    JudgeInvalidRequest,
    JudgeModelNotFound,
    JudgeOverloaded,
    JudgeRateLimited,
    JudgeTimeout,
)
from judgeq.grading.request import render_request
from judgeq.grading.verdict import parse_verdict
from judgeq.judges import budget_name, parse_judge_spec
from judgeq.judges.gemini import GeminiJudge, thinking_budget
from judgeq.judges.providers import provider
from judgeq.rubric.model import load_rubric
from judgeq.settings import load_settings
from judgeq.testing.fake_gemini import FakeGeminiAPI

ROOT = Path(__file__).parent.parent.parent
RUBRIC = load_rubric("quality")
MODEL = "gemini-2.5-flash"
GOOGLE_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI")


@pytest.fixture(autouse=True)
def _no_google_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GOOGLE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGeminiAPI]:
    with FakeGeminiAPI(api_keys=("k",)) as server:
        monkeypatch.setenv("GEMINI_API_KEY", "k")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
        yield server


def request(output: str = "Paris is the capital of France.") -> judgeq.JudgeRequest:
    return render_request(RUBRIC, input="What is the capital of France?", output=output)


def test_a_verdict_comes_back_as_structured_output_with_thinking_off(fake: FakeGeminiAPI) -> None:
    judge = GeminiJudge(MODEL)
    req = request()
    reply = judge.complete(req, timeout=5)
    sent = fake.requests[-1]
    config = sent["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == req.output_schema  # the rubric's schema, as it is
    assert config["maxOutputTokens"] == req.max_tokens  # no thinking budget on top
    assert config["thinkingConfig"] == {"thinking_budget": 0}
    assert sent["systemInstruction"]["parts"][0]["text"] == "\n\n".join(req.system)
    assert sent["contents"][0]["parts"][0]["text"] == req.user
    parsed = parse_verdict(RUBRIC, text=reply.text, tool_input=None, stop_reason=reply.stop_reason)
    assert parsed.null_reason is None, reply.text
    assert reply.stop_reason == "end_turn" and reply.model == MODEL
    assert (
        reply.input_tokens > 0 and reply.output_tokens > 0 and reply.limit_input_tokens == reply.input_tokens
    )
    assert reply.response_format == "json_schema" and reply.headers == {}  # Google sends no limit headers
    path = fake.log[-1][1]
    assert path.startswith(f"/v1beta/models/{MODEL}:generateContent")


def test_a_model_that_cannot_stop_thinking_gets_its_smallest_budget_on_top(fake: FakeGeminiAPI) -> None:
    assert thinking_budget("gemini-2.5-pro") == 128 and thinking_budget("gemini-2.5-flash-lite") == 0
    req = request()
    GeminiJudge("gemini-2.5-pro").complete(req, timeout=5)
    config = fake.requests[-1]["generationConfig"]
    assert config["thinkingConfig"] == {"thinking_budget": 128}
    assert config["maxOutputTokens"] == req.max_tokens + 128


def test_thoughts_count_as_output_and_cached_prompt_tokens_apart(fake: FakeGeminiAPI) -> None:
    from types import SimpleNamespace

    from judgeq.judges.gemini import reply_from_response

    usage = SimpleNamespace(
        prompt_token_count=1000,
        cached_content_token_count=600,
        candidates_token_count=40,
        thoughts_token_count=128,
    )
    finish = SimpleNamespace(name="MAX_TOKENS")
    response = SimpleNamespace(
        text='{"score": 1', candidates=[SimpleNamespace(finish_reason=finish)], usage_metadata=usage,
        model_version="gemini-2.5-pro-001",
    )  # fmt: skip
    reply = reply_from_response(response)
    assert (reply.input_tokens, reply.cache_read_input_tokens, reply.limit_input_tokens) == (400, 600, 1000)
    assert reply.output_tokens == 168 and reply.stop_reason == "max_tokens"
    assert reply.model == "gemini-2.5-pro-001"


@pytest.mark.parametrize(
    ("fault", "error", "reason"),
    [
        ((429, "RESOURCE_EXHAUSTED"), JudgeRateLimited, "rate_limited"),
        ((503, "UNAVAILABLE"), JudgeOverloaded, "overloaded"),
        ((500, "INTERNAL"), JudgeAPIError, "api_error"),
        ((504, "DEADLINE_EXCEEDED"), JudgeTimeout, "timeout"),
        ((400, "INVALID_ARGUMENT"), JudgeInvalidRequest, "invalid_request"),
        ((403, "PERMISSION_DENIED"), JudgeAuthError, "auth_error"),
    ],
)
def test_each_error_maps_to_its_null_reason_in_one_attempt(
    fake: FakeGeminiAPI, fault: tuple[int, str], error: type, reason: str
) -> None:
    fake.fail_with = [fault]
    with pytest.raises(error) as caught:
        GeminiJudge(MODEL).complete(request(), timeout=5)
    assert caught.value.reason == reason
    assert fake.request_count == 1  # the SDK did not retry: judgeq's loop owns retries
    if fault[0] == 429:  # Google's RetryInfo (no retry-after header): the budget's wait
        assert caught.value.retry_after == 30.0
    assert "k" not in str(caught.value).split()  # (the key is never quoted)


def test_a_refused_key_a_missing_key_and_an_unknown_model(
    fake: FakeGeminiAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(JudgeModelNotFound):
        GeminiJudge("gemini-9-ultra").complete(request(), timeout=5)
    monkeypatch.setenv("GEMINI_API_KEY", "wrong-key")
    with pytest.raises(JudgeAuthError) as refused:  # Google answers 400 API_KEY_INVALID, not 401
        GeminiJudge(MODEL).complete(request(), timeout=5)
    assert "wrong-key" not in str(refused.value)
    monkeypatch.setenv("GOOGLE_API_KEY", "k")  # the SDK prefers GOOGLE_API_KEY, as judgeq says
    assert GeminiJudge(MODEL).complete(request(), timeout=5).text
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "  ")
    judge = GeminiJudge(MODEL)
    assert not judge.has_credentials
    with pytest.raises(JudgeAuthError, match="GEMINI_API_KEY"):
        judge.complete(request(), timeout=5)


def test_garbage_a_slow_server_and_a_closed_port_are_null_reasons_not_crashes(
    fake: FakeGeminiAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.garbage = True
    with pytest.raises(JudgeAPIError, match="not JSON"):
        GeminiJudge(MODEL).complete(request(), timeout=5)
    fake.garbage, fake.latency = False, 2.0
    with pytest.raises(JudgeTimeout):
        GeminiJudge(MODEL).complete(request(), timeout=0.3)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(JudgeAPIError, match="connection"):
        GeminiJudge(MODEL).complete(request(), timeout=2)


def test_the_preflight_proves_the_key_and_the_model_without_tokens(
    fake: FakeGeminiAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    GeminiJudge(MODEL).check(timeout=5)
    assert fake.requests == []  # a GET of the model's record: nothing generated
    with pytest.raises(JudgeModelNotFound):
        GeminiJudge("gemini-9-ultra").check(timeout=5)
    monkeypatch.setenv("GEMINI_API_KEY", "wrong")
    with pytest.raises(JudgeAuthError):
        GeminiJudge(MODEL).check(timeout=5)


def test_the_provider_names_its_key_its_server_and_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_judge_spec("gemini:gemini-2.5-flash")
    assert spec.api is provider("gemini") and str(spec) == "gemini:gemini-2.5-flash"
    with pytest.raises(judgeq.ConfigError, match="give the model"):
        parse_judge_spec("gemini")
    settings = load_settings()
    api = provider("gemini")
    assert not api.has_credentials(settings) and api.family == "google"
    monkeypatch.setenv("GEMINI_API_KEY", "key-a")
    assert api.has_credentials(settings)
    first = budget_name(settings, "gemini", MODEL)
    monkeypatch.setenv("GOOGLE_API_KEY", "key-b")  # the key the SDK sends now: another budget
    assert budget_name(settings, "gemini", MODEL) != first and "key-" not in first
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")
    judge = GeminiJudge(MODEL)
    assert judge.endpoint == "127.0.0.1:9" and judge.cache_identity == f"gemini:{MODEL}@127.0.0.1:9"


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_", "GOOGLE_", "GEMINI_"))
    }
    env.update(HOME=str(tmp_path), JUDGEQ_RESULTS_DIR=str(tmp_path / "r"), **extra)
    return env


def test_judgeq_run_grades_with_a_gemini_judge(tmp_path: Path) -> None:
    with FakeGeminiAPI(api_keys=("k",), models=(MODEL,)) as fake:
        host = fake.base_url.split("://")[1]
        env = cli_env(tmp_path, GEMINI_API_KEY="k", GOOGLE_GEMINI_BASE_URL=fake.base_url)
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
             "--rubric", "quality", "--judge", f"gemini:{MODEL}", "--run-id", "gm"],
            capture_output=True, text=True, env=env, timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r" / "gm" / "report.json").read_text())
    assert report["judge"]["provider"] == "gemini" and report["counts"]["graded"] == 30
    assert report["usage"]["input_tokens"] > 0
    assert report["judge"]["served"] == [
        {
            "provider": "gemini",
            "endpoint": host,
            "model": MODEL,
            "response_format": "json_schema",
            "calls": 30,
        }
    ]


def test_a_gemini_judge_without_a_key_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
         "--rubric", "quality", "--judge", f"gemini:{MODEL}"],
        capture_output=True, text=True, env=cli_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "needs a Gemini API key, and GEMINI_API_KEY is not set" in lines[0]
    assert "Traceback" not in proc.stderr


def test_the_stand_in_refuses_what_google_refuses_never_ignores_it(fake: FakeGeminiAPI) -> None:
    """A stand-in that ignored a parameter would pass a judge that sends a wrong one: an unknown
    field is Google's 400 ``INVALID_ARGUMENT`` naming it, as the real API answers."""
    from google import genai
    from google.genai import errors, types

    client = genai.Client(
        api_key="k",
        http_options=types.HttpOptions(
            base_url=fake.base_url,
            api_version="v1beta",
            extra_body={"generationConfig": {"reasoningEffort": 1}},
        ),
    )
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model=MODEL, contents="hi")
    assert refused.value.code == 400 and "reasoningEffort" in str(refused.value.message)


def test_batch_mode_is_a_batch_lane_through_the_sdk(fake: FakeGeminiAPI) -> None:
    """Each inlined request keyed by its custom id; the job polled to its end; each answer a
    reply or the null its error stands for; a canceled job ends with no answers, said why."""
    from judgeq.judges.batches import BatchJudge

    judge = GeminiJudge(MODEL)
    assert isinstance(judge, BatchJudge) and judge.batch_label == "Gemini batch"
    requests = [
        ("j0", judge.batch_params(request("Paris. [[fake:score=8]]"))),
        ("j1", judge.batch_params(request("Paris. [[fake:500]]"))),
        ("j2", judge.batch_params(request("Paris. [[fake:garbage]]"))),
    ]
    created = judge.batch_create(requests)
    assert created.status == "in_progress" and created.id.startswith("batches/")
    sent = fake.batches[created.id.removeprefix("batches/")]["requests"]
    assert [r["metadata"] for r in sent] == [{"key": "j0"}, {"key": "j1"}, {"key": "j2"}]
    assert sent[0]["request"]["generationConfig"]["responseJsonSchema"]  # the live call's request
    info = judge.batch_retrieve(created.id)
    while info.status != "ended":
        info = judge.batch_retrieve(created.id)
    items = {i.custom_id: i for i in judge.batch_results(created.id)}
    assert set(items) == {"j0", "j1", "j2"}
    assert items["j0"].reply is not None and '"score": 8' in items["j0"].reply.text
    assert items["j1"].error is not None and items["j1"].error.reason == "api_error"
    assert items["j2"].reply is not None and items["j2"].reply.text == "I think this is pretty good overall!!"
    canceled = judge.batch_create(requests[:1])
    ended = judge.batch_cancel(canceled.id)
    assert ended.status == "ended" and ended.error is not None and ended.error.startswith("cancelled")
    assert list(judge.batch_results(canceled.id)) == []
    with pytest.raises(JudgeModelNotFound):
        GeminiJudge("gemini-9-ultra").batch_create(requests[:1])


def test_judgeq_run_batch_api_with_a_gemini_judge(tmp_path: Path) -> None:
    rows = [json.loads(x) for x in (ROOT / "examples" / "responses.jsonl").read_text().splitlines()]
    rows[4]["output"] += " [[fake:500]]"
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeGeminiAPI(api_keys=("k",), models=(MODEL,), batch_polls_to_finish=2) as fake:
        env = cli_env(
            tmp_path, GEMINI_API_KEY="k", GOOGLE_GEMINI_BASE_URL=fake.base_url,
            JUDGEQ_BATCH_POLL_INTERVAL="0.1", JUDGEQ_BATCH_FLUSH_INTERVAL="0.5",
        )  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(jobs), "--rubric", "quality",
             "--judge", f"gemini:{MODEL}", "--batch-api", "--run-id", "gb"],
            capture_output=True, text=True, env=env, timeout=180,
        )  # fmt: skip
        live = [path for _, path, *_ in fake.log if ":generateContent" in path]
    assert proc.returncode == 0, proc.stderr
    assert f"Batch Mode lane: {len(rows)} jobs" in proc.stdout
    assert live == [], "every job went through a batch"
    report = json.loads((tmp_path / "r" / "gb" / "report.json").read_text())
    assert report["counts"]["graded"] == len(rows) - 1 and report["counts"]["null_by_reason"] == {
        "api_error": 1
    }
    assert (
        report["usage"]["batch_api"]["jobs"] == len(rows) and report["usage"]["batch_api"]["discount_usd"] < 0
    )
