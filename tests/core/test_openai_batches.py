"""The OpenAI Batch API lane (issue 21, point 5): the real ``openai`` SDK against the stand-in's
files and batches endpoints; the adapter's states, results and errors, the plan's refusals, and
a whole ``judgeq run --batch-api`` with an OpenAI judge (discount priced, nulls by reason)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from judgeq.errors import (
    ConfigError,
    JudgeAPIError,
    JudgeBillingError,
    JudgeCanceled,
    JudgeTimeout,
)
from judgeq.grading.request import JudgeRequest, render_request
from judgeq.grading.score import score_verdict
from judgeq.grading.verdict import parse_verdict
from judgeq.judges import parse_judge_spec
from judgeq.judges.batches import BatchInfo, BatchItem, BatchJudge
from judgeq.judges.openai import OpenAIJudge
from judgeq.rubric.model import load_rubric
from judgeq.testing.fake_openai import FakeChatAPI
from producer.plan import check_batch_lane

ROOT = Path(__file__).parent.parent.parent
RUBRIC = load_rubric("quality")


@pytest.fixture
def fake() -> Iterator[FakeChatAPI]:
    with FakeChatAPI(api_key="k", models=("gpt-test",), batch_latency=60) as server:
        yield server


def judge_for(fake: FakeChatAPI) -> OpenAIJudge:
    return OpenAIJudge("gpt-test", api_key="k", base_url=fake.base_url + "/v1")


def request(output: str) -> JudgeRequest:
    return render_request(RUBRIC, input="What is the capital of France?", output=output)


def ended(judge: OpenAIJudge, batch_id: str) -> BatchInfo:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = judge.batch_retrieve(batch_id)
        if info.status == "ended":
            return info
        time.sleep(0.02)
    raise AssertionError(f"batch {batch_id} did not end")


def test_a_batch_is_uploaded_created_polled_and_read_back_by_custom_id(fake: FakeChatAPI) -> None:
    judge = judge_for(fake)
    assert isinstance(judge, BatchJudge)
    outputs = {
        "j0": "Paris. [[fake:score=8]]",
        "j1": "Paris. [[fake:batch=expire]]",
        "j2": "Paris. [[fake:500]]",
        "j3": "Paris. [[fake:quota]]",
        "j4": "Paris. [[fake:garbage]]",
    }
    requests = [(cid, judge.batch_params(request(text))) for cid, text in outputs.items()]
    assert requests[0][1]["response_format"]["type"] == "json_schema"
    assert requests[0][1]["model"] == "gpt-test" and "max_completion_tokens" in requests[0][1]
    info = judge.batch_create(requests)
    assert info.status == "in_progress" and info.counts["total"] == 5
    assert fake.batch_request_count == 5 and fake.request_count == 0  # no live call
    assert judge.batch_retrieve(info.id).status == "in_progress"
    assert fake.finish_batches() == 1
    done = ended(judge, info.id)
    assert done.error is None and done.counts["total"] == 5
    items: dict[str, BatchItem] = {item.custom_id: item for item in judge.batch_results(info.id)}
    assert sorted(items) == sorted(outputs)  # every request once, matched by custom_id
    reply = items["j0"].reply
    assert reply is not None and reply.input_tokens > 0 and reply.output_tokens > 0
    assert score_verdict(RUBRIC, parse_verdict(RUBRIC, text=reply.text)).overall == pytest.approx(8.0)
    assert isinstance(items["j1"].error, JudgeTimeout) and "OpenAI batch expired" in str(items["j1"].error)
    assert isinstance(items["j2"].error, JudgeAPIError) and "HTTP 500" in str(items["j2"].error)
    assert isinstance(items["j3"].error, JudgeBillingError)
    garbage = items["j4"].reply
    assert garbage is not None and garbage.text and "score" not in garbage.text
    # once read, the input file (the jobs' texts) is deleted from the account
    assert not any(p == "batch" for p, _ in fake._files.values())


def test_a_canceled_batch_reports_each_request_canceled(fake: FakeChatAPI) -> None:
    judge = judge_for(fake)
    info = judge.batch_create([(f"j{i}", judge.batch_params(request(f"a{i}"))) for i in range(3)])
    assert judge.batch_cancel(info.id).status == "canceling"
    ended(judge, info.id)
    items = list(judge.batch_results(info.id))
    assert len(items) == 3 and all(isinstance(i.error, JudgeCanceled) for i in items)


def test_a_refused_input_file_fails_the_batch_with_the_apis_reason(fake: FakeChatAPI) -> None:
    judge = judge_for(fake)
    one = judge.batch_params(request("a"))
    other = {**one, "model": "gpt-other"}
    info = ended(judge, judge.batch_create([("j0", one), ("j1", other)]).id)
    assert info.error is not None and "mismatched_model" in info.error
    assert list(judge.batch_results(info.id)) == []  # nothing answered: the lane nulls each job


def test_a_batch_the_api_does_not_know_is_model_not_found_and_a_bad_key_auth(fake: FakeChatAPI) -> None:
    from judgeq.errors import JudgeAuthError, JudgeModelNotFound

    with pytest.raises(JudgeModelNotFound):
        judge_for(fake).batch_retrieve("batch_nope")  # the lane gives such a batch up
    wrong = OpenAIJudge("gpt-test", api_key="wrong", base_url=fake.base_url + "/v1")
    with pytest.raises(JudgeAuthError):
        wrong.batch_create([("j0", wrong.batch_params(request("a")))])


@pytest.mark.parametrize(
    ("judges", "message"),
    [
        (["lexical"], "the offline lexical judge have none"),
        (["openai-compatible:m@http://127.0.0.1:1/v1"], "OpenAI-compatible servers have none"),
        (["anthropic:claude-a", "openai:gpt-b"], "a council across providers cannot be graded in batches"),
        (["openai:gpt-a", "openai:gpt-b"], "OpenAI's Batch API takes one model per batch"),
    ],
)
def test_the_plan_refuses_what_no_batch_api_can_take(judges: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_batch_lane([parse_judge_spec(j) for j in judges])


@pytest.mark.parametrize("judges", [["openai:gpt-a"], ["anthropic:a", "anthropic:b"]])
def test_the_plan_takes_one_provider_with_a_batch_api(judges: list[str]) -> None:
    check_batch_lane([parse_judge_spec(j) for j in judges])


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_"))}
    env.update(HOME=str(tmp_path), JUDGEQ_RESULTS_DIR=str(tmp_path / "r"), **extra)
    return env


def test_judgeq_run_with_the_batch_api_and_an_openai_judge(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (ROOT / "examples" / "responses.jsonl").read_text().splitlines()]
    rows[2]["output"] += " [[fake:batch=expire]]"
    rows[4]["output"] += " [[fake:500]]"
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-test": {"input": 2.0, "output": 8.0, "batch_discount": 0.5}}))
    with FakeChatAPI(api_key="sk-oa-SECRET", models=("gpt-test",), batch_latency=0.2) as fake:
        env = cli_env(
            tmp_path, OPENAI_API_KEY="sk-oa-SECRET", OPENAI_BASE_URL=fake.base_url + "/v1",
            JUDGEQ_PRICES=str(prices),
            JUDGEQ_BATCH_POLL_INTERVAL="0.1", JUDGEQ_BATCH_FLUSH_INTERVAL="0.5",
        )  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(jobs), "--rubric", "quality",
             "--judge", "openai:gpt-test", "--batch-api", "--run-id", "ob"],
            capture_output=True, text=True, env=env, timeout=180,
        )  # fmt: skip
        live, batched, batches = fake.request_count, fake.batch_request_count, fake.batches()
    assert proc.returncode == 0, proc.stderr
    assert f"Batch API lane: {len(rows)} jobs" in proc.stdout
    assert live == 0 and batched == len(rows), "every job went through a batch, once"
    assert set(batches.values()) <= {"completed", "expired"}
    report = json.loads((tmp_path / "r" / "ob" / "report.json").read_text())
    counts = report["counts"]
    assert counts["total"] == len(rows) and counts["graded"] == len(rows) - 2
    assert counts["null_by_reason"] == {"timeout": 1, "api_error": 1}
    lane = report["usage"]["batch_api"]
    assert lane["jobs"] == len(rows) and lane["discount_usd"] < 0
    assert report["usage"]["cost_usd"]["total"] == pytest.approx(-lane["discount_usd"], rel=1e-6)
    assert "sk-oa-SECRET" not in json.dumps(report) + proc.stdout + proc.stderr
    (served,) = report["judge"]["served"]
    assert (served["provider"], served["response_format"], served["calls"]) == (
        "openai",
        "json_schema",
        len(rows) - 2,
    )


def test_a_batch_past_the_enqueued_token_limit_fails_for_now(fake: FakeChatAPI) -> None:
    judge = judge_for(fake)
    body = judge.batch_params(request("a0"))
    one = -(-len(json.dumps(body["messages"])) // 4)  # the stand-in's tokens of one request
    fake.enqueued_token_limit = 3 * one  # room for the first batch, not for the second as well
    first = judge.batch_create([(f"j{i}", judge.batch_params(request(f"a{i}"))) for i in range(2)])
    second = ended(
        judge, judge.batch_create([(f"j{i}", judge.batch_params(request(f"b{i}"))) for i in range(9)]).id
    )
    assert second.retryable and second.error is not None and "token_limit_exceeded" in second.error
    assert judge.batch_retrieve(first.id).status == "in_progress"  # the first one is unharmed


def test_answers_without_their_output_file_are_read_again_never_nulls(fake: FakeChatAPI) -> None:
    judge = judge_for(fake)
    info = judge.batch_create([(f"j{i}", judge.batch_params(request(f"a{i}"))) for i in range(3)])
    fake.finish_batches()
    ended(judge, info.id)
    output = fake._batches[info.id]["output_file_id"]
    fake._batches[info.id]["output_file_id"] = None  # the API's glitch: completed, no file yet
    with pytest.raises(JudgeAPIError, match="3 answers but no output file yet"):
        list(judge.batch_results(info.id))
    fake._batches[info.id]["output_file_id"] = output
    assert all(item.reply is not None for item in judge.batch_results(info.id))


def test_the_endpoint_in_provenance_never_holds_a_credential() -> None:
    from judgeq.judges.base import endpoint_of

    assert endpoint_of("https://gw.example.com?api-key=SECRET") == "gw.example.com"
    assert endpoint_of("http://user:pass@127.0.0.1:8080/v1") == "127.0.0.1:8080"
    assert endpoint_of("https://host?key=a@b") == "host"
    assert endpoint_of("https://api.openai.com/v1/") == "api.openai.com"
    assert endpoint_of("http://[::1]:9/v1") == "[::1]:9"
    assert endpoint_of("") is None and endpoint_of("http://h:port/v1") is None
