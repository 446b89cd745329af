"""report.html in a real headless Chromium (Debian's package, driven by Playwright): it loads
with no console error and no network, its plots render, filtering changes the rows shown, texts
from the batch are data (never markup or script), and a screenshot is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# CI installs chromium (.ci/run): there a missing browser fails the test instead of skipping it
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)",
)
ROOT = Path(__file__).resolve().parent.parent
HOSTILE = (
    '</script><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> & <b>bold</b> '
    "<!-- a comment --> <!--<script>window.pwned = 3</script> \u2028"
)
SHOTS = Path(os.environ.get("JUDGEQ_TEST_SCREENSHOTS", ROOT / "results" / "test-screenshots"))
"""Where the screenshots are kept after the run (``results/`` is not in git)."""


def run(batch: Path, rubric: str, out: Path, judge: str = "lexical", **extra_env: str) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    env.update(extra_env)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "judgeq",
            "run",
            str(batch),
            "--rubric",
            rubric,
            "--judge",
            judge,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (html,) = out.glob("*/report.html")
    return html


def open_page(path: Path, shot: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "chromium is not installed"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1300, "height": 1600})
        problems: list[str] = []
        requests: list[str] = []
        page.on(
            "console",
            lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        svgs = page.locator("figure.chart svg")
        shapes = [svgs.nth(i).locator("rect, circle, polyline").count() for i in range(svgs.count())]
        boxes = [svgs.nth(i).bounding_box() for i in range(svgs.count())]
        rows = page.locator("#jobs tbody tr").count()
        models = page.locator("#f-model option").all_inner_texts()
        page.select_option("#f-model", index=1)
        by_model = page.locator("#jobs tbody tr").count()
        page.select_option("#f-model", index=0)
        page.fill("#f-min", "5")
        by_score = page.locator("#jobs tbody tr").count()
        page.fill("#f-min", "")
        page.fill("#f-text", "script")
        by_text = page.locator("#jobs tbody tr").count()
        cell = page.locator("#jobs tbody tr td:nth-child(9)").first.inner_text() if by_text else ""
        expanded = ""
        if by_text and page.locator("#jobs tbody tr td:nth-child(9) button.more").count():
            page.locator("#jobs tbody tr td:nth-child(9) button.more").first.click()
            expanded = page.locator("#jobs tbody tr td:nth-child(9)").first.inner_text()
        page.fill("#f-text", "")
        nulls = page.locator("#f-null option").all_inner_texts()
        page.select_option("#f-null", "*")
        only_nulls = page.locator("#jobs tbody tr").count()
        page.select_option("#f-null", "")
        page.locator("#jobs th[data-k=score]").click()
        scores = page.locator("#jobs tbody tr td:nth-child(3)").all_inner_texts()
        page.locator("#jobs th[data-k=score]").click()
        scores_down = page.locator("#jobs tbody tr td:nth-child(3)").all_inner_texts()
        pwned = page.evaluate("window.pwned || 0")
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    return {
        "problems": problems,
        "requests": requests,
        "shapes": shapes,
        "boxes": boxes,
        "rows": rows,
        "models": models,
        "by_model": by_model,
        "by_score": by_score,
        "by_text": by_text,
        "cell": cell,
        "expanded": expanded,
        "nulls": nulls,
        "only_nulls": only_nulls,
        "scores": [float(s) for s in scores if s],
        "scores_down": [float(s) for s in scores_down if s],
        "pwned": pwned,
    }


def test_the_html_report_loads_plots_and_filters_in_chromium(tmp_path: Path) -> None:
    rows = [
        json.loads(line) for line in (ROOT / "examples" / "responses.jsonl").read_text().splitlines() if line
    ]
    rows[0]["output"] = HOSTILE + " " + rows[0]["output"] + " " + "long text " * 40
    rows[1]["output"] = "[[not json]] a reply the judge cannot grade"  # still graded by the lexical judge
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / "report.png"
    page = open_page(run(batch, "quality", tmp_path / "out"), shot)
    print(f"screenshot: {shot}")
    assert page["problems"] == []
    assert all(url.startswith("file://") for url in page["requests"]), "the page fetches nothing"
    assert len(page["shapes"]) >= 4 and all(n > 0 for n in page["shapes"]), "every plot draws something"
    assert all(box and box["width"] > 100 and box["height"] > 50 for box in page["boxes"])
    assert page["rows"] == len(rows)
    assert 0 < page["by_model"] < len(rows), "filtering by model changes the rows shown"
    assert page["by_score"] < len(rows)
    assert page["by_text"] >= 1 and "</script>" in page["cell"], "a job's text is shown as text"
    assert "<!-- a comment -->" in page["expanded"] and page["expanded"].rstrip().endswith("less")
    assert len(page["expanded"]) > len(page["cell"]), "'more' shows the whole text"
    assert page["pwned"] == 0, "no text from the batch ran as script"
    # sorting by score: ascending, then descending on a second click (nulls last)
    assert page["scores"] == sorted(page["scores"]) and len(page["scores"]) > 1
    assert page["scores_down"] == sorted(page["scores"], reverse=True)
    # the null-reason filter lists only what occurs; here every job graded, so "only nulls" is empty
    assert page["nulls"][:2] == ["any", "only nulls"] and page["only_nulls"] == 0
    assert shot.stat().st_size > 10_000


def test_a_pairwise_report_draws_its_win_matrix(tmp_path: Path) -> None:
    models = ("alpha", "beta", "gamma")
    rows = [
        {
            "id": f"p{i}",
            "input": f"What is {i} + {i}?",
            "output_a": f"{2 * i}" if i % 3 else f"maybe {i}",
            "output_b": f"{2 * i + 1}",
            "expected_answer": f"{2 * i}",
            "model_a": models[i % 3],
            "model_b": models[(i + 1) % 3],
        }
        for i in range(24)
    ]
    batch = tmp_path / "pairs.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = run(batch, "pairwise", tmp_path / "out")
    text = html.read_text()
    assert "Pairwise win rate" in text and "Bradley-Terry ratings" in text
    page = open_page(html, SHOTS / "pairs.png")
    assert page["problems"] == [] and all(n > 0 for n in page["shapes"])
    assert page["rows"] == 24 and "alpha vs beta" in page["models"]


def test_the_null_reason_filter_shows_the_nulls_of_that_reason(tmp_path: Path) -> None:
    from judgeq.testing.fake_anthropic import FakeMessagesAPI

    rows = [{"id": f"r{i}", "input": f"Question {i}?", "output": f"Answer {i}."} for i in range(12)]
    rows[2]["output"] += " [[fake:garbage]]"  # unparseable: parse_error
    rows[5]["output"] += " [[fake:garbage]]"
    rows[7]["output"] += " [[fake:400]]"  # refused: invalid_request
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeMessagesAPI(api_key="k") as fake:
        html = run(
            batch,
            "quality",
            tmp_path / "out",
            judge="anthropic:claude-test",
            ANTHROPIC_API_KEY="k",
            ANTHROPIC_BASE_URL=fake.base_url,
            JUDGEQ_CACHE_DIR=str(tmp_path / "cache"),
        )
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "chromium is not installed"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(html.as_uri())
        options = page.locator("#f-null option").all_inner_texts()
        counts = {}
        for reason in ("*", "parse_error", "invalid_request", "-"):
            page.select_option("#f-null", reason)
            counts[reason] = page.locator("#jobs tbody tr").count()
        page.select_option("#f-null", "parse_error")
        shown = page.locator("#jobs tbody tr td:nth-child(1)").all_inner_texts()
        verdicts = page.locator("#jobs tbody tr td:nth-child(4)").all_inner_texts()
        browser.close()
    assert errors == []
    assert {"parse_error", "invalid_request"} <= set(options)
    assert counts == {"*": 3, "parse_error": 2, "invalid_request": 1, "-": 9}
    assert sorted(shown) == ["r2", "r5"] and verdicts == ["null: parse_error"] * 2


def test_the_worst_conversations_read_as_transcripts(tmp_path: Path) -> None:
    """Issue 30, point 7: the worst conversations shown as transcripts (roles, each call with its
    arguments, each result with the tool it answers), their text data, never markup."""
    from playwright.sync_api import sync_playwright

    rows = [json.loads(line) for line in (ROOT / "examples" / "conversations.jsonl").read_text().splitlines()]
    rows[2]["messages"][1]["content"] = HOSTILE  # the user's message of the conversation a check settles
    batch = tmp_path / "conv.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rubric = tmp_path / "careful.md"
    rubric.write_text(
        "---\nname: careful\nversion: 1.0.0\nscale: pass-fail\njob: conversation\ndescription: d\n"
        "checks:\n  - {check: tool_not_used, tool: cancel_order, hard: true}\n---\nGrade it.\n"
    )
    html = run(batch, str(rubric), tmp_path / "out")
    assert CHROMIUM is not None, "chromium is not installed"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1300, "height": 1600})
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        page.goto(html.as_uri())
        summaries = page.locator("details summary").all_inner_texts()
        first = page.locator("details").first
        hidden = first.locator("ol.transcript").is_visible()
        first.locator("summary").click()
        roles = first.locator(".msg .role").all_inner_texts()
        calls = first.locator(".msg .call").all_inner_texts()
        user = first.locator(".msg.user .content").first.inner_text()
        pwned = page.evaluate("window.pwned || 0")
        page.screenshot(path=str(SHOTS / "conversations.png"), full_page=True)
        browser.close()
    assert problems == [] and pwned == 0
    assert summaries[0].startswith("conv-003") and "failed a hard check" in summaries[0]
    assert not hidden, "a transcript opens on demand"
    assert roles == ["1. system", "2. user", "3. assistant", "4. result of cancel_order", "5. assistant"]
    assert calls == ['call cancel_order{"order_id": "48213"}'] or calls == [
        'call cancel_order\n{"order_id": "48213"}'
    ]
    assert user == HOSTILE.rstrip("\u2028 ").strip() or "</script>" in user, "the text is shown as text"
