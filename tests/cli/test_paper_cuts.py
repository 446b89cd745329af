"""Issue 9.7, CLI paper cuts from the trial (no Redis): a rubric that does not fit the batch's
kind of jobs, the lexical judge's token usage, and what ``status`` shows of a finished run and
of a run whose producer died mid-enqueue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from judgeq import Result
from judgeq.grading.request import JudgeRequest
from judgeq.judges.lexical import LexicalJudge
from judgeq.producer.cli import main
from judgeq.producer.progress import PRODUCER_GONE_AFTER
from judgeq.rubric.model import load_rubric, read_rubric_text
from judgeq.runspec import RunSpec
from judgeq.settings import load_settings
from judgeq.store.base import MemoryStore

ROOT = Path(__file__).parent.parent.parent
RESPONSES = ROOT / "examples" / "responses.jsonl"
QUESTIONS = ROOT / "examples" / "retrieval.jsonl"


def clean_env() -> dict[str, str]:
    """The environment without JUDGEQ_/ANTHROPIC_ settings, read at call time: the autouse
    fixture has set this test's XDG_CACHE_HOME by then."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_"))}


def judgeq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args], capture_output=True, text=True, env=clean_env(), timeout=120
    )


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a refused command (and nothing else on stderr)."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("judgeq: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


# -- 6: a rubric whose kind does not fit the batch is refused before anything runs ------------


def test_quality_on_question_jobs_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    line = error_line(judgeq("run", str(QUESTIONS), "--rubric", "quality", "--out", str(out)))
    assert line == (
        f"judgeq: error: rubric 'quality' grades response jobs (it has no 'retrieval' section), but "
        f"{QUESTIONS} has 24 question jobs: use --rubric retrieval-relevance (or another rubric with "
        "a 'retrieval' section)"
    )
    assert not out.exists()  # nothing graded, nothing written


def test_retrieval_relevance_on_response_jobs_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    line = error_line(judgeq("run", str(RESPONSES), "--rubric", "retrieval-relevance", "--out", str(out)))
    assert "rubric 'retrieval-relevance' grades question jobs (it has a 'retrieval' section)" in line
    assert f"{RESPONSES} has 30 response jobs: use --rubric quality" in line
    assert not out.exists()


@pytest.mark.parametrize("rubric", ["quality", "retrieval-relevance", "helpfulness"])
def test_a_mixed_batch_is_refused_for_every_rubric(tmp_path: Path, rubric: str) -> None:
    batch = tmp_path / "mixed.jsonl"
    batch.write_text(RESPONSES.read_text() + QUESTIONS.read_text())
    line = error_line(judgeq("run", str(batch), "--rubric", rubric, "--dry-run"))
    assert f"rubric '{rubric}' grades " in line
    assert f"{batch} mixes 30 response jobs and 24 question jobs: split the batch by kind" in line
    assert "response jobs with --rubric quality, question jobs with --rubric retrieval-relevance" in line


