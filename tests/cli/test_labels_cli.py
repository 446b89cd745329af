"""``judgeq labels export`` and ``judgeq labels import`` through the real console script, on a
finished offline run (the lexical judge): jobs put before people, their labels brought back
into the run's agreement with no judge call, and a bad file refused with nothing written."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judgeq.report.labels import COLUMNS

ROOT = Path(__file__).parent.parent.parent


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "JUDGEQ_"))}


LABELS = ["pass", "fail", "8", "2", "fail"]


def judgeq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args], capture_output=True, text=True, env=clean_env(), timeout=120
    )


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, str]:
    """A finished run of the example jobs (30 responses, unlabelled) in ``tmp_path/out``."""
    out = tmp_path / "out"
    done = judgeq("run", str(ROOT / "examples" / "responses.jsonl"), "--rubric", "quality", "--out", str(out))
    assert done.returncode == 0, done.stderr
    (folder,) = out.iterdir()
    return out, folder.name


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_run_goes_before_people_and_their_labels_come_back(run: tuple[Path, str], tmp_path: Path) -> None:
    out, run_id = run
    sheet = tmp_path / "to-label.csv"
    done = judgeq("labels", "export", run_id, "--out", str(out), "-o", str(sheet), "--sample", "5")
    assert done.returncode == 0, done.stderr
    assert "5 jobs to label (0 without a verdict or with a doubted one, 5 drawn at random)" in done.stderr
    rows = read_rows(sheet)
    assert len(rows) == 5 and list(rows[0]) == list(COLUMNS)
    assert all(r["input"] and r["output"] and r["reasoning"] and r["label"] == "" for r in rows)
    for row, label in zip(rows, LABELS, strict=True):
        row["label"] = label
    with sheet.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    before = json.loads((out / run_id / "report.json").read_text())
    assert before.get("agreement") is None

    done = judgeq("labels", "import", run_id, str(sheet), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "5 labels imported" in done.stderr and "no judge call" in done.stderr
    assert "agreement with 5 labels" in done.stdout
    report = json.loads((out / run_id / "report.json").read_text())
    assert report["labels"]["given"] == 5 and report["labels"]["changed"] == 5
    assert report["agreement"]["labelled"] == 5 and report["agreement"]["pass_fail"]["n"] == 5
    assert report["overall"] == before["overall"] and report["usage"] == before["usage"]
    assert report["started_at"] == before["started_at"]
    labelled = {
        line["job_id"]: line["label"]
        for line in map(json.loads, (out / run_id / "verdicts.jsonl").read_text().splitlines())
        if line.get("label") is not None
    }
    assert labelled == {
        r["job_id"]: (float(r["label"]) if r["label"][0].isdigit() else r["label"]) for r in rows
    }
    markdown = (out / run_id / "report.md").read_text()
    assert "- Labels: 5 from `to-label.csv`" in markdown
    # the pass rate from labels and verdicts: 2 of the 5 labels pass (pass, and 8 >= 7)
    rate = report["agreement"]["estimates"]["pass_rate"]
    assert rate["labelled"] == 5 and rate["n"] == 30 and rate["human_only"]["value"] == 40.0
    assert (
        rate["ppi"] is not None and rate["ppi"]["ci95"][0] <= rate["ppi"]["value"] <= rate["ppi"]["ci95"][1]
    )
    assert "### Estimates from labels and verdicts together" in markdown
    assert not any(word in markdown for word in ("None", "nan", "NaN"))
    assert "pass rate from labels and verdicts (PPI++)" in done.stdout

    again = judgeq("labels", "import", run_id, str(sheet), "--out", str(out))
    assert again.returncode == 0 and "(0 new or changed)" in again.stderr
    relabel = judgeq("labels", "export", run_id, "--out", str(out), "--sample", "30")
    kept = {r["job_id"]: r["label"] for r in csv.DictReader(relabel.stdout.splitlines())}
    assert len(kept) == 30 and {kept[r["job_id"]] for r in rows} == {"pass", "fail", "8", "2"}


def test_a_bad_labels_file_is_refused_by_line_and_nothing_is_written(
    run: tuple[Path, str], tmp_path: Path
) -> None:
    out, run_id = run
    files = {p.name: p.read_bytes() for p in (out / run_id).iterdir()}
    bad = tmp_path / "bad.jsonl"
    lines = [
        {"job_id": "r-001", "label": "pass"},
        {"job_id": "r-999", "label": "pass"},
        {"job_id": "r-002", "label": 42},
    ]
    bad.write_text("".join(json.dumps(x) + "\n" for x in lines))
    done = judgeq("labels", "import", run_id, str(bad), "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{bad}:2: job_id: run {run_id} has no job 'r-999'" in done.stderr
    assert f"{bad}:3: label: 42 is outside the rubric's scale 1-10" in done.stderr
    assert {p.name: p.read_bytes() for p in (out / run_id).iterdir()} == files
    empty = tmp_path / "empty.csv"
    empty.write_text("job_id,label\nr-001,\n")
    done = judgeq("labels", "import", run_id, str(empty), "--out", str(out))
    assert done.returncode == 2 and "no row has a label" in done.stderr
    unknown = judgeq(
        "labels", "export", "no-such-run", "--out", str(out), "--redis-url", "redis://127.0.0.1:9/0"
    )
    assert unknown.returncode == 2 and "no-such-run" in unknown.stderr and "Traceback" not in unknown.stderr


def test_a_run_with_lost_results_keeps_them_as_nulls_when_labels_come_back(
    run: tuple[Path, str], tmp_path: Path
) -> None:
    """Two results lost (their lines gone from verdicts.jsonl): the labelled report still counts
    all 30 jobs, the two as nulls `lost`, as the run's finalize does; verdicts.jsonl keeps what
    was there."""
    out, run_id = run
    verdicts = out / run_id / "verdicts.jsonl"
    lines = verdicts.read_text().splitlines()
    verdicts.write_text("\n".join(lines[2:]) + "\n")
    labels = tmp_path / "l.csv"
    labels.write_text("job_id,label\nr-010,pass\nr-011,fail\n")
    done = judgeq("labels", "import", run_id, str(labels), "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads((out / run_id / "report.json").read_text())
    assert report["counts"]["total"] == 30 and report["counts"]["null_by_reason"] == {"lost": 2}
    assert len(verdicts.read_text().splitlines()) == 28
