"""report.html's plots say what they show (issue 29): every dimension and rank labelled, count
axes in whole jobs, a numeric axis labelled as far as its data, a small rate not rounded to
0.0%, and a run with nothing graded says so instead of drawing empty plots. The geometry (no two
labels overlap on screen) is measured in Chromium: tests/test_report_pages.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judgeq.figures.charts import PAD_B, H, bars, count_scale, histogram
from judgeq.figures.formatting import fmt
from judgeq.grading.result import Result
from judgeq.report.build import build_report, new_aggregator
from judgeq.report.html import charts, headline_cards
from judgeq.rubric.model import read_rubric_text
from judgeq.runspec import RunSpec


def x_labels(svg: str) -> list[str]:
    """The tick labels below the x axis."""
    return [
        text
        for y, text in re.findall(
            r'<text x="[0-9.]+" y="([0-9.]+)" class="tick" text-anchor="middle">([^<]*)<', svg
        )
        if float(y) > H - PAD_B
    ]


def y_labels(svg: str) -> list[str]:
    return re.findall(r'class="tick" text-anchor="end">([^<]*)<', svg)


def test_every_dimension_of_a_rubric_gets_its_label() -> None:
    # (issue 29: "Mean per dimension" labelled 3 of 5 bars)
    names = ["instruction_following", "factual_accuracy", "completeness", "conciseness", "harmlessness"]
    svg = bars("Mean per dimension", names, [7.0, 6.5, 8.0, 5.5, 9.0], ymax=10, categories=True)
    assert x_labels(svg) == names
    twelve = [f"dimension_number_{i}" for i in range(12)]
    shown = x_labels(bars("Many", twelve, [1.0] * 12, ymax=10, categories=True))
    assert len(shown) == 12 and all(s.endswith("…") for s in shown)  # every bar, shortened


def test_every_rank_is_labelled_from_rank_1() -> None:
    # (issue 29: the rank chart left rank 1 unlabelled)
    ranks = ["not found", *map(str, range(1, 21)), ">20"]
    svg = bars("Rank", ranks, [3] * len(ranks), counts=True, categories=True)
    shown = x_labels(svg)
    assert len(shown) == len(ranks) and "1" in shown and shown[1] == "1"


@pytest.mark.parametrize("top", [1, 3, 5, 9, 17, 41, 523, 20_397])
def test_count_axes_tick_in_whole_jobs(top: int) -> None:
    # (issue 29: a histogram's axis read 2.5 jobs)
    hist = {"edges": [float(i) for i in range(6)], "counts": [top, 1, 0, 2, 1]}
    ticks = [float(t.replace(",", "")) for t in y_labels(histogram("Latency", hist, unit=" ms"))]
    assert ticks == sorted(ticks) and ticks[0] == 0 and ticks[-1] >= top
    assert all(t == int(t) for t in ticks), ticks
    assert 3 <= len(ticks) <= 5
    axis_top, step = count_scale(top)
    assert axis_top >= top and axis_top / step <= 4 and step == int(step)


def test_a_histogram_is_labelled_as_far_as_its_data_goes() -> None:
    # (issue 29: latency axes stopped labelling below the data)
    edges = [i * 61.7 for i in range(41)]
    svg = histogram("Latency", {"edges": edges, "counts": list(range(40))}, unit=" ms")
    shown = x_labels(svg)
    last = f"{(edges[-2] + edges[-1]) / 2:,.0f} ms"
    assert shown[-1] == last and len(shown) < 40


def test_a_small_rate_is_not_printed_as_zero() -> None:
    # (issue 29: a pass-rate card read 0.0% where its note said 0.02%)
    assert fmt(0.02, "%") == "0.02%" and fmt(0.0, "%") == "0.0%" and fmt(12.34, "%") == "12.3%"
    report = json.loads((Path(__file__).parents[1] / "fixtures" / "reports" / "resp.json").read_text())
    report |= {"pass_rate": 0.02, "pass_rate_ci95": [0.0, 0.11]}  # a whole report: it is typed
    assert dict(headline_cards(report))["pass rate"].startswith("0.02% (")


def test_a_run_with_nothing_graded_says_so_instead_of_empty_plots() -> None:
    # (issue 29: an all-null run showed an empty chart without a word)
    text, source = read_rubric_text("quality")
    spec = RunSpec(
        run_id="nulls", rubric_text=text, rubric_source=source, judge_provider="lexical", judge_model="x",
        total=4,
    )  # fmt: skip
    agg = new_aggregator(spec)
    for i in range(4):
        agg.add(
            Result(
                job_id=f"j{i}", index=i, status="null", null_reason="api_error", rubric_name="quality",
                rubric_version="1", judge_model="x", grading_latency_ms=120.0 + i,
            )
        )  # fmt: skip
    report = build_report(spec, agg, started_at="s", finished_at="f", wall_s=1.0)
    page = "".join(charts(report))
    assert "No job was graded" in page and "All 4 results are null" in page
    assert "Pass rate at each threshold" not in page and "Mean per dimension" not in page
    assert "<rect" not in page.split("Grading latency")[0]  # no empty bars before the latency plot