def test_the_kind_check_counts_only_valid_lines_and_honours_a_custom_retrieval_rubric(tmp_path: Path) -> None:
    # one bad question line skipped: the rest are response jobs, which quality grades
    batch = tmp_path / "b.jsonl"
    batch.write_text(RESPONSES.read_text() + '{"id": "q", "question": "?", "retrieved": "x"}\n')
    proc = judgeq("run", str(batch), "--rubric", "quality", "--skip-invalid", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "dry run: 30 jobs valid (1 rejected)" in proc.stdout
    # a rubric of the user's with a 'retrieval' section grades question jobs
    rubric = tmp_path / "answerable.md"
    rubric.write_text(
        "---\nname: answerable\nversion: 1.0.0\nscale: pass-fail\n"
        "description: Do the chunks answer the question?\nretrieval: {}\n---\n"
        "Pass when the retrieved chunks contain the expected answer.\n"
    )
    proc = judgeq("run", str(QUESTIONS), "--rubric", str(rubric), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    line = error_line(judgeq("run", str(RESPONSES), "--rubric", str(rubric), "--dry-run"))
    assert "rubric 'answerable' grades question jobs" in line


# -- 5: the lexical judge reports no tokens it did not spend ---------------------------------------


def test_the_lexical_judge_reports_zero_tokens() -> None:
    rubric = load_rubric("quality")
    from judgeq.jobs.models import ResponseJob
    from judgeq.pipeline.job import GradingContext

    ctx = GradingContext(rubric=rubric, judge=LexicalJudge(), max_tokens=1024)
    request = ctx.request_for(ResponseJob(id="a", input="How?", output="Like this.", expected_answer="So."))
    assert isinstance(request, JudgeRequest)
    reply = LexicalJudge().complete(request, timeout=1.0)
    assert json.loads(reply.text)["score"] >= 1
    assert (reply.input_tokens, reply.output_tokens) == (0, 0)
    assert (reply.cache_read_input_tokens, reply.cache_creation_input_tokens) == (0, 0)


def test_a_lexical_run_shows_no_invented_tokens_or_cost(tmp_path: Path) -> None:
    proc = judgeq("run", str(RESPONSES), "--rubric", "quality", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "tokens: none (the lexical judge calls no LLM)" in proc.stdout
    (run_dir,) = tmp_path.iterdir()
    usage = json.loads((run_dir / "report.json").read_text())["usage"]
    assert usage["input_tokens"] == usage["output_tokens"] == 0
    assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
    assert usage["estimated_cost_usd"] in (0, None)
    for line in (run_dir / "verdicts.jsonl").read_text().splitlines():
        v = json.loads(line)
        assert v["input_tokens"] == v["output_tokens"] == 0


# -- 3 and 4 through `judgeq status`, on an in-memory store ---------------------------------------


class ListingStore(MemoryStore):
    def runs(self, limit: int = 20) -> list[str]:
        return sorted(self._specs)[:limit]

    def last_progress(self, run_id: str) -> float | None:
        return None


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def add_run(store: MemoryStore, run_id: str, total: int, done: int, **state: Any) -> None:
    text, source = read_rubric_text("quality")
    store.register(
        RunSpec(
            run_id=run_id,
            rubric_text=text,
            rubric_source=source,
            judge_provider="lexical",
            judge_model="x",
            total=total,
        )
    )
    for i in range(done):
        store.store_result(
            run_id,
            Result(
                job_id=f"j{i}",
                index=i,
                status="graded",
                overall=8.0,
                rubric_name="quality",
                rubric_version="1.0.0",
                judge_model="x",
            ),
        )
    store.set_state(run_id, **state)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> ListingStore:
    import judgeq.producer.cli.status as status_cli

    mem = ListingStore()
    monkeypatch.setattr(status_cli, "_store", lambda **_: (load_settings(), mem))
    return mem


def status(*args: str) -> Any:
    result = CliRunner().invoke(main, ["status", *args])
    return result


def test_status_of_a_finished_run_shows_its_final_rate(store: ListingStore) -> None:
    # finished a day ago after 100 s: 50 jobs / 100 s, however long ago that was
    started = time.time() - 86400
    add_run(
        store,
        "done",
        total=50,
        done=50,
        state="finished",
        enqueue="done",
        enqueued=50,
        started_epoch=started,
        finished_at=iso(started + 100),
    )
    result = status("done")
    assert result.exit_code == 0, result.output
    assert "run done: finished" in result.output
    assert "rate     0.5 jobs/s, ETA 0s" in result.output


def test_status_of_a_run_whose_producer_died_says_so(store: ListingStore) -> None:
    long_ago = time.time() - 100 * PRODUCER_GONE_AFTER
    add_run(
        store,
        "dead",
        total=100,
        done=10,
        state="running",
        enqueue="enqueuing",
        enqueued=50,
        started_epoch=long_ago,
        producer_heartbeat=long_ago,
    )
    add_run(
        store,
        "live",
        total=100,
        done=10,
        state="running",
        enqueue="enqueuing",
        enqueued=50,
        started_epoch=long_ago,
        producer_heartbeat=time.time() + 3600,  # beats "in the future": alive whatever the speed
    )
    result = status("dead")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "run dead: stopped while enqueuing (50/100 sent; the producer is gone: re-run the same submit "
        "with --run-id dead to send the rest)"
    )
    assert (
        "enqueued 50/100 (the producer is gone: re-run the same submit with --run-id dead)" in result.output
    )
    live = status("live")
    assert live.output.splitlines()[0] == "run live: enqueuing"
    assert "enqueued 50/100 (enqueuing still under way)" in live.output
    listing = status()
    assert listing.exit_code == 0
    assert "dead  stopped while enqueuing 10/100" in listing.output
    assert "live  enqueuing  10/100" in listing.output


def test_finalize_of_a_run_whose_producer_died_says_what_to_do(store: ListingStore) -> None:
    long_ago = time.time() - 100 * PRODUCER_GONE_AFTER
    add_run(
        store,
        "dead",
        total=100,
        done=10,
        state="running",
        enqueue="enqueuing",
        enqueued=50,
        started_epoch=long_ago,
        producer_heartbeat=long_ago,
    )
    result = CliRunner().invoke(main, ["finalize", "dead"])
    assert result.exit_code == 2
    assert (
        "judgeq: error: run dead stopped while enqueuing (50/100 sent; the producer is gone): re-run "
        "the same submit with --run-id dead to send the rest, or pass --force to record the unsent "
        "jobs as lost"
    ) in result.stderr


def test_status_says_when_the_judges_budget_is_paused_and_for_how_long(
    store: ListingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a run on an Anthropic judge whose server refused calls in numbers and said "wait 540 s"
    import fakeredis

    import judgeq.producer.cli.status as status_cli
    from judgeq.judges import budget_name
    from judgeq.ratelimit import Usage
    from judgeq.ratelimit.redis import RedisBudget

    r = fakeredis.FakeRedis(decode_responses=True)
    monkeypatch.setattr(status_cli, "_budget_client", lambda settings: r)
    monkeypatch.setattr(status_cli, "worker_lines", lambda *a, **k: [])  # (no workers in this store)
    text, source = read_rubric_text("quality")
    store.register(
        RunSpec(
            run_id="waiting",
            rubric_text=text,
            rubric_source=source,
            judge_provider="anthropic",
            judge_model="claude-haiku-4-5",
            total=10,
        )
    )
    store.set_state("waiting", state="running", enqueue="done", enqueued=10, started_epoch=time.time())
    assert "budget " not in status("waiting").output  # no budget yet: nothing to say
    budget = RedisBudget(r, budget_name(load_settings(), "anthropic", "claude-haiku-4-5"))
    grants = [budget.acquire(1, 1) for _ in range(12)]
    for g in grants[:9]:
        budget.settle(Usage(1, 1), Usage(1, 1), ok=True, epoch=g.epoch)
    for g in grants[9:]:
        budget.refused(Usage(1, 1), 540.0, epoch=g.epoch, nth=1)
    result = status("waiting")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.strip().startswith("budget "))
    assert "anthropic:claude-haiku-4-5: every call waits 8m5" in line  # 8m59s, 8m58s: Redis's clock
    assert "said how long to wait" in line


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        # (issue 29: only "For further information visit https://errors.pydantic.dev/...")
        (
            ["--hit-k", "0,-1"],
            {},
            "judgeq: error: --hit-k 0,-1: hit_k must be a non-empty list of positive integers",
        ),
        # (issue 29: accepted: a pass rate of 100% and one of 0%, always)
        (["--thresholds", "-1,50"], {}, "judgeq: error: --thresholds: 50 is outside the scale of rubric"),
        (
            [],
            {"JUDGEQ_THRESHOLDS": "11"},
            "judgeq: error: JUDGEQ_THRESHOLDS: 11 is outside the scale of rubric",
        ),
    ],
)
def test_flags_off_their_range_are_one_line_naming_them(
    args: list[str], env: dict[str, str], line: str
) -> None:
    batch, rubric = (QUESTIONS, "retrieval-relevance") if "--hit-k" in args else (RESPONSES, "quality")
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", "run", str(batch), "--rubric", rubric, *args, "--dry-run"],
        capture_output=True, text=True, env={**clean_env(), **env}, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.startswith(line), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "pydantic" not in proc.stderr


