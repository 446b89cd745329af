"""People in the loop (issue 32, point 5): which jobs a labelling file holds, and labels read
back with every problem named (judgeq/report/labels.py; the commands: tests/cli/test_labels_cli.py)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from judgeq.errors import ConfigError
from judgeq.grading.result import Result
from judgeq.jobs.kinds import make_result
from judgeq.report.labels import COLUMNS, RANDOM, apply_labels, labelling_rows, read_labels, why_labelled
from judgeq.rubric.model import load_rubric


def result(i: int, **fields: Any) -> Result:
    base: dict[str, Any] = {
        "job_id": f"j{i}",
        "index": i,
        "status": "graded",
        "overall": 5.0,
        "passed": False,
        "rubric_name": "quality",
        "rubric_version": "1.0.0",
        "judge_model": "m",
    }
    return make_result(**{**base, **fields})


def test_jobs_without_a_verdict_or_with_a_doubted_one_come_first_then_the_random_draw() -> None:
    results = [
        result(0),
        result(1, status="null", null_reason="timeout", overall=None, passed=None),
        result(2, flags=["judges_disagree"]),
        result(3, flags=["clamped"]),  # a flag that doubts nothing
        *(result(i) for i in range(4, 40)),
    ]
    rows = labelling_rows(results, sample=5, seed=1)
    assert [r["why"] for r in rows[:2]] == ["no verdict: timeout", "judges disagree"]
    assert [r["job_id"] for r in rows[:2]] == ["j1", "j2"]
    drawn = rows[2:]
    assert len(drawn) == 5 and {r["why"] for r in drawn} == {RANDOM}
    assert [int(r["job_id"][1:]) for r in drawn] == sorted(int(r["job_id"][1:]) for r in drawn)
    assert all(list(r) == list(COLUMNS) for r in rows)
    assert labelling_rows(results, sample=5, seed=1) == rows  # the seed repeats the draw
    assert why_labelled(result(5, flags=["position_inconsistent"])) == "verdict changed with the order"


def test_the_random_draw_is_uniform() -> None:
    """Each of 20 undoubted jobs is drawn in about sample/n of the draws (reservoir sampling),
    over 4,000 seeds: a draw that favoured the first or last jobs fails."""
    results = [result(i) for i in range(20)]
    counts: Counter[str] = Counter()
    for seed in range(4000):
        counts.update(r["job_id"] for r in labelling_rows(results, sample=5, seed=seed))
    shares = [counts[f"j{i}"] / 4000 for i in range(20)]
    assert all(0.21 < s < 0.29 for s in shares), shares


def test_a_sample_larger_than_the_run_takes_every_job_once() -> None:
    rows = labelling_rows([result(i) for i in range(3)], sample=10)
    assert [r["job_id"] for r in rows] == ["j0", "j1", "j2"]


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(COLUMNS))
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in COLUMNS})
    return path


RUBRIC = load_rubric("quality")
IDS = [f"j{i}" for i in range(5)]


def test_labels_read_back_from_csv_and_jsonl(tmp_path: Path) -> None:
    csv_file = write_csv(
        tmp_path / "l.csv",
        [
            {"job_id": "j0", "label": "PASS"},
            {"job_id": "j1", "label": "7", "input": 'a "quoted",\nmulti-line text'},
            {"job_id": "j2", "label": ""},  # not labelled
        ],
    )
    assert read_labels(csv_file, RUBRIC, IDS, "r") == {"j0": "pass", "j1": 7.0}
    jsonl = tmp_path / "l.jsonl"
    jsonl.write_text(
        json.dumps({"job_id": "j3", "label": "fail"}) + "\n\n" + json.dumps({"job_id": "j4"}) + "\n"
    )
    assert read_labels(jsonl, RUBRIC, IDS, "r") == {"j3": "fail"}


def test_every_problem_is_named_by_line_and_field_and_none_is_applied(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "bad.csv",
        [
            {"job_id": "j0", "label": "pass"},
            {"job_id": "j1", "label": "banana"},
            {"job_id": "nope", "label": "pass", "input": "two\nlines"},
            {"job_id": "j2", "label": "b"},
            {"job_id": "j3", "label": "11"},
            {"job_id": "j0", "label": "fail"},
            {"job_id": "", "label": "pass"},
        ],
    )
    with pytest.raises(ConfigError) as caught:
        read_labels(path, RUBRIC, IDS, "run-x")
    lines = str(caught.value).splitlines()
    assert lines[0] == "no label imported:"
    assert lines[1:] == [
        f"{path}:3: label: must be a number, pass, fail, a, b or tie; got 'banana'",
        f"{path}:4: job_id: run run-x has no job 'nope'",
        f"{path}:6: label: 'b' is a pair label; rubric 'quality' takes a score or pass/fail",
        f"{path}:7: label: 11 is outside the rubric's scale 1-10",
        f"{path}:8: label: job 'j0' was labelled differently on line 2",
        f"{path}:9: job_id: missing",
    ]


def test_a_file_without_the_columns_or_not_there_is_said_so(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("id,grade\nj0,pass\n")
    with pytest.raises(ConfigError, match="no job_id and no label column"):
        read_labels(other, RUBRIC, IDS, "r")
    with pytest.raises(ConfigError, match="no such file"):
        read_labels(tmp_path / "absent.csv", RUBRIC, IDS, "r")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"job_id": "j0", "label": "pass"}\n{not json\n')
    with pytest.raises(ConfigError, match=r"broken.jsonl:2: not valid JSON"):
        read_labels(broken, RUBRIC, IDS, "r")


def test_pair_labels_fit_a_pairwise_rubric_only(tmp_path: Path) -> None:
    pairwise = load_rubric("pairwise")
    path = write_csv(tmp_path / "p.csv", [{"job_id": "j0", "label": "A"}, {"job_id": "j1", "label": "tie"}])
    assert read_labels(path, pairwise, IDS, "r") == {"j0": "a", "j1": "tie"}
    with pytest.raises(ConfigError, match="pair label"):
        read_labels(path, RUBRIC, IDS, "r")


def test_applying_labels_changes_only_the_labelled_jobs() -> None:
    results = [result(0, label="fail"), result(1), result(2, label=3.0)]
    out = list(apply_labels(results, {"j0": "pass", "j1": 8.0}))
    assert [r.label for r in out] == ["pass", 8.0, 3.0]
    assert out[2] is results[2]


def test_the_report_estimates_the_pass_rate_from_labels_and_verdicts_by_stratum() -> None:
    """Through the report's accumulator: graded jobs only (a null has no judge figure), the
    doubted jobs a stratum of their own, the figures those of judgeq.figures.ppi on the same
    numbers, per model too; no estimate without labels or for pair labels."""
    from judgeq.figures.ppi import Stratum, stratified
    from judgeq.report.validity import EstimateStats

    stats = EstimateStats(threshold=7.0, numeric=True)
    strata = (Stratum(), Stratum())
    results = []
    for i in range(60):
        doubted = i % 10 == 0
        passed = i % 3 != 0
        label: Any = None
        if doubted or i % 4 == 1:
            label = "pass" if i % 5 else 9.0 if i % 2 else "fail"
        results.append(
            result(
                i,
                passed=passed,
                overall=8.0 if passed else 3.0,
                label=label,
                flags=["judges_disagree"] if doubted else [],
                model="m1" if i % 2 else "m2",
            )
        )
        person = None if label is None else 1.0 if label in ("pass", 9.0) else 0.0
        strata[1 if doubted else 0].add(1.0 if passed else 0.0, person)
    results.append(result(60, status="null", null_reason="timeout", overall=None, passed=None, label="pass"))
    for r in results:
        stats.add(r, by_model=True)
    body = stats.to_dict()
    assert body is not None
    whole, _ = stratified(strata)
    rate = body["pass_rate"]
    assert rate["n"] == 60 and rate["ppi"]["value"] == pytest.approx(whole.value * 100, abs=1e-3)
    assert rate["labelled"] == sum(len(s.y) for s in strata)
    assert "6 jobs whose verdict the run doubts" in body["note"]
    assert set(body["by_model"]) == {"m1", "m2"}
    assert body["mean"]["labelled"] == sum(1 for r in results[:60] if isinstance(r.label, float))
    unlabelled = EstimateStats(threshold=7.0, numeric=True)
    for r in (result(i, label="a" if i == 0 else None) for i in range(5)):
        unlabelled.add(r, by_model=False)
    assert unlabelled.to_dict() is None


def test_people_alone_are_weighted_by_stratum_as_the_export_draws_them() -> None:
    """Every doubted job labelled (here: all fail, which the judge passed) and a random 50 of the
    other 900: pooling the labels would say 29% pass where 81% do; the figure people's labels
    give alone is weighted by each stratum's share, as the PPI++ one is."""
    from judgeq.report.validity import EstimateStats

    rng = random.Random(5)
    stats = EstimateStats(threshold=7.0, numeric=True)
    others = [1.0 if rng.random() < 0.9 else 0.0 for _ in range(900)]
    drawn = set(rng.sample(range(900), 50))
    for i in range(100):
        stats.add(result(i, passed=True, label="fail", flags=["judges_disagree"]), by_model=False)
    for i, y in enumerate(others):
        label = ("pass" if y else "fail") if i in drawn else None
        stats.add(result(100 + i, passed=bool(y), overall=8.0 if y else 3.0, label=label), by_model=False)
    truth = 100 * sum(others) / 1000
    body = stats.to_dict()
    assert body is not None
    rate = body["pass_rate"]
    for figure in (rate["human_only"], rate["ppi"]):
        lo, hi = figure["ci95"]
        assert lo <= truth <= hi and abs(figure["value"] - truth) < 6, figure


