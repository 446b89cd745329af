"""Run management with real workers and Redis: status without a worker, cancel (queued jobs
dropped with no judge call), wait to re-attach, runs, export, compare and rescore on real run
folders, Ctrl-C on judgeq run (a partial report, then a resume), and the Python API."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import judgeq
from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import API_KEY, SUBMIT, Worker, judgeq_cli, response_rows, wait_for, write_batch

pytestmark = pytest.mark.integration


def test_cancel_drops_queued_jobs_without_a_judge_call(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    n = 40
    batch = write_batch(tmp_path / "b.jsonl", response_rows(n))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "doomed", env=env)
    assert proc.returncode == 0, proc.stderr
    status = judgeq_cli("status", "doomed", env=env)
    assert "WARNING: no worker is consuming queue 'judgeq'" in status.stdout, status.stdout
    assert "rubric   quality; judge anthropic:claude-test (live lane)" in status.stdout
    # the fake judge's model has no price: its cost is unknown, never $0
    assert "started  " in status.stdout and "cost so far unknown (no price for 'claude-test'" in status.stdout
    out = tmp_path / "out"
    cancel = judgeq_cli("cancel", "doomed", "--out", str(out), env=env)
    assert cancel.returncode == 0, cancel.stderr
    assert f"{n} job(s) had no result and are null 'canceled'" in cancel.stderr
    report = json.loads((out / "doomed" / "report.json").read_text())
    assert report["partial"] is True and report["counts"]["null_by_reason"] == {"canceled": n}
    assert report["counts"]["total"] == n
    verdicts = [json.loads(x) for x in (out / "doomed" / "verdicts.jsonl").read_text().splitlines()]
    assert {v["job_id"] for v in verdicts} == {r["id"] for r in response_rows(n)}, "ids kept"
    w = start_worker("w1")
    # the worker takes the queued messages and drops them: every job has its result already
    wait_for(lambda: w.output().count("succeeded") >= 5, 60, "the 5 queued messages consumed")
    assert fake_api.request_count == 0, "no judge call for a canceled job"
    again = judgeq_cli("cancel", "doomed", env=env)
    assert again.returncode == 2 and "already ended (canceled)" in again.stderr


def test_wait_runs_export_compare_and_rescore(
    tmp_path: Path, env: dict[str, str], fake_api: FakeMessagesAPI, start_worker: Callable[..., Worker]
) -> None:
    n = 16
    out = tmp_path / "out"
    # run A: every job scored 8; run B: the same jobs, half of them scored 3, plus one more job
    rows_a = response_rows(n, directive={i: "score=8" for i in range(n)})
    rows_b = response_rows(n + 1, directive={i: "score=3" if i % 2 else "score=8" for i in range(n + 1)})
    start_worker("w1")
    ids = []
    for name, rows in (("a", rows_a), ("b", rows_b)):
        proc = judgeq_cli(
            "submit",
            str(write_batch(tmp_path / f"{name}.jsonl", rows)),
            *SUBMIT,
            "--run-id",
            f"run-{name}",
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        ids.append(f"run-{name}")
    for run_id in ids:  # re-attach to each run
        waited = judgeq_cli("wait", run_id, "--out", str(out), env=env)
        assert waited.returncode == 0, waited.stderr
        assert (out / run_id / "report.html").exists() and (out / run_id / "run.json").exists()
    listed = judgeq_cli("runs", "--out", str(out), env=env)
    assert listed.returncode == 0
    lines = [line for line in listed.stdout.splitlines() if line.startswith("run-")]
    assert len(lines) == 2 and all("redis + folder" in line and "finished" in line for line in lines)

    exported = judgeq_cli("export", "run-a", "--out", str(out), env=env)
    assert exported.returncode == 0, exported.stderr
    table = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert len(table) == n and "score.accuracy" in table[0] and table[0]["overall"] == "8.0"

    compared = judgeq_cli("compare", "run-a", "run-b", "--out", str(out), "--json", env=env)
    c = json.loads(compared.stdout)
    assert (c["matched"], c["only_a"], c["only_b"]) == (n, 0, 1)
    assert c["overall"]["mean_diff"] == pytest.approx(-2.5)  # half the jobs fell from 8 to 3
    assert c["pass_rate"]["pass_to_fail"] == n // 2 and len(c["flips"]["pass_to_fail"]) == n // 2
    html = str(tmp_path / "c.html")
    gate = judgeq_cli(
        "compare", str(out / "run-a"), str(out / "run-b"), "--fail-on-regression", "--html", html, env=env
    )  # fmt: skip
    assert gate.returncode == 1 and "regression:" in gate.stderr and "**Regression**" in gate.stdout
    assert "<svg" in (tmp_path / "c.html").read_text()
    same = judgeq_cli("compare", "run-a", "run-a", "--fail-on-regression", "--out", str(out), env=env)
    assert same.returncode == 0, same.stdout

    weights = "accuracy=0.6,relevance=0.1,completeness=0.1,conciseness=0.1,clarity=0.1"
    rescored = judgeq_cli(
        "rescore", "run-b", "--weights", weights, "--run-id", "run-b2", "--out", str(out), env=env
    )
    assert rescored.returncode == 0, rescored.stderr
    report = json.loads((out / "run-b2" / "report.json").read_text())
    assert report["rescored_from"] == "run-b" and report["rubric"]["weights"]["accuracy"] == 0.6
    assert report["counts"] == json.loads((out / "run-b" / "report.json").read_text())["counts"]
    calls = fake_api.request_count
    assert judgeq_cli("compare", "run-b", "run-b2", "--out", str(out), env=env).returncode == 0
    assert fake_api.request_count == calls, "rescore and compare call no judge"
    refused = judgeq_cli("rescore", "run-b", "--rubric", "helpfulness", "--out", str(out), env=env)
    assert refused.returncode == 2 and "dimensions" in refused.stderr


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_on_judgeq_run_writes_a_partial_report_and_the_run_resumes(
    tmp_path: Path, fake_api: FakeMessagesAPI
) -> None:
    n = 12
    fake_api.latency = 0.5
    batch = write_batch(tmp_path / "b.jsonl", response_rows(n))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    env = {
        **base,
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": fake_api.base_url,
        "JUDGEQ_CACHE_DIR": str(tmp_path / "cache"),
    }
    args = [sys.executable, "-m", "judgeq", "run", str(batch), *SUBMIT, "-c", "2", "--run-id", "resumable"]
    args += ["--out", str(tmp_path / "out")]
    proc = subprocess.Popen(
        args, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=_default_sigint
    )
    wait_for(lambda: fake_api.request_count >= 2, 120, "a few jobs graded")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "--run-id resumable to grade the rest" in stderr and "Traceback" not in stderr
    folder = tmp_path / "out" / "resumable"
    partial = json.loads((folder / "report.json").read_text())
    c = partial["counts"]
    assert partial["partial"] is True and c["total"] == n
    canceled = c["null_by_reason"].get("canceled", 0)
    assert canceled >= 1 and c["graded"] + c["null"] == n
    lines = (folder / "verdicts.jsonl").read_text().splitlines()
    assert len(lines) == n and sum('"canceled"' in x for x in lines) == canceled, (
        "files agree with the report"
    )
    before = fake_api.request_count
    resumed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{n - canceled} finished job(s) loaded" in resumed.stderr
    final = json.loads((folder / "report.json").read_text())
    assert final["counts"]["graded"] == n and "partial" not in final
    # only the canceled jobs were graded again (a reply that arrived after the interrupt is cached)
    assert fake_api.request_count - before <= canceled + 1


def test_the_python_api(
    tmp_path: Path,
    env: dict[str, str],
    fake_api: FakeMessagesAPI,
    start_worker: Callable[..., Worker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = response_rows(6)
    report = judgeq.grade(rows, rubric="quality", judge="lexical", out=tmp_path / "out")
    assert report.counts["total"] == 6 and report.path is not None and (report.path / "report.html").exists()
    again = judgeq.load_report(report.path / "report.json")
    assert again.to_dict() == report.to_dict() and len(list(again.results())) == 6
    frame = again.to_pandas()
    assert list(frame["job_id"]) == [r["id"] for r in rows] and "score.accuracy" in frame.columns
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.setenv(key, env[key])
    start_worker("w1")
    run_id = judgeq.submit(
        write_batch(tmp_path / "b.jsonl", rows),
        rubric="quality",
        judge="anthropic:claude-test",
        redis_url=env["JUDGEQ_REDIS_URL"],
    )
    done = judgeq.wait(run_id, redis_url=env["JUDGEQ_REDIS_URL"], out=tmp_path / "out", progress=None)
    assert done.run_id == run_id and done.counts["graded"] == 6
    with pytest.raises(judgeq.RubricError, match="no built-in rubric"):
        judgeq.grade(rows, rubric="no-such-rubric-xyz", judge="lexical", out=tmp_path / "out")


def test_finished_runs_are_archived_out_of_redis_and_still_read(
    tmp_path: Path, env: dict[str, str], redis_server: Any, start_worker: Callable[..., Worker]
) -> None:
    shared = tmp_path / "results"  # the workers' and the CLI's results folder (a shared volume)
    fast = {"JUDGEQ_VISIBILITY_TIMEOUT": "3", "JUDGEQ_RESULTS_DIR": str(shared)}
    env = {**env, **fast}
    start_worker("w1", env={**fast, "JUDGEQ_ARCHIVE": "true", "JUDGEQ_ARCHIVE_AFTER": "0"})
    batch = write_batch(tmp_path / "b.jsonl", response_rows(12))
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "old", env=env)
    assert proc.returncode == 0, proc.stderr
    client = redis_server.client()
    wait_for(lambda: client.hget("judgeq:run:{old}:state", "state") == "archived", 120, "the archive")
    keys = sorted(client.scan_iter(match="judgeq:run:{old}:*"))
    assert keys == ["judgeq:run:{old}:state"], keys  # only the marker is left in Redis
    folder = shared / "old"
    assert (folder / "verdicts.jsonl.gz").exists() and (folder / "report.json").exists()
    assert not (folder / "verdicts.jsonl").exists()
    status = judgeq_cli("status", "old", env=env)
    assert f"archived to {folder.resolve()}" in status.stdout
    exported = judgeq_cli("export", "old", env=env)
    assert exported.returncode == 0 and len(exported.stdout.splitlines()) == 13
    assert judgeq_cli("compare", "old", str(folder), env=env).returncode == 0
    listed = judgeq_cli("runs", env=env)
    assert any(line.startswith("old") and "(archived)" in line for line in listed.stdout.splitlines())


def test_judgeq_archive_by_hand(
    tmp_path: Path, env: dict[str, str], redis_server: Any, start_worker: Callable[..., Worker]
) -> None:
    start_worker("w1")
    batch = write_batch(tmp_path / "b.jsonl", response_rows(8))
    out = tmp_path / "mine"
    proc = judgeq_cli("submit", str(batch), *SUBMIT, "--run-id", "manual", env=env)
    assert proc.returncode == 0, proc.stderr
    early = judgeq_cli("archive", "manual", "--out", str(out), env=env)
    client = redis_server.client()
    if early.returncode != 0:  # refused while the run had not ended; once it has, it works
        assert "has not ended" in early.stderr
        wait_for(lambda: client.exists("judgeq:run:{manual}:report") == 1, 120, "the report")
        early = judgeq_cli("archive", "manual", "--out", str(out), env=env)
    assert early.returncode == 0, early.stderr
    assert early.stdout.strip() == str((out / "manual").resolve())
    assert (out / "manual" / "verdicts.jsonl.gz").exists()
    assert client.hget("judgeq:run:{manual}:state", "state") == "archived"
    again = judgeq_cli("archive", "manual", "--out", str(out), env=env)
    assert again.returncode == 2 and "archived already" in again.stderr
