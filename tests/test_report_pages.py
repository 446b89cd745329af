"""The report pages read at a glance (issue 20, point 7), measured in a real headless Chromium:
no two tick labels of a plot overlap (their bounding boxes), every tick label is at least 11 px
on screen, each kind of run shows its headline figures as numbers, the compare page shows its
title before its plot; screenshots of a response, a question, a pair and a compare page."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from judgeq.figures.charts import axis_number, nice_ticks

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)",
)
ROOT = Path(__file__).resolve().parent.parent
SHOTS = Path(os.environ.get("JUDGEQ_TEST_SCREENSHOTS", ROOT / "results" / "test-screenshots"))

MEASURE = """() => {
  const out = [];
  document.querySelectorAll("figure.chart svg").forEach((svg, i) => {
    const labels = [];
    svg.querySelectorAll("text.tick").forEach((t) => {
      const r = t.getBoundingClientRect();
      const px = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;
      labels.push({text: t.textContent, x: r.left, y: r.top, w: r.width, h: r.height, px: px});
    });
    const box = svg.getBoundingClientRect();
    out.push({chart: svg.getAttribute("aria-label"), labels: labels, left: box.left, right: box.right});
  });
  return out;
}"""


def judgeq(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", *args], capture_output=True, text=True, env=env, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """report.html of a response, a question and a pair run (the offline judge), and the
    compare page of two response runs."""
    root = tmp_path_factory.mktemp("pages")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    env.update(JUDGEQ_RESULTS_DIR=str(root / "r"), HOME=str(root))
    models = ("alpha-model-one", "beta-model-two", "gamma-model-three")
    pairs = root / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"pair-{i:04d}-with-a-long-identifier",
                    "input": f"What is {i} + {i}?",
                    "output_a": f"{2 * i}" if i % 3 else f"maybe {i}",
                    "output_b": f"{2 * i + 1}",
                    "expected_answer": f"{2 * i}",
                    "model_a": models[i % 3],
                    "model_b": models[(i + 1) % 3],
                    "label": ["A", "B", "tie"][i % 3],
                }
            )
            + "\n"
            for i in range(36)
        )
    )
    runs = {
        "response": (ROOT / "examples" / "responses.jsonl", "quality"),
        "question": (ROOT / "examples" / "retrieval.jsonl", "retrieval-relevance"),
        "pair": (pairs, "pairwise"),
        "response-b": (ROOT / "examples" / "responses.jsonl", "quality"),
    }
    for run_id, (jobs, rubric) in runs.items():
        judgeq(env, "run", str(jobs), "--rubric", rubric, "--judge", "lexical", "--run-id", run_id)
    out = {k: root / "r" / k / "report.html" for k in ("response", "question", "pair")}
    out["compare"] = root / "compare.html"
    judgeq(env, "compare", "response", "response-b", "--html", str(out["compare"]))
    return out


def measure(page_path: Path, shot: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "chromium is not installed"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1300, "height": 1600})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        charts = page.evaluate(MEASURE)
        cards = {
            k: v
            for k, v in zip(
                page.locator(".card .k").all_inner_texts(),
                page.locator(".card .v").all_inner_texts(),
                strict=True,
            )
        }
        h1 = page.locator("h1").first.bounding_box()
        figure = page.locator("figure.chart").first.bounding_box() if charts else None
        id_lines = page.evaluate(
            """() => Array.from(document.querySelectorAll("#jobs tbody td.id")).slice(0, 50).map((td) => {
              const r = document.createRange(); r.selectNodeContents(td);
              return r.getClientRects().length; })"""
        )
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    return charts, {"errors": errors, "cards": cards, "h1": h1, "figure": figure, "id_lines": id_lines}


def overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
    return dx > 0.5 and dy > 0.5


@pytest.mark.parametrize("kind", ["response", "question", "pair", "compare"])
def test_every_page_reads_at_a_glance(pages: dict[str, Path], kind: str) -> None:
    shot = SHOTS / f"page-{kind}.png"
    charts, page = measure(pages[kind], shot)
    print(f"screenshot: {shot}")
    assert page["errors"] == []
    assert charts, "the page draws its plots"
    for chart in charts:
        labels = chart["labels"]
        assert labels, chart["chart"]
        small = [(t["text"], round(t["px"], 1)) for t in labels if t["px"] < 11]
        assert small == [], (chart["chart"], small)
        clashes = [
            (a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1 :] if overlaps(a, b)
        ]
        assert clashes == [], (chart["chart"], clashes)
    cards = page["cards"]
    if kind == "question":
        for name in ("accuracy (needle retrieved)", "Hit@1", "Hit@5", "MRR"):
            assert name in cards and "(" in cards[name], (name, cards)  # a figure with its interval
    if kind == "pair":
        assert "position consistency" in cards and "agreement with labels (ties as half)" in cards
        assert any("over" in k and "ties as half" in k for k in cards) and "mean score" not in cards
    if kind == "response":
        assert "mean score" in cards and "pass rate" in cards
    if kind == "compare":
        assert page["h1"]["y"] + page["h1"]["height"] <= page["figure"]["y"], "the title comes first"
    if kind != "compare":  # an id is one line, never wrapped mid-token
        assert page["id_lines"] and set(page["id_lines"]) == {1}, page["id_lines"]
    assert shot.stat().st_size > 10_000


def test_axis_numbers_are_round_and_plain() -> None:
    assert (
        axis_number(20_000) == "20,000" and axis_number(1234.5) == "1,234" and axis_number(0.4832) == "0.483"
    )
    assert axis_number(7.5) == "7.5" and axis_number(0) == "0"
    ticks = nice_ticks(-0.2415, 0.483)
    assert ticks[0] <= -0.2415 and ticks[-1] >= 0.483
    assert all(abs(t * 10 - round(t * 10)) < 1e-9 for t in ticks), ticks  # -0.3, -0.2, ...


def test_synthetic_plots_at_their_extremes_have_no_overlapping_labels(tmp_path: Path) -> None:
    # what a run's figures can make, fixed here (a run's latencies differ run by run): many bins
    # with long labels, one bin, small values, large counts, long model names, a large matrix
    from judgeq.figures.charts import bars, dots, histogram, matrix
    from judgeq.report.html import _PAGE

    many = {"edges": [i * 61.7 for i in range(41)], "counts": [i * 523 for i in range(40)]}
    small = {"edges": [0.0, 0.55, 1.1], "counts": [30, 2]}
    models = [f"model-with-a-long-name-{i}" for i in range(6)]
    pairs = [
        {"model": a, "opponent": b, "win_rate": 50.0 + 7 * (i - j)}
        for i, a in enumerate(models)
        for j, b in enumerate(models)
        if i < j
    ]
    charts = [
        histogram("Latency, many bins", many, unit=" ms"),
        histogram("Latency, small", small, unit=" ms"),
        bars("Counts", [f"label {i}" for i in range(24)], [10_000 * i for i in range(24)], ylabel="jobs"),
        # every category labelled: staggered on rows, shortened past three (issue 29)
        bars(
            "Dimensions",
            [f"dimension_{w}_long_name" for w in "abcde"],
            [7, 6, 8, 5, 9],
            ymax=10,
            categories=True,
        ),
        bars("Twelve", [f"criterion_{i}_of_twelve" for i in range(12)], [1] * 12, ymax=10, categories=True),
        bars("Rank", ["not found", *map(str, range(1, 21)), ">20"], [3] * 22, counts=True, categories=True),
        dots("Models", [(m, 5 + i / 3, [4 + i / 3, 6 + i / 3]) for i, m in enumerate(models)], lo=0, hi=10),
        dots("Differences", [("overall", -0.12, [-0.2415, 0.483])], lo=-0.2415, hi=0.483),
        matrix("Win matrix", pairs),
    ]
    page = tmp_path / "plots.html"
    page.write_text(
        _PAGE.format(
            title="plots", finished="yes", has_texts="no", run_id="plots", subtitle="", partial="",
            summary="", charts="".join(charts), kind_sections="", more="", data="[]",
        )
    )  # fmt: skip
    found, _ = measure(page, SHOTS / "plots.png")
    assert len(found) == len(charts)
    for chart in found:
        labels = chart["labels"]
        assert all(t["px"] >= 11 for t in labels), chart["chart"]
        clashes = [
            (a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1 :] if overlaps(a, b)
        ]
        assert clashes == [], (chart["chart"], clashes)
        assert not any("e+" in t["text"] for t in labels), chart["chart"]  # 20,000, never 2e+04
        # (issue 29: the last label of a wide axis was cut off by the plot's edge)
        cut = [
            t["text"]
            for t in labels
            if t["x"] < chart["left"] - 0.5 or t["x"] + t["w"] > chart["right"] + 0.5
        ]
        assert cut == [], (chart["chart"], cut)