def test_the_mean_keeps_jobs_labelled_pass_or_fail_as_unlabelled() -> None:
    """A pass/fail label says nothing of the score: the job stays in the mean's population,
    unlabelled there; with its stratum then short of numeric labels, no PPI mean, said why."""
    from judgeq.report.validity import EstimateStats

    stats = EstimateStats(threshold=7.0, numeric=True)
    for i in range(10):
        stats.add(
            result(i, passed=True, overall=8.0, label="fail", flags=["judges_disagree"]), by_model=False
        )
    for i in range(10, 50):
        stats.add(result(i, overall=float(i % 10), label=float(i % 10) if i < 15 else None), by_model=False)
    body = stats.to_dict()
    assert body is not None
    mean = body["mean"]
    assert mean["n"] == 50 and mean["labelled"] == 5
    assert mean["ppi"] is None and "the jobs whose verdict the run doubts need two labels" in mean["note"]


def test_line_numbers_count_blank_lines_and_a_file_not_utf8_or_a_huge_number_is_said_so(
    tmp_path: Path,
) -> None:
    blank = tmp_path / "blank.csv"
    blank.write_text("job_id,label\n\nj0,pass\n\nnope,pass\n")
    with pytest.raises(ConfigError) as caught:
        read_labels(blank, RUBRIC, IDS, "r")
    assert f"{blank}:5: job_id: run r has no job 'nope'" in str(caught.value)
    excel = tmp_path / "excel.csv"
    excel.write_bytes("job_id,label,notes\nj0,pass,caf\xe9\n".encode("cp1252"))
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        read_labels(excel, RUBRIC, IDS, "r")
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"job_id": "j0", "label": ' + "9" * 400 + "}\n")
    with pytest.raises(ConfigError, match=r"huge.jsonl:1: label: must be a finite number"):
        read_labels(huge, RUBRIC, IDS, "r")
