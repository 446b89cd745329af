"""A judge cascade end to end through ``judgeq run`` (issue 32, points 1 and 3): the calibration
set is graded by every judge first (its own run), the thresholds are fitted on its labels and
stored with the batch's run, the batch is graded with them (the cheap judge keeps what it is sure
of, the strong one the rest, a job neither is sure of is abstained) and the report says so. The
judges are ``python:`` judges whose samples are stated per job; nothing is called over a network.
Bad cascade options are one line each, exit 2, nothing graded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
TIMEOUT = 300

JUDGES = '''
import json
from judgeq import JudgeReply
from judgeq.testing.mock_messages import verdict_for_schema


class Sampled:
    """Says what the job's output asks of it: [easy:pass] is the same verdict every sample;
    [hard:pass] is right only for the strong judge, the weak one wavers; [unsure] wavers for
    both."""

    provider = "python"

    def __init__(self, model, strong):
        self.model, self.strong = model, strong

    def complete(self, request, *, timeout):
        text = request.user
        truth = 9 if ":pass]" in text else 3
        wrong = 3 if truth == 9 else 9
        if "[easy" in text or ("[hard" in text and self.strong):
            say = truth
        elif "[hard" in text:
            say = wrong if request.sample == 0 else truth
        else:  # unsure: every judge wavers
            say = (9, 3, 3)[request.sample % 3]
        out = json.dumps(verdict_for_schema(request.output_schema, say))
        return JudgeReply(text=out, input_tokens=100 if not self.strong else 1000, output_tokens=10)


def weak():
    return Sampled("weak", False)


def strong():
    return Sampled("strong", True)
'''


def job(i: int, tag: str, label: str | None) -> dict[str, object]:
    row: dict[str, object] = {
        "id": f"j{i}",
        "input": "Is it so?",
        "output": f"It is so. {tag}",
        "model": "sys",
    }
    if label is not None:
        row["label"] = label
    return row


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def judgeq(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_", "OPENAI_"))}
    env.update(
        HOME=str(tmp_path),
        JUDGEQ_RESULTS_DIR=str(tmp_path / "r"),
        JUDGEQ_JUDGE_MODULES="cjudges",
        PYTHONPATH=str(tmp_path / "mods"),
    )
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args], capture_output=True, text=True, env=env, timeout=TIMEOUT
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "cjudges.py").write_text(JUDGES)
    calibration = [
        job(i, f"[easy:{'pass' if i % 2 else 'fail'}]", "pass" if i % 2 else "fail") for i in range(40)
    ]
    calibration += [
        job(100 + i, f"[hard:{'pass' if i % 2 else 'fail'}]", "pass" if i % 2 else "fail") for i in range(20)
    ]
    batch = [job(i, f"[easy:{'pass' if i % 2 else 'fail'}]", None) for i in range(20)]
    batch += [
        job(100 + i, f"[hard:{'pass' if i % 2 else 'fail'}]", "pass" if i % 2 else "fail") for i in range(10)
    ]
    batch += [job(200, "[unsure]", None)]
    return {
        "calibration": write(tmp_path / "cal.jsonl", calibration),
        "batch": write(tmp_path / "jobs.jsonl", batch),
    }


CASCADE = "python:cjudges:weak,python:cjudges:strong"


def test_a_cascade_is_calibrated_then_grades_the_batch(tmp_path: Path, files: dict[str, Path]) -> None:
    proc = judgeq(
        tmp_path, "run", str(files["batch"]), "--rubric", "quality", "--cascade", CASCADE,
        "--calibration", str(files["calibration"]), "--agreement", "0.85", "--risk", "0.1", "--run-id", "c1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "cascade calibrated on 60 labelled jobs" in proc.stderr
    assert "cjudges:weak at confidence >= 1.00, cjudges:strong at confidence >= 1.00" in proc.stderr
    # the calibration is a run of its own, every job asked of both judges
    cal = [
        json.loads(x) for x in (tmp_path / "r" / "c1-calibration" / "verdicts.jsonl").read_text().splitlines()
    ]
    assert len(cal) == 60 and all(len(r["cascade"]["stages"]) == 2 for r in cal)
    assert {r["null_reason"] for r in cal} == {"abstained"}
    spec = json.loads((tmp_path / "r" / "c1" / "run.json").read_text())
    assert spec["cascade"]["thresholds"] == [1.0, 1.0] and spec["cascade"]["calibrated"] == 60
    assert spec["cascade"]["calibration_run"] == "c1-calibration"
    report = json.loads((tmp_path / "r" / "c1" / "report.json").read_text())
    section = report["cascade"]
    assert [s["answered"] for s in section["stages"]] == [20, 10]
    assert [s["asked"] for s in section["stages"]] == [31, 11]
    assert section["abstained"] == 1 and report["counts"]["null_by_reason"] == {"abstained": 1}
    assert section["kept"] == 30 and section["coverage"] == pytest.approx(100 * 30 / 31, abs=0.01)
    assert section["observed"] == {
        "labelled": 10,
        "agreement": 100.0,
        "interval": section["observed"]["interval"],
    }
    verdicts = {
        r["job_id"]: r
        for r in map(json.loads, (tmp_path / "r" / "c1" / "verdicts.jsonl").read_text().splitlines())
    }
    assert verdicts["j1"]["judge_model"] == "cjudges:weak" and verdicts["j1"]["passed"] is True
    assert verdicts["j101"]["judge_model"] == "cjudges:strong" and verdicts["j101"]["passed"] is True
    kept = verdicts["j101"]["cascade"]
    assert kept["stage"] == 1 and kept["stages"][0]["confidence"] < kept["stages"][0]["threshold"]
    assert verdicts["j200"]["status"] == "null" and verdicts["j200"]["cascade"]["stage"] is None
    md = (tmp_path / "r" / "c1" / "report.md").read_text()
    assert "## Cascade" in md and "abstained" in md


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--cascade", "python:cjudges:weak", "--calibration", "CAL"], "give two judges or more"),
        (["--cascade", "python:cjudges:weak,python:cjudges:weak", "--calibration", "CAL"], "given twice"),
        (["--cascade", CASCADE], "--cascade needs --calibration FILE"),
        (["--calibration", "CAL"], "--calibration goes with --cascade"),
        (["--samples", "3"], "--samples goes with --cascade"),
        (["--cascade", CASCADE, "--calibration", "CAL", "--judge", "lexical"], "--judge does not go with it"),
        (
            ["--cascade", CASCADE, "--calibration", "CAL", "--agreement", "1.2"],
            "--agreement: 1.2 must be between 0 and 1",
        ),
        (
            ["--cascade", CASCADE, "--calibration", "CAL", "--samples", "1"],
            "--samples: 1 must be between 2 and 16",
        ),
        (["--cascade", CASCADE, "--calibration", "CAL", "--batch-api"], "--batch-api with --cascade"),
        (
            ["--cascade", CASCADE, "--calibration", "UNLABELLED"],
            "unlabelled.jsonl:2: label: a calibration job needs",
        ),
    ],
)
def test_bad_cascade_options_are_one_line_and_grade_nothing(
    tmp_path: Path, files: dict[str, Path], args: list[str], says: str
) -> None:
    unlabelled = write(
        tmp_path / "unlabelled.jsonl", [job(1, "[easy:pass]", "pass"), job(2, "[easy:pass]", None)]
    )
    args = [
        str(files["calibration"]) if a == "CAL" else str(unlabelled) if a == "UNLABELLED" else a for a in args
    ]
    proc = judgeq(tmp_path, "run", str(files["batch"]), "--rubric", "quality", *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
