"""Conversations people already have, as conversation job lines.

Three sources, each read as its owners document it:

* **OpenAI chat-completions JSONL** (the fine-tuning and evals format): one
  ``{"messages": [...], "tools": [...]}`` object per line; a line's ``id`` is kept, else it
  is ``openai:LINE``. Other keys (``parallel_tool_calls``, ``metadata``...) go to the job's
  metadata.
* **τ-bench trajectories** (sierra-research/tau-bench, ``historical_trajectories/*.json``:
  its ``EnvRunResult`` list): ``traj`` (OpenAI chat messages), ``info.task.actions``
  (the reference tool calls, ``{name, kwargs}``) and ``outputs`` (what the agent had to
  say), ``reward`` (1.0 when the database the agent left equals the reference's). Each
  becomes a job ``tau:TASK:TRIAL`` whose ``reference`` holds the actions and whose
  ``label`` is ``pass`` for reward 1.0 (the benchmark's own outcome), else ``fail``.
* **Inspect eval logs**, JSON (log schema version 2: ``samples[].messages`` as Inspect
  ``ChatMessage``s) or ``.eval`` (Inspect's default: a zip archive holding ``header.json``, or
  ``_journal/start.json`` / ``start.json`` in earlier versions, with the eval's spec, and one
  ``samples/ID_epoch_N.json`` per sample, each the same sample object a JSON log lists; read by
  :func:`inspect_eval_archive` into the JSON log's shape): a tool call's ``function`` is its
  name and its ``arguments`` an object; ``attachment://`` references are resolved from the
  sample's ``attachments``; the tools offered come from the sample's last model event. Each
  sample becomes ``inspect:SAMPLE:EPOCH``.

Every function returns job lines (dicts) and raises :class:`ImportProblem` naming the
record and field of anything it cannot read; the lines are validated like any jobs file's.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = [
    "FORMATS",
    "ImportProblem",
    "from_inspect_log",
    "from_openai_jsonl",
    "from_tau_bench",
    "inspect_eval_archive",
    "is_zip",
]

FORMATS = ("openai", "tau-bench", "inspect")


class ImportProblem(ValueError):
    """A record that cannot be read: ``where`` names it (``line 3``, ``[12].traj``)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


