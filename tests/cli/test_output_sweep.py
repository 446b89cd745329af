"""Nothing a user reads prints ``None``, ``nan``, a doubled ``%`` or a Python exception name for
an expected condition (issue 20): the CLI's summaries and report.md of every kind of run
(response, question, pair, council, re-scored, canceled, paused), graded through the real CLI
against the stand-in judge server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from judgeq.testing import FakeMessagesAPI

ROOT = Path(__file__).parent.parent.parent
RESPONSES = ROOT / "examples" / "responses.jsonl"
QUESTIONS = ROOT / "examples" / "retrieval.jsonl"
PRICE = {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.5, "batch_discount": 0.5}

BAD = re.compile(
    r"\bNone\b|\bnan\b|\bNaN\b|%%|Traceback|\b[A-Z][A-Za-z]*(?:Error|Exception)\b|\bp = <|\bp = 0\b"
)


def bad_words(text: str) -> list[str]:
    return sorted({m.group(0) for m in BAD.finditer(text)})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], FakeMessagesAPI]]:
    root = tmp_path_factory.mktemp("sweep")
    prices = root / "prices.json"
    prices.write_text(json.dumps({"claude-test": PRICE, "claude-b": PRICE}))
    pairs = root / "pairs.jsonl"
    rows = [
        {
            "id": f"p{i}",
            "input": f"question {i}",
            "output_a": f"answer a {i}",
            "output_b": f"a longer answer b {i}",
            "model_a": "m1",
            "model_b": "m2",
            "label": ["A", "B", "tie"][i % 3],
        }
        for i in range(12)
    ]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeMessagesAPI(api_key="k") as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_"))}
        env.update(
            ANTHROPIC_API_KEY="k",
            ANTHROPIC_BASE_URL=fake.base_url,
            JUDGEQ_RESULTS_DIR=str(root / "r"),
            JUDGEQ_PRICES=str(prices),
            HOME=str(root),
        )
        yield root, env, fake


def judgeq(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args], capture_output=True, text=True, env=env, timeout=180
    )


def report_md(root: Path, run_id: str) -> str:
    return (root / "r" / run_id / "report.md").read_text()


RUNS = {
    "response": (RESPONSES, "quality", ["--judge", "anthropic:claude-test"]),
    "question": (QUESTIONS, "retrieval-relevance", ["--judge", "anthropic:claude-test"]),
    "pair": (None, "pairwise", ["--judge", "anthropic:claude-test"]),
    "council": (RESPONSES, "quality", ["--judge", "anthropic:claude-test", "--judge", "anthropic:claude-b"]),
}


@pytest.mark.parametrize("kind", list(RUNS))
def test_a_finished_run_prints_no_none_nan_or_exception(
    world: tuple[Path, dict[str, str], FakeMessagesAPI], kind: str
) -> None:
    root, env, _ = world
    jobs, rubric, judge = RUNS[kind]
    path = jobs or root / "pairs.jsonl"
    proc = judgeq(env, "run", str(path), "--rubric", rubric, *judge, "--run-id", kind)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert bad_words(out) == [], out
    assert bad_words(report_md(root, kind)) == []
    if kind == "pair":  # the headline agreement is the one comparable to published benchmarks
        assert re.search(r"pairs accuracy \d+\.\d% \(ties as half", out), out
        assert "win rate of m1 over m2" in out and "overall: mean" not in out
    if kind == "council":
        assert "council of 2 judges: anthropic:claude-test, anthropic:claude-b" in out
        assert "- Judges (a council, mean): anthropic:claude-test, anthropic:claude-b" in report_md(
            root, kind
        )
    if kind == "question":
        assert "pass rates (of all questions, on the LLM grade)" in out and "total score >= 7:" in out
        assert "pass@7" not in out


def test_a_rescored_run_prints_no_none(world: tuple[Path, dict[str, str], FakeMessagesAPI]) -> None:
    root, env, _ = world
    if not (root / "r" / "response").exists():
        assert judgeq(env, "run", str(RESPONSES), "--rubric", "quality", "--judge", "anthropic:claude-test",
                      "--run-id", "response").returncode == 0  # fmt: skip
    weights = "accuracy=0.6,relevance=0.1,completeness=0.1,conciseness=0.1,clarity=0.1"
    proc = judgeq(env, "rescore", "response", "--weights", weights, "--run-id", "rescored")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert bad_words(out) == [], out
    assert "latency – (no judge call was made)" in out
    assert bad_words(report_md(root, "rescored")) == []


def test_a_paused_run_prints_one_clear_line(world: tuple[Path, dict[str, str], FakeMessagesAPI]) -> None:
    _, env, _ = world
    proc = judgeq(
        env, "run", str(RESPONSES), "--rubric", "quality", "--judge", "anthropic:claude-test",
        "--run-id", "paused", "--max-cost", "0.001", "--no-cache",
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr  # paused for a person: its own exit code
    assert "max_cost:" in proc.stderr and bad_words(proc.stdout + proc.stderr) == []


def test_an_interrupted_run_marks_every_report_file_partial(
    world: tuple[Path, dict[str, str], FakeMessagesAPI],
) -> None:
    root, env, fake = world
    fake.latency = 0.5
    before = fake.request_count
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "judgeq", "run", str(RESPONSES), "--rubric", "quality", "--judge",
             "anthropic:claude-test", "--run-id", "canceled", "--no-cache", "-c", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a foreground job
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while fake.request_count < before + 2 and time.monotonic() < deadline:  # grading has begun
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        fake.latency = 0.0
    assert proc.returncode == 130, err
    assert bad_words(out + err) == [], out + err
    md = report_md(root, "canceled")
    assert md.startswith("# judgeq report: canceled (PARTIAL)") and "**Partial report**" in md
    assert json.loads((root / "r" / "canceled" / "report.json").read_text())["partial"] is True
    assert "Partial report" in (root / "r" / "canceled" / "report.html").read_text()
    assert bad_words(md) == []
