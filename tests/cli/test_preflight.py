"""The preflight: the Models API proves key and model (no tokens); a model it does not know is
asked of the Messages API (a gateway may not serve the Models API); transient failures are
tried again; anything else is one ConfigError line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from judgeq import ConfigError
from judgeq.errors import JudgeAuthError, JudgeModelNotFound, JudgeOverloaded
from judgeq.judges import JudgeSpec
from judgeq.judges.anthropic import AnthropicJudge
from judgeq.producer.plan import preflight
from judgeq.settings import load_settings

PLAN: Any = SimpleNamespace(judges=[JudgeSpec("anthropic", "claude-x")])


UNKNOWN = False
"""What the Models API answers when it cannot tell (404: it does not know the model; 405: a
gateway that does not serve it)."""


def script(
    monkeypatch: pytest.MonkeyPatch, check: list[Exception | bool | None], ping: list[Exception | bool | None]
) -> list[str]:
    """Script the Models API request and the one-token Messages call under the real ``check``."""
    calls: list[str] = []

    def step(name: str, plan: list[Exception | bool | None]) -> Any:
        def run(self: AnthropicJudge, *args: Any, **kwargs: Any) -> bool:
            calls.append(name)
            outcome = plan.pop(0) if plan else None
            if isinstance(outcome, Exception):
                raise outcome
            return outcome is not UNKNOWN

        return run

    monkeypatch.setattr(AnthropicJudge, "_models_api_knows", step("check", check))
    monkeypatch.setattr(AnthropicJudge, "ping", step("ping", ping))
    return calls


def test_the_models_api_is_enough_when_it_knows_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = script(monkeypatch, [None], [])
    preflight(PLAN, load_settings(anthropic_api_key="k"), sleep=lambda s: None)
    assert calls == ["check"]


def test_a_gateway_without_the_models_api_is_proven_with_one_messages_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = script(monkeypatch, [UNKNOWN], [None])
    preflight(PLAN, load_settings(anthropic_api_key="k"), sleep=lambda s: None)
    assert calls == ["check", "ping"]


def test_an_unknown_model_a_refused_key_and_transient_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(anthropic_api_key="k")
    script(monkeypatch, [UNKNOWN], [JudgeModelNotFound("404 model: claude-x")])
    with pytest.raises(ConfigError, match="judge preflight failed: the judge rejected model 'claude-x'"):
        preflight(PLAN, settings, sleep=lambda s: None)
    calls = script(monkeypatch, [JudgeAuthError("401")], [])
    with pytest.raises(ConfigError, match="the API key was refused"):
        preflight(PLAN, settings, sleep=lambda s: None)
    assert calls == ["check"], "a refused key is not asked again"
    slept: list[float] = []
    calls = script(monkeypatch, [JudgeOverloaded("529", retry_after=3.0), JudgeOverloaded("529"), None], [])
    preflight(PLAN, settings, sleep=slept.append)
    assert calls == ["check"] * 3 and slept == [3.0, 2.0]  # retry-after, then the backoff


def test_no_preflight_for_the_offline_judge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = script(monkeypatch, [], [])
    preflight(
        SimpleNamespace(judges=[JudgeSpec("lexical", "lexical-overlap-v1")]), load_settings(), sleep=print
    )  # type: ignore[arg-type]
    assert calls == []


@pytest.mark.parametrize("models", [("claude-x",), ("claude-y",)], ids=["known", "unknown-model"])
def test_a_gateway_that_serves_only_messages_over_the_real_sdk(models: tuple[str, ...]) -> None:
    # old: the Models API's 405 was a refused model, at the preflight and at a worker's start-up
    from judgeq.testing.fake_anthropic import FakeMessagesAPI
    from workers.health import judge_setup_problem

    with FakeMessagesAPI(api_key="k", models=models, models_api=False) as fake:
        settings = load_settings(
            anthropic_api_key="k", anthropic_base_url=fake.base_url, judge="anthropic:claude-x"
        )
        if "claude-x" in models:
            preflight(PLAN, settings, sleep=lambda s: None)
            assert judge_setup_problem(settings) is None
            assert fake.model_checks == 2 and fake.request_count == 2, (
                "one Models request, one Messages call each"
            )
        else:
            with pytest.raises(ConfigError, match="the judge rejected model 'claude-x'"):
                preflight(PLAN, settings, sleep=lambda s: None)
            assert "model_not_found" in (judge_setup_problem(settings) or "")


@pytest.mark.parametrize("judge", ["openai:gpt-test", "anthropic:claude-test"])
def test_an_unreachable_judge_is_named_by_its_server_never_its_password(judge: str, tmp_path: Path) -> None:
    # (issue 29: "the judge could not be reached" named no server)
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_"))}
    url = "http://ops:s3cret-pw@127.0.0.1:1"
    env.update(OPENAI_API_KEY="k", OPENAI_BASE_URL=url + "/v1", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=url)
    env.update(JUDGEQ_JUDGE_TIMEOUT="2", JUDGEQ_RESULTS_DIR=str(tmp_path))
    batch = str(Path(__file__).parent.parent.parent / "examples" / "responses.jsonl")
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", "run", batch, "--rubric", "quality", "--judge", judge],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("judgeq: error: judge preflight failed: the judge could not be reached")
    assert "server 127.0.0.1:1)" in line and "s3cret" not in proc.stderr
