"""Claude where enterprises reach it (issue 31, point 3): ``bedrock:MODEL`` and ``vertex:MODEL``
through the Anthropic SDK's own Bedrock and Vertex clients against the Messages stand-in, which
serves the clouds' paths (the model in the path, the API version in the body) and checks their
credentials: a SigV4 signature naming the AWS access key (or a Bedrock API key), a Google access
token. The shared cases are the contract suite's (tests/core/test_provider_contract.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judgeq.errors import JudgeAuthError, JudgeError
from judgeq.grading.request import render_request
from judgeq.judges import budget_name, parse_judge_spec
from judgeq.judges.anthropic import BedrockJudge, VertexJudge
from judgeq.judges.providers import provider
from judgeq.rubric.model import load_rubric
from judgeq.settings import load_settings
from judgeq.testing.fake_anthropic import FakeMessagesAPI

ROOT = Path(__file__).resolve().parents[2]
RUBRIC = load_rubric("quality")
MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"
CLOUD = (
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_PROJECT_ID",
    "CLOUD_ML_REGION", "ANTHROPIC_VERTEX_BASE_URL", "ANTHROPIC_VERTEX_ACCESS_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _no_cloud(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in CLOUD:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws or gcloud files of this machine's
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never the instance metadata service


def request() -> object:
    return render_request(RUBRIC, input="What is the capital of France?", output="Paris. [[fake:score=6]]")


def test_bedrock_signs_with_sigv4_and_puts_the_model_in_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeMessagesAPI(api_key="unused") as fake:
        monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", fake.base_url)
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", fake.aws_access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-never-sent")
        reply = BedrockJudge(MODEL).complete(request(), timeout=5)  # type: ignore[arg-type]
        body = fake.requests[-1]
        assert body["model"] == MODEL and json.loads(reply.text)["score"] == 6
        BedrockJudge(MODEL).check(timeout=5)  # no Models API there: one tiny Messages call
    assert all("secret-never-sent" not in json.dumps(b) for b in fake.requests)
    # (a refused credential is the contract suite's case, with a Bedrock API key: botocore keeps
    # the credentials it resolved for the process)


def test_vertex_takes_a_google_access_token(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeMessagesAPI(api_key="unused") as fake:
        monkeypatch.setenv("ANTHROPIC_VERTEX_BASE_URL", fake.base_url + "/v1")
        monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "judgeq-test")
        monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
        monkeypatch.setenv("ANTHROPIC_VERTEX_ACCESS_TOKEN", fake.google_token)
        reply = VertexJudge("claude-haiku-4-5@20251001").complete(request(), timeout=5)  # type: ignore[arg-type]
        assert (
            fake.requests[-1]["model"] == "claude-haiku-4-5@20251001" and json.loads(reply.text)["score"] == 6
        )
        monkeypatch.setenv("ANTHROPIC_VERTEX_ACCESS_TOKEN", "ya29.expired")
        with pytest.raises(JudgeAuthError):
            VertexJudge("claude-haiku-4-5@20251001").complete(request(), timeout=5)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["bedrock", "vertex"])
def test_a_cloud_without_its_set_up_says_so_before_any_call(name: str) -> None:
    api = provider(name)
    assert not api.has_credentials(load_settings()) and api.family == "anthropic"
    assert api.batch_api is None  # the SDK's cloud clients refuse Message Batches
    judge = api.build("claude-x", None)  # type: ignore[arg-type]
    with pytest.raises(JudgeError) as caught:
        judge.complete(request(), timeout=5)  # type: ignore[arg-type]
    assert caught.value.reason == "auth_error" and str(api.key_variable) in str(caught.value)


def test_a_clouds_budget_is_its_account_or_project_and_region(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDA")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    east = budget_name(settings, "bedrock", MODEL)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert budget_name(settings, "bedrock", MODEL) != east and "AKIDA" not in east
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "p")
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    assert not provider("vertex").has_credentials(settings)  # no token, no default credentials file
    monkeypatch.setenv("ANTHROPIC_VERTEX_ACCESS_TOKEN", "ya29.x")
    assert provider("vertex").has_credentials(settings)
    assert str(parse_judge_spec("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")) == (
        "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    )


def test_judgeq_run_grades_with_claude_on_bedrock(tmp_path: Path) -> None:
    with FakeMessagesAPI(api_key="unused") as fake:
        host = fake.base_url.split("://")[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "AWS_"))}
        env.update(
            HOME=str(tmp_path), JUDGEQ_RESULTS_DIR=str(tmp_path / "r"), AWS_EC2_METADATA_DISABLED="true",
            AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID=fake.aws_access_key, AWS_SECRET_ACCESS_KEY="s",
            ANTHROPIC_BEDROCK_BASE_URL=fake.base_url,
        )  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "judgeq", "run", str(ROOT / "examples" / "responses.jsonl"),
             "--rubric", "quality", "--judge", f"bedrock:{MODEL}", "--run-id", "bd"],
            capture_output=True, text=True, env=env, timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r" / "bd" / "report.json").read_text())
    assert report["judge"]["provider"] == "bedrock" and report["counts"]["graded"] == 30
    (served,) = report["judge"]["served"]
    assert served["provider"] == "bedrock" and served["endpoint"] == host
