"""``judgeq import FORMAT FILE``: conversations people have (OpenAI chat JSONL, τ-bench
trajectories, Inspect eval logs, .eval or JSON) as a jobs file of conversation jobs."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from judgeq.errors import ConfigError, JobsFileError
from judgeq.jobs.reader import JobsFileLimits, parse_line, split_problems
from judgeq.transcripts.importers import (
    FORMATS,
    ImportProblem,
    from_inspect_log,
    from_openai_jsonl,
    from_tau_bench,
    inspect_eval_archive,
    is_zip,
)

__all__ = ["import_cmd"]

MAX_ERRORS_SHOWN = 20


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None


def _lines(fmt: str, path: Path, tools: Path | None, model: str | None) -> Iterator[dict[str, Any]]:
    if fmt == "openai":
        with path.open(encoding="utf-8") as f:
            yield from from_openai_jsonl(f)
    elif fmt == "tau-bench":
        yield from from_tau_bench(_read_json(path), _read_json(tools) if tools else None, model=model)
    else:
        try:
            head = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read: {exc}") from None
        yield from from_inspect_log(inspect_eval_archive(head) if is_zip(head) else _read_json(path))


@click.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(FORMATS))
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The jobs file to write (default: stdout). Written whole or not at all.",
)
@click.option(
    "--tools",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="tau-bench: a JSON list of the tools' OpenAI definitions (the trajectories file has none).",
)
@click.option("--model", default=None, help="tau-bench: the agent's name, as each job's model.")
def import_cmd(fmt: str, path: Path, output: Path | None, tools: Path | None, model: str | None) -> None:
    """Write FILE's conversations as conversation jobs (JSONL), checked as a jobs file is.

    FORMAT: openai (chat-completions JSONL, one {"messages": ...} per line), tau-bench (a
    trajectories file: each run with its reference actions and its reward as the label) or
    inspect (an Inspect eval log, .eval or JSON: one job per sample)."""
    if tools is not None and fmt != "tau-bench":
        raise click.UsageError("--tools is for tau-bench (the other formats carry their tools)")
    limits = JobsFileLimits()
    out: list[str] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    try:
        for n, line in enumerate(_lines(fmt, path, tools, model), 1):
            ident = str(line.get("id"))
            if ident in seen:  # a jobs file's ids are unique: run and submit would refuse it
                errors.append(f"{path}: job {n} ({ident}): id: the same as job {seen[ident]}'s")
                continue
            seen[ident] = n
            text = json.dumps(line, ensure_ascii=False)
            job, fld, problem = parse_line(text, limits)
            if job is None:
                ident = f"{path}: job {n} ({line.get('id')})"
                errors += [f"{ident}: {where}: {what}" for where, what in split_problems(fld, problem)]
                continue
            out.append(job.model_dump_json(exclude_none=True))
    except ImportProblem as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if errors:
        raise JobsFileError(
            f"{path}: {len(errors)} problem(s); nothing was written", errors=errors[:MAX_ERRORS_SHOWN]
        )
    if output is None:
        for line_text in out:
            sys.stdout.write(line_text + "\n")
        return
    fd, tmp = tempfile.mkstemp(dir=output.parent if str(output.parent) else ".", prefix=".judgeq-import-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(line_text + "\n" for line_text in out)
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    click.echo(f"judgeq: wrote {len(out)} conversation job(s) to {output}", err=True)