def from_openai_jsonl(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Job lines from OpenAI chat-completions JSONL (blank lines skipped)."""
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportProblem(f"line {n}", f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict) or "messages" not in obj:
            raise ImportProblem(f"line {n}", "expected an object with 'messages'")
        ident = obj.get("id")
        job: dict[str, Any] = {
            "id": str(ident) if ident not in (None, "") else f"openai:{n}",
            "messages": obj["messages"],
        }
        if obj.get("tools"):
            job["tools"] = obj["tools"]
        for key in ("model", "label", "reference", "checks"):
            if key in obj:
                job[key] = obj[key]
        extra = {
            k: v
            for k, v in obj.items()
            if k not in {"id", "messages", "tools", "model", "label", "reference", "checks"}
        }
        if extra:
            job["metadata"] = extra
        yield job


def from_tau_bench(
    runs: Any, tools: list[dict[str, Any]] | None = None, *, model: str | None = None
) -> Iterator[dict[str, Any]]:
    """Job lines from a τ-bench trajectories file (its decoded JSON list)."""
    if not isinstance(runs, list):
        raise ImportProblem("the file", "expected a JSON list of τ-bench runs (task_id, reward, info, traj)")
    for i, run in enumerate(runs):
        where = f"[{i}]"
        if not isinstance(run, Mapping):
            raise ImportProblem(where, "expected an object")
        for key in ("task_id", "traj", "info"):
            if key not in run:
                raise ImportProblem(f"{where}.{key}", "required")
        if not isinstance(run["traj"], list):
            raise ImportProblem(f"{where}.traj", "must be a list of messages")
        task = run["info"].get("task") if isinstance(run["info"], Mapping) else None
        if not isinstance(task, Mapping):
            raise ImportProblem(f"{where}.info.task", "required (the task with its reference actions)")
        actions = task.get("actions") or []
        if not isinstance(actions, list):
            raise ImportProblem(f"{where}.info.task.actions", "must be a list of {name, kwargs}")
        calls = []
        for k, a in enumerate(actions):
            if not isinstance(a, Mapping) or not isinstance(a.get("name"), str):
                raise ImportProblem(f"{where}.info.task.actions[{k}]", "must be an object with a name")
            if not isinstance(a.get("kwargs") or {}, Mapping):
                raise ImportProblem(f"{where}.info.task.actions[{k}].kwargs", "must be an object")
            calls.append({"name": a["name"], "arguments": dict(a.get("kwargs") or {})})
        reward = run.get("reward")
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
            raise ImportProblem(f"{where}.reward", f"must be a number, got {reward!r}"[:120])
        reference: dict[str, Any] = {"tool_calls": calls}
        if task.get("outputs"):
            reference["final_answer"] = "\n".join(str(o) for o in task["outputs"])
        job: dict[str, Any] = {
            "id": f"tau:{run['task_id']}:{run.get('trial', 0)}",
            "messages": [_tau_message(m) for m in run["traj"]],
            "reference": reference,
            "metadata": {
                "task_id": run["task_id"],
                "trial": run.get("trial", 0),
                "reward": reward,
                "user_id": task.get("user_id"),
                "instruction": task.get("instruction"),
            },
        }
        if reward is not None:
            job["label"] = "pass" if float(reward) >= 1.0 else "fail"
        if tools:
            job["tools"] = tools
        if model:
            job["model"] = model
        yield job


def _tau_message(m: Any) -> Any:
    """τ-bench's tool messages carry the tool's ``name`` beside ``tool_call_id`` (OpenAI's
    older form): dropped, the call it answers names the tool. A τ-bench tool reports a failure
    by returning a string starting ``Error`` (its tools' convention: nothing changed): marked
    ``is_error``."""
    if isinstance(m, Mapping) and m.get("role") == "tool":
        out = {k: v for k, v in m.items() if k != "name"}
        if isinstance(m.get("content"), str) and m["content"].startswith("Error"):
            out["is_error"] = True
        return out
    return m


def from_inspect_log(log: Any) -> Iterator[dict[str, Any]]:
    """Job lines from an Inspect JSON eval log (its decoded object)."""
    if not isinstance(log, Mapping) or not isinstance(log.get("samples"), list):
        raise ImportProblem("the file", "expected an Inspect JSON eval log with 'samples'")
    meta = log.get("eval") or {}
    if not isinstance(meta, Mapping):
        raise ImportProblem("eval", "must be an object (the log's eval section)")
    model = meta.get("model")
    for i, sample in enumerate(log["samples"]):
        where = f"samples[{i}]"
        if not isinstance(sample, Mapping) or not isinstance(sample.get("messages"), list):
            raise ImportProblem(f"{where}.messages", "required (a list of messages)")
        attachments = sample.get("attachments") or {}
        messages = [
            _inspect_message(m, attachments, f"{where}.messages[{k}]")
            for k, m in enumerate(sample["messages"])
        ]
        job: dict[str, Any] = {
            "id": f"inspect:{sample.get('id', i)}:{sample.get('epoch', 1)}",
            "messages": messages,
            "metadata": {"task": meta.get("task"), "sample_id": sample.get("id")},
        }
        tools = _inspect_tools(sample)
        if tools:
            job["tools"] = tools
        if model:
            job["model"] = str(model)
        target = sample.get("target")
        if isinstance(target, str) and target:
            job["reference"] = {"final_answer": target}
        yield job


_EVAL_SPEC_FILES = ("header.json", "_journal/start.json", "start.json")
"""Where an .eval archive keeps its eval's spec, newest layout first."""


def is_zip(data: bytes) -> bool:
    """Whether ``data`` starts as a zip archive does (an Inspect ``.eval`` log)."""
    return data[:4] == b"PK\x03\x04"


def inspect_eval_archive(data: bytes) -> dict[str, Any]:
    """An Inspect ``.eval`` archive's eval spec and samples, in the shape of a JSON eval log
    (``{"eval": ..., "samples": [...]}``), its samples ordered by epoch, then id."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ImportProblem("the file", "not an Inspect .eval archive (not a readable zip file)") from None
    with archive:
        names = archive.namelist()
        spec_file = next((n for n in _EVAL_SPEC_FILES if n in names), None)
        meta = _archive_json(archive, spec_file).get("eval") if spec_file else None
        sample_files = [n for n in names if n.startswith("samples/") and n.endswith(".json")]
        if not sample_files:
            raise ImportProblem(
                "the archive", "no samples/*.json: not an Inspect .eval log, or one with no sample"
            )
        samples = [_archive_json(archive, n) for n in sample_files]
    samples.sort(key=lambda s: (_epoch(s), str(s.get("id", "")).zfill(20)))
    return {"eval": meta if isinstance(meta, Mapping) else {}, "samples": samples}


def _epoch(sample: Mapping[str, Any]) -> int:
    epoch = sample.get("epoch", 1)
    return epoch if isinstance(epoch, int) else 1


def _archive_json(archive: zipfile.ZipFile, name: str) -> dict[str, Any]:
    try:
        with archive.open(name) as f:
            obj = json.load(f)
    except NotImplementedError:  # a member compressed with Deflate64: the standard library cannot
        raise ImportProblem(
            name,
            "compressed in a way Python's zipfile cannot read (Deflate64); convert the log with "
            "'inspect log convert FILE --to json' and import the JSON log",
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ImportProblem(name, f"invalid JSON: {exc}") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise ImportProblem(name, f"cannot be read from the archive: {exc}") from None
    if not isinstance(obj, dict):
        raise ImportProblem(name, "expected a JSON object")
    return obj


def _resolve(text: Any, attachments: Mapping[str, Any]) -> Any:
    if isinstance(text, str) and text.startswith("attachment://"):
        return attachments.get(text.removeprefix("attachment://"), text)
    return text


def _inspect_content(content: Any, attachments: Mapping[str, Any]) -> Any:
    if isinstance(content, list):
        return [
            {"type": "text", "text": _resolve(c.get("text", ""), attachments)}
            if isinstance(c, Mapping) and c.get("type") == "text"
            else c
            for c in content
            if not (isinstance(c, Mapping) and c.get("type") == "reasoning")
        ]
    return _resolve(content, attachments)


def _inspect_message(m: Any, attachments: Mapping[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(m, Mapping) or "role" not in m:
        raise ImportProblem(where, "expected a message with a role")
    out: dict[str, Any] = {"role": m["role"], "content": _inspect_content(m.get("content"), attachments)}
    if m["role"] == "assistant" and m.get("tool_calls"):
        calls = m["tool_calls"]
        if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
            raise ImportProblem(
                f"{where}.tool_calls", "must be a list of tool calls (id, function, arguments)"
            )
        out["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("function"), "arguments": json.dumps(c.get("arguments") or {})},
            }
            for c in calls
        ]
    if m["role"] == "tool":
        out["tool_call_id"] = m.get("tool_call_id")
        if m.get("error"):
            out["is_error"] = True
    return out


def _inspect_tools(sample: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tools of the sample's last model call (Inspect's ``ToolInfo``: name, description,
    parameters)."""
    for event in reversed(sample.get("events") or []):
        if isinstance(event, Mapping) and event.get("event") == "model" and event.get("tools"):
            return [
                {
                    "type": "function",
                    "function": {
                        "name": t.get("name"),
                        "description": t.get("description") or "",
                        "parameters": t.get("parameters") or {"type": "object"},
                    },
                }
                for t in event["tools"]
                if isinstance(t, Mapping)
            ]
    return []
