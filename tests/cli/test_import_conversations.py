"""Conversations people have, read as conversation jobs (issue 30, point 6): OpenAI chat JSONL,
τ-bench trajectories and an Inspect eval log, each a small real public sample
(``tests/fixtures/conversations/README.md`` gives their sources and licences)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from judgeq.jobs.conversation import ConversationJob, job_checks
from judgeq.transcripts.checks import Check
from judgeq.transcripts.importers import (
    ImportProblem,
    from_inspect_log,
    from_openai_jsonl,
    from_tau_bench,
    inspect_eval_archive,
    is_zip,
)

FIX = Path(__file__).parent.parent / "fixtures" / "conversations"
TAU = json.loads((FIX / "tau-bench-airline-sample.json").read_text())
TOOLS = json.loads((FIX / "tau-bench-airline-tools.json").read_text())


def judgeq(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ANTHROPIC_API_KEY": ""},
        timeout=120,
        cwd=cwd,
    )


def test_tau_bench_runs_keep_their_reference_actions_reward_and_failed_calls() -> None:
    jobs = [ConversationJob.model_validate(line) for line in from_tau_bench(TAU, TOOLS, model="gpt-4o")]
    assert [j.id for j in jobs] == [f"tau:{r['task_id']}:{r['trial']}" for r in TAU]
    assert [j.label for j in jobs] == ["pass" if r["reward"] == 1.0 else "fail" for r in TAU]
    for job, run in zip(jobs, TAU, strict=True):
        assert job.model == "gpt-4o" and job.tools is not None and len(job.tools) == 14
        assert job.reference is not None and job.reference.tool_calls is not None
        assert [(c.name, c.arguments) for c in job.reference.tool_calls] == [
            (a["name"], a["kwargs"]) for a in run["info"]["task"]["actions"]
        ]
        calls = [m["tool_calls"][0]["function"]["name"] for m in run["traj"] if m.get("tool_calls")]
        assert [c.name for c in job.tool_calls] == calls  # every call, in order
    # task 11's first book_reservation failed ("Error: ..."): marked, so a check can leave it out
    failed = [m for m in jobs[3].messages if m.role == "tool" and m.is_error]
    assert failed and all(m.content.startswith("Error") for m in failed)
    writes = Check(check="reference_calls", tools=["book_reservation"], mode="exact", match="exact")
    assert [o.passed for o in job_checks([writes], jobs[3])] == [False]  # two calls, one reference
    skip = writes.model_copy(update={"skip_failed": True})
    assert [o.passed for o in job_checks([skip], jobs[3])] == [True]


def test_openai_chat_jsonl_lines_become_jobs_with_their_extra_keys_as_metadata() -> None:
    lines = (FIX / "openai-chat-sample.jsonl").read_text().splitlines()
    jobs = [ConversationJob.model_validate(line) for line in from_openai_jsonl(lines)]
    assert [j.id for j in jobs] == ["openai:1", "openai:2"]
    assert jobs[0].metadata == {"parallel_tool_calls": False}
    assert (
        jobs[0].messages == ConversationJob.model_validate({"id": "x", "messages": TAU[0]["traj"]}).messages
    )


def test_an_inspect_log_sample_reads_as_the_openai_request_it_made() -> None:
    log = json.loads((FIX / "inspect-browser-sample.json").read_text())
    (line,) = from_inspect_log(log)
    job = ConversationJob.model_validate(line)
    assert job.id == "inspect:1:1" and job.model == "openai/gpt-4o-mini"
    assert [m.role for m in job.messages] == ["user", *["assistant", "tool"] * 4, "assistant"]
    assert [c.name for c in job.tool_calls] == ["web_browser_go", *["web_browser_click"] * 3]
    assert job.tool_calls[0].arguments == {"url": "https://www.aisi.gov.uk/"}
    assert job.tools is not None and len(job.tools) == 8
    assert job.final_answer.startswith("The AI Security Institute")


@pytest.mark.parametrize(
    ("reader", "data", "where"),
    [
        (from_tau_bench, {"not": "a list"}, "the file"),
        (from_tau_bench, [{"task_id": 1, "traj": []}], "[0].info"),
        (from_inspect_log, {"samples": [{"id": 1}]}, "samples[0].messages"),
        (from_inspect_log, [], "the file"),
    ],
)
def test_unreadable_records_are_named(reader: object, data: object, where: str) -> None:
    with pytest.raises(ImportProblem) as err:
        list(reader(data))  # type: ignore[operator]
    assert err.value.where == where


def test_openai_lines_that_are_not_conversations_are_named() -> None:
    with pytest.raises(ImportProblem, match="line 2: expected an object with 'messages'"):
        list(from_openai_jsonl(['{"messages": [{"role": "user", "content": "x"}]}', '{"prompt": "x"}']))
    with pytest.raises(ImportProblem, match="line 1: invalid JSON"):
        list(from_openai_jsonl(["{"]))


def test_import_then_grade_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "tau.jsonl"
    done = judgeq(
        "import", "tau-bench", str(FIX / "tau-bench-airline-sample.json"), "--tools",
        str(FIX / "tau-bench-airline-tools.json"), "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote 4 conversation job(s)" in done.stderr
    assert len(out.read_text().splitlines()) == 4
    graded = judgeq(
        "run", str(out), "--rubric", "task-success", "--out", str(tmp_path / "results"), cwd=tmp_path
    )
    assert graded.returncode == 0, graded.stderr
    (report,) = (tmp_path / "results").glob("*/report.json")
    data = json.loads(report.read_text())
    assert data["counts"]["total"] == 4 and data["conversation"]["jobs"] == 4
    assert "reference_calls:in_order:subset" in data["conversation"]["checks"]


def test_a_conversation_the_reader_refuses_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]})
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    done = judgeq("import", "openai", str(bad), "-o", str(out))
    assert done.returncode == 2 and not out.exists()
    assert f"{bad}: job 1 (openai:1): messages.1.role: unknown role 'robot'" in done.stderr
    assert "Traceback" not in done.stderr and "nothing was written" in done.stderr
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{")
    done = judgeq("import", "tau-bench", str(garbage))
    assert (
        done.returncode == 2 and f"{garbage}: invalid JSON" in done.stderr and "Traceback" not in done.stderr
    )


@pytest.mark.parametrize(
    ("reader", "data", "where"),
    [
        (from_tau_bench, [{"task_id": 1, "traj": None, "info": {"task": {}}}], "[0].traj"),
        (from_tau_bench, [{"task_id": 1, "traj": [], "reward": "n/a", "info": {"task": {}}}], "[0].reward"),
        (
            from_tau_bench,
            [{"task_id": 1, "traj": [], "info": {"task": {"actions": "x"}}}],
            "[0].info.task.actions",
        ),
        (
            from_tau_bench,
            [{"task_id": 1, "traj": [], "info": {"task": {"actions": [{"kwargs": {}}]}}}],
            "[0].info.task.actions[0]",
        ),
        (from_inspect_log, {"eval": "x", "samples": []}, "eval"),
        (
            from_inspect_log,
            {"samples": [{"messages": [{"role": "assistant", "tool_calls": ["x"]}]}]},
            "samples[0].messages[0].tool_calls",
        ),
    ],
)
def test_malformed_records_are_named_not_crashed_on(reader: object, data: object, where: str) -> None:
    with pytest.raises(ImportProblem) as err:
        list(reader(data))  # type: ignore[operator]
    assert err.value.where == where


def test_ids_the_importer_writes_are_unique(tmp_path: Path) -> None:
    chats = tmp_path / "chats.jsonl"
    line = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    chats.write_text("\n".join(json.dumps({**line, "id": i}) for i in ("a", None, "a")) + "\n")
    done = judgeq("import", "openai", str(chats), "-o", str(tmp_path / "out.jsonl"))
    assert done.returncode == 2 and not (tmp_path / "out.jsonl").exists()
    assert f"{chats}: job 3 (a): id: the same as job 1's" in done.stderr
    assert [j["id"] for j in from_openai_jsonl(chats.read_text().splitlines())] == ["a", "openai:2", "a"]


# -- Inspect's .eval archives (its default log format) ------------------------------------------


def _eval_archive(
    samples: list[dict[str, Any]], *, layout: str = "header", method: int = zipfile.ZIP_DEFLATED
) -> bytes:
    """An Inspect .eval log in the layout its recorder writes: the eval's spec in header.json
    (or, before, _journal/start.json or start.json), each sample as samples/ID_epoch_N.json."""
    log = json.loads((FIX / "inspect-browser-sample.json").read_text())
    spec = {"version": log["version"], "eval": log["eval"], "plan": {}}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        if layout == "header":
            z.writestr("header.json", json.dumps({**spec, "status": "success", "results": {}, "stats": {}}))
            z.writestr("_journal/start.json", json.dumps(spec))
        else:
            z.writestr("start.json", json.dumps(spec))
            z.writestr("results.json", json.dumps({"status": "success", "stats": {}}))
        for s in samples:
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        z.writestr("summaries.json", json.dumps([{"id": s["id"], "epoch": s["epoch"]} for s in samples]))
    return buf.getvalue()


SAMPLE = json.loads((FIX / "inspect-browser-sample.json").read_text())["samples"][0]


@pytest.mark.parametrize("layout", ["header", "start"])
def test_an_inspect_eval_archive_reads_as_its_json_log_does(layout: str) -> None:
    as_json = list(from_inspect_log(json.loads((FIX / "inspect-browser-sample.json").read_text())))
    data = _eval_archive([SAMPLE], layout=layout)
    assert is_zip(data)
    assert list(from_inspect_log(inspect_eval_archive(data))) == as_json


def test_an_archives_samples_come_in_epoch_then_id_order() -> None:
    samples = [{**SAMPLE, "id": i, "epoch": e} for i, e in ((10, 1), (2, 2), (2, 1), (9, 1))]
    ids = [line["id"] for line in from_inspect_log(inspect_eval_archive(_eval_archive(samples)))]
    assert ids == ["inspect:2:1", "inspect:9:1", "inspect:10:1", "inspect:2:2"]


def _deflate64(data: bytes) -> bytes:
    """The archive with every member marked as compressed with Deflate64 (method 9), which
    Python's zipfile cannot read and Inspect's writer may use."""
    out = bytearray(data)
    for sig, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = out.find(sig)
        while at != -1:
            out[at + offset : at + offset + 2] = (9).to_bytes(2, "little")
            at = out.find(sig, at + 4)
    return bytes(out)


@pytest.mark.parametrize(
    ("data", "where", "says"),
    [
        (b"PK\x03\x04 not really a zip", "the file", "not a readable zip"),
        (_eval_archive([]), "the archive", "no samples/*.json"),
        (_deflate64(_eval_archive([SAMPLE])), "header.json", "inspect log convert"),
    ],
    ids=["damaged", "no samples", "deflate64"],
)
def test_an_archive_that_cannot_be_read_is_named(data: bytes, where: str, says: str) -> None:
    with pytest.raises(ImportProblem) as err:
        list(from_inspect_log(inspect_eval_archive(data)))
    assert err.value.where == where and says in err.value.problem


def test_a_sample_that_is_not_json_is_named() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("header.json", "{}")
        z.writestr("samples/1_epoch_1.json", "{not json")
    with pytest.raises(ImportProblem) as err:
        inspect_eval_archive(buf.getvalue())
    assert err.value.where == "samples/1_epoch_1.json" and "invalid JSON" in err.value.problem


def test_the_cli_imports_an_eval_archive_and_names_a_broken_one(tmp_path: Path) -> None:
    log = tmp_path / "run.eval"
    log.write_bytes(_eval_archive([SAMPLE, {**SAMPLE, "epoch": 2}]))
    out = tmp_path / "jobs.jsonl"
    done = judgeq("import", "inspect", str(log), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["inspect:1:1", "inspect:1:2"]
    broken = tmp_path / "broken.eval"
    broken.write_bytes(_deflate64(_eval_archive([SAMPLE])))
    failed = judgeq("import", "inspect", str(broken), "-o", str(tmp_path / "none.jsonl"))
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert f"{broken}: header.json:" in failed.stderr and "inspect log convert" in failed.stderr
    assert not (tmp_path / "none.jsonl").exists()
