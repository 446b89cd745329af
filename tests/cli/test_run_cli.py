"""``judgeq run`` (embedded mode) through the real console script, offline (lexical judge)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent


def clean_env() -> dict[str, str]:
    """The environment without JUDGEQ_/ANTHROPIC_ settings, read at call time: the autouse
    fixture has set this test's XDG_CACHE_HOME by then."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_"))}


def judgeq(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args],
        capture_output=True,
        text=True,
        env={**clean_env(), **env},
        timeout=120,
        cwd=cwd,
    )


def test_quick_start_grades_the_example_without_key_or_redis(tmp_path: Path) -> None:
    out = judgeq(
        "run", str(ROOT / "examples" / "responses.jsonl"), "--rubric", "quality", "--out", str(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    assert "uses the offline 'lexical' judge" in out.stderr and "ANTHROPIC_API_KEY" in out.stderr
    assert "30/30 graded" in out.stdout
    (run_dir,) = tmp_path.iterdir()
    report = json.loads((run_dir / "report.json").read_text())
    assert report["counts"]["total"] == 30 and report["judge"]["provider"] == "lexical"
    assert set(report["by_model"]) == {"assistant-v1", "assistant-v2"}
    assert len((run_dir / "verdicts.jsonl").read_text().splitlines()) == 30
    assert "# judgeq report" in (run_dir / "report.md").read_text()


def test_retrieval_example_with_flags(tmp_path: Path) -> None:
    out = judgeq(
        "run",
        str(ROOT / "examples" / "retrieval.jsonl"),
        "--rubric",
        "retrieval-relevance",
        "--out",
        str(tmp_path),
        "--hit-k",
        "1,2,3",
        "--position-weights",
        "1=1.0,2-3=0.5",
        "--default-weight",
        "0.25",
    )
    assert out.returncode == 0, out.stderr
    (run_dir,) = tmp_path.iterdir()
    rt = json.loads((run_dir / "report.json").read_text())["retrieval"]
    assert set(rt["hit_at_k_rates"]) == {"1", "2", "3"}
    assert rt["questions"] == 24 and rt["accuracy"] == 79.17  # 19 of 24 needles retrieved
    for line in (run_dir / "verdicts.jsonl").read_text().splitlines():
        v = json.loads(line)
        weight = 1.0 if v["rank"] == 1 else 0.5 if v["rank"] in (2, 3) else 0.25
        assert v["total_score"] == round(v["llm_grade"] * weight, 2)


def test_bad_retrieval_flags() -> None:
    batch = str(ROOT / "examples" / "retrieval.jsonl")
    out = judgeq("run", batch, "--rubric", "retrieval-relevance", "--hit-k", "1,x")
    assert out.returncode == 2 and "--hit-k: '1,x' is not a list of whole numbers" in out.stderr
    out = judgeq("run", batch, "--rubric", "retrieval-relevance", "--position-weights", "1=x")
    assert out.returncode == 2 and "weight 'x' of rank band '1' is not a number" in out.stderr
    out = judgeq("run", batch, "--rubric", "retrieval-relevance", "--hit-k", "0")
    assert out.returncode == 2
    assert "--hit-k 0: hit_k must be a non-empty list of positive integers" in out.stderr


def test_dry_run_calls_no_judge(tmp_path: Path) -> None:
    out = judgeq(
        "run",
        str(ROOT / "examples" / "responses.jsonl"),
        "--rubric",
        "quality",
        "--judge",
        "anthropic:claude-sonnet-4-5",
        "--dry-run",
        "--out",
        str(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    assert "dry run: 30 jobs valid (0 rejected)" in out.stdout
    assert "estimated cost for claude-sonnet-4-5 (prices of " in out.stdout
    lanes = [line.split() for line in out.stdout.splitlines() if line.strip().startswith(("live", "batch"))]
    assert [row[:2] for row in lanes] == [["live", "no"], ["live", "yes"], ["batch", "no"], ["batch", "yes"]]
    totals = {(r[0], r[1]): float(r[2].lstrip("$")) for r in lanes}
    assert totals[("batch", "no")] == pytest.approx(totals[("live", "no")] / 2, abs=1e-4)  # the discount
    assert totals[("live", "yes")] < totals[("live", "no")]  # the prefix is read from the cache
    assert not any(tmp_path.iterdir())  # nothing graded, nothing written


def test_dry_run_with_the_lexical_judge_says_it_spends_nothing(tmp_path: Path) -> None:
    out = judgeq("run", str(ROOT / "examples" / "responses.jsonl"), "--rubric", "quality", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "dry run: 30 jobs valid (0 rejected)" in out.stdout and "judge lexical" in out.stdout
    assert "the lexical judge calls no LLM: no tokens, no cost" in out.stdout
    assert "estimated cost" not in out.stdout


def test_runs_lists_embedded_run_folders_even_without_redis(tmp_path: Path) -> None:
    first = judgeq(
        "run", str(ROOT / "examples" / "responses.jsonl"), "--rubric", "quality", "--out", str(tmp_path)
    )
    second = judgeq(
        "run",
        str(ROOT / "examples" / "retrieval.jsonl"),
        "--rubric",
        "retrieval-relevance",
        "--out",
        str(tmp_path),
    )
    assert first.returncode == second.returncode == 0
    out = judgeq("runs", "--out", str(tmp_path), JUDGEQ_REDIS_URL="redis://127.0.0.1:1/0")  # nothing there
    assert out.returncode == 0, out.stderr
    assert "Redis not reachable" in out.stderr and "listing results folders only" in out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
    assert {p.name for p in tmp_path.iterdir()} == set(rows)
    by_rubric = {row[4]: row for row in rows.values()}
    assert by_rubric["quality"][1:4] == ["folder", "finished", "30/30"]
    assert by_rubric["retrieval-relevance"][3] == "24/24"
    # a report damaged after the run (a part missing, another of the wrong type) is still listed,
    # as far as it reads; one that is not JSON at all (a write cut short) is not a run's report
    folder = next(p for p in tmp_path.iterdir() if rows[p.name][4] == "quality")
    doc = json.loads((folder / "report.json").read_text())
    del doc["usage"], doc["started_at"]
    doc["rubric"] = "quality"
    (folder / "report.json").write_text(json.dumps(doc))
    (tmp_path / "cut-short").mkdir()
    (tmp_path / "cut-short" / "report.json").write_text('{"run_id": "cut')
    out = judgeq("runs", "--out", str(tmp_path), JUDGEQ_REDIS_URL="redis://127.0.0.1:1/0")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
    assert "cut-short" not in rows and "None" not in out.stdout
    assert rows[folder.name][1:5] == ["folder", "report", "damaged", "30/30"], rows[folder.name]
