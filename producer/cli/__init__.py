"""The ``judgeq`` command line: one group, one module per subcommand.

Errors judgeq raises on purpose are printed as ``judgeq: error: …`` lines on stderr, never as
a traceback.  Exit codes: 0 success, 1 runtime failure (Redis unreachable, failed run),
2 bad input (batch, rubric, flags, settings), 3 a run waited for paused for something a
person must do (its cost cap, a refused key), 130 interrupted.  A reader that goes away
(``judgeq status | head``) ends the command quietly.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from typing import Any

import click

from judgeq.errors import ConfigError, JobsFileError, JudgeqError, RubricError
from judgeq.settings import load_settings, unknown_variables
from judgeq.telemetry.redact import redact

__all__ = ["INPUT_ERRORS", "JudgeqGroup", "entry", "fail", "main"]

INPUT_ERRORS = (JobsFileError, ConfigError, RubricError)


def fail(err: JudgeqError) -> None:
    """Print a judgeq error as one or more ``judgeq: error:`` lines and exit (every line
    redacted: a value a user gave may hold a secret)."""
    for line in redact(str(err)).splitlines() or [type(err).__name__]:
        click.echo(f"judgeq: error: {line}", err=True)
    if isinstance(err, JobsFileError):
        for line in err.errors:
            click.echo(f"  {redact(line)}", err=True)
    sys.exit(getattr(err, "exit_code", None) or (2 if isinstance(err, INPUT_ERRORS) else 1))


class JudgeqGroup(click.Group):
    """A click group that turns JudgeqError into clean error lines."""

    def invoke(self, ctx: click.Context) -> Any:
        import logging

        from judgeq.telemetry.redact import RedactingFilter, redact_logs

        # what a command logs (warnings and errors reach Python's last-resort handler) is
        # redacted as a worker's log is
        last = logging.lastResort
        if last is not None and not any(isinstance(f, RedactingFilter) for f in last.filters):
            last.addFilter(RedactingFilter())
        redact_logs()
        for line in unknown_variables():
            click.echo(f"judgeq: warning: {line}", err=True)
        try:
            return super().invoke(ctx)
        except JudgeqError as err:
            fail(err)
        except KeyboardInterrupt:
            click.echo("judgeq: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            _quiet_broken_pipe()
        except click.ClickException as exc:  # a flag's value may hold a secret (a URL's password)
            exc.message = redact(exc.message)
            raise
        except (click.exceptions.Exit, SystemExit):
            raise
        except Exception as exc:
            if _debug():
                raise
            click.echo(
                f"judgeq: internal error: {type(exc).__name__}: {redact(str(exc))} "
                "(set JUDGEQ_DEBUG=1 to see the traceback)",
                err=True,
            )
            sys.exit(1)


def _json_events() -> None:
    """With ``JUDGEQ_LOG_FORMAT=json``, a command's events (a run's judge calls and stored jobs,
    a state change an operator makes: resume, cancel, finalize) are JSON lines on stderr, as a
    worker's are; its own messages stay as they are. A worker sets up its logging itself."""
    try:
        settings = load_settings()
    except JudgeqError:
        return  # the command itself reports the bad setting
    if settings.log_format != "json":
        return
    import logging

    from judgeq.telemetry import add_observer
    from judgeq.telemetry.jsonlog import EVENTS_LOGGER, JsonFormatter, log_event

    logger = logging.getLogger(EVENTS_LOGGER)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    add_observer(log_event)


def _debug() -> bool:
    try:
        return load_settings().debug
    except JudgeqError:
        return False


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (``| head``): exit quietly, as the shell's tools do.
    Python would complain again when it flushes stdout at exit; point stdout at /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


@click.group(cls=JudgeqGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="judgeq")
def main() -> None:
    """judgeq: distributed LLM-as-judge grading on Celery + Redis."""
    if click.get_current_context().invoked_subcommand not in ("worker", "flower", None):
        _json_events()


def entry() -> None:
    """The ``judgeq`` command (``python -m judgeq``)."""
    # At exit, objects alive then are left to the operating system instead of one last
    # collection over every module's objects (the SDK's alone took 0.4 s of each command).
    atexit.register(gc.freeze)
    main()


def _register() -> None:
    from . import (
        budget,
        cancel,
        compare,
        dev,
        export,
        exporter,
        flower,
        importer,
        labels,
        rescore,
        resume,
        rubrics,
        run,
        runs,
        status,
        submit,
        wait,
        worker,
    )

    main.add_command(rubrics.rubrics)
    main.add_command(run.run)
    main.add_command(submit.submit)
    main.add_command(status.status)
    main.add_command(status.report)
    main.add_command(status.finalize)
    main.add_command(status.archive)
    main.add_command(resume.resume)
    main.add_command(wait.wait_cmd)
    for command in (
        runs.runs,
        cancel.cancel,
        export.export,
        importer.import_cmd,
        compare.compare,
        rescore.rescore,
        labels.labels,
    ):
        main.add_command(command)
    main.add_command(worker.worker)
    main.add_command(flower.flower)
    main.add_command(exporter.exporter)
    main.add_command(budget.budget)
    main.add_command(dev.dev)


_register()
