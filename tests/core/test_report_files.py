"""The report files: the HTML table's texts come from the batch when it is at hand, and an
archive written where the batch is not does not replace a page that showed them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judgeq.grading.result import Result
from judgeq.report.build import build_report, new_aggregator
from judgeq.report.files import write_report_files
from judgeq.report.model import RunReport
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec

TEXT, SOURCE = read_rubric_text("quality")


def run(batch: str) -> tuple[RunSpec, dict, list[Result]]:
    spec = RunSpec(
        run_id="r1",
        rubric_text=TEXT,
        rubric_source=SOURCE,
        judge_provider="lexical",
        judge_model="x",
        batch=batch,
    )
    results = [
        Result(job_id=f"j{i}", index=i, status="graded", overall=7.0, rubric_name="q", rubric_version="1",
               judge_model="x")
        for i in range(3)
    ]  # fmt: skip
    agg = new_aggregator(spec)
    for r in results:
        agg.add(r)
    return spec, build_report(spec, agg, started_at="s", finished_at="f", wall_s=1.0), results


def test_texts_come_from_the_runs_batch_when_it_is_at_hand(tmp_path: Path) -> None:
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        "".join(json.dumps({"id": f"j{i}", "input": f"Q{i}?", "output": f"OUT-{i}"}) + "\n" for i in range(3))
    )
    spec, report, results = run(str(batch))
    paths = write_report_files(tmp_path / "out", report, results, spec=spec)  # no texts given
    page = paths["report.html"].read_text()
    assert "OUT-2" in page and 'data-texts="yes"' in page


def test_an_archive_without_the_batch_keeps_the_page_that_showed_the_texts(tmp_path: Path) -> None:
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        "".join(json.dumps({"id": f"j{i}", "input": f"Q{i}?", "output": f"OUT-{i}"}) + "\n" for i in range(3))
    )
    spec, report, results = run(str(batch))
    write_report_files(tmp_path / "out", report, results, spec=spec)
    batch.unlink()  # the archiving worker is on another machine: the batch is not there
    paths = write_report_files(tmp_path / "out", report, results, spec=spec, compress=True)
    assert "OUT-2" in paths["report.html"].read_text(), "the page with texts is kept"
    assert (
        paths["verdicts.jsonl.gz"].exists() and not (paths["report.json"].parent / "verdicts.jsonl").exists()
    )
    # another report (a re-run into the same folder) is written anew, without texts
    report2 = {**report, "finished_at": "g"}
    page = write_report_files(tmp_path / "out", report2, results, spec=spec)["report.html"].read_text()
    assert "OUT-2" not in page and 'data-texts="no"' in page


@pytest.mark.parametrize("gz", [False, True])
def test_an_interrupted_write_leaves_no_temp_file_and_the_old_file_whole(tmp_path: Path, gz: bool) -> None:
    # (issue 29: Ctrl-C during `judgeq report` left a 28 MB .tmp file beside the report)
    from judgeq.report.files import _atomic_write

    path = tmp_path / "verdicts.jsonl"
    path.write_text("old\n")

    def interrupted(f: Any) -> None:
        f.write("x" * 100_000)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _atomic_write(path, interrupted, gz=gz)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verdicts.jsonl"]
    assert path.read_text() == "old\n"
    _atomic_write(path, lambda f: f.write("new\n"), gz=gz)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verdicts.jsonl"]


def test_a_newer_versions_report_keeps_its_keys_and_an_older_ones_gains_none(tmp_path: Path) -> None:
    """A report another version's worker stored, written here (an archive, ``judgeq wait``):
    report.json keeps every key it has (a newer version's too: an older reader never drops what
    it does not know) and gains none it lacked; report.md reads what this version knows."""
    spec, report, results = run(str(tmp_path / "gone.jsonl"))
    newer = {**report, "from_a_later_version": {"x": 1}, "usage": {**report["usage"], "later": 2}}
    paths = write_report_files(tmp_path / "new", newer, results, spec=spec)
    assert json.loads(paths["report.json"].read_text()) == newer
    assert "Overall" in paths["report.md"].read_text() or "overall" in paths["report.md"].read_text()
    older = {k: v for k, v in report.items() if k not in ("latency_ms", "distributions")}
    paths = write_report_files(tmp_path / "old", older, results, spec=spec)
    assert json.loads(paths["report.json"].read_text()) == older
    # this version's own report is the typed model, serialised, byte for byte
    mine = write_report_files(tmp_path / "mine", report, results, spec=spec)["report.json"].read_text()
    assert mine == json.dumps(RunReport.from_dict(report).to_dict(), indent=2) + "\n"