@pytest.mark.parametrize("command", ["run", "submit", "calibrate"])
def test_the_judge_flag_names_every_kind_of_judge(command: str) -> None:
    # (issue 29: --judge's help said `anthropic:MODEL or lexical` only)
    args = ["rubrics", "calibrate", "--help"] if command == "calibrate" else [command, "--help"]
    text = " ".join(CliRunner().invoke(main, args, terminal_width=400).output.split())
    for form in (
        "anthropic:MODEL",
        "openai:MODEL",
        "openai-compatible:MODEL@URL",
        "python:",
        "plugin:NAME",
        "lexical",
    ):
        assert form in text, (command, form)


def test_keep_waiting_without_wait_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    # (issue 29: silently ignored)
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", "submit", str(RESPONSES), "--rubric", "quality", "--keep-waiting",
         "--redis-url", "redis://127.0.0.1:1/0"],
        capture_output=True, text=True, env=clean_env(), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--keep-waiting goes with --wait" in proc.stderr, proc.stderr
    assert "enqueuing" not in proc.stderr and "Traceback" not in proc.stderr


def test_status_says_a_run_waits_for_its_judge_and_that_its_jobs_are_held(
    store: ListingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import judgeq.producer.cli.status as status_cli

    monkeypatch.setattr(status_cli, "worker_lines", lambda *a, **k: [])  # (no workers in this store)
    text, source = read_rubric_text("quality")
    spec = RunSpec(
        run_id="outage", rubric_text=text, rubric_source=source, judge_provider="lexical",
        judge_model="lexical", total=10,
    )  # fmt: skip
    store.register(spec)
    store.set_state("outage", state="running", enqueue="done", enqueued=10, started_epoch=time.time() - 200)
    store.wait_for_judge("outage", "api_error: connection to the judge failed: APIConnectionError")
    store.set_state("outage", waiting_since=repr(time.time() - 96))
    result = status("outage")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "WAITING" in x)
    assert "WAITING for the judge for 1m3" in line and "APIConnectionError" in line
    assert "held, not nulled" in line and "judgeq cancel outage" in line
    assert "ETA – (waiting for the judge)" in result.output
