"""``judgeq submit``: validate a jobs file, register the run in Redis, enqueue its jobs."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from judgeq.errors import ConfigError
from judgeq.jobs.reader import open_jobs_file
from judgeq.settings import Settings

from ..cascade import calibrated
from ..plan import Plan, check_credentials, judges_text, make_plan, plan_kwargs
from .options import grading_options, redis_option, settings_from
from .wait import KEEP_WAITING

__all__ = ["plan_from_flags", "reply_cache", "report_invalid", "submit", "validated"]


def plan_from_flags(settings: Settings, jobs_path: Path, jobs_name: str, **flags: Any) -> Plan:
    return make_plan(
        jobs_path=jobs_path,
        jobs_name=jobs_name,
        rubric_ref=flags["rubric_ref"],
        settings=settings,
        **plan_kwargs(flags),
    )


@contextlib.contextmanager
def validated(
    settings: Settings, flags: dict[str, Any], grade: Callable[[Plan], None] | None = None
) -> Iterator[Plan | None]:
    """Open the jobs file and validate everything (nothing is enqueued on error); print the
    notices. Yields the plan, or None when ``--dry-run`` already did the whole job. A cascade's
    plan is calibrated first: its calibration set graded by ``grade``, its thresholds fitted
    (:mod:`producer.cascade`)."""
    check_cascade_flags(flags)
    with open_jobs_file(flags["jobs_file"]) as (path, name):
        plan = plan_from_flags(settings, path, name, **flags)
        if plan.notice:
            click.echo(plan.notice, err=True)
        report_invalid(plan)
        if flags["dry_run"]:
            from .dry_run import dry_run

            llm = any(not j.api.offline for j in plan.judges)
            cache = reply_cache(settings, flags.get("command", "submit")) if llm and settings.cache else None
            dry_run(plan, settings, cache)
            yield None
            return
        check_credentials(plan, settings)
        if plan.spec.cascade is not None:
            if grade is None:
                raise ConfigError("--cascade: this command cannot grade a calibration set")
            plan = calibrated(plan, settings, flags, grade)
        yield plan


def check_cascade_flags(flags: dict[str, Any]) -> None:
    """A cascade's own options without ``--cascade``: refused, in one line."""
    if flags.get("cascade"):
        if not flags.get("calibration") and not flags.get("dry_run"):
            raise ConfigError(
                "--cascade needs --calibration FILE: a jobs file with a person's label on every job"
            )
        return
    for key in ("calibration", "agreement", "risk", "samples"):
        if flags.get(key) is not None:
            raise ConfigError(f"--{key} goes with --cascade (it is one of a cascade's settings)")


def reply_cache(settings: Settings, command: str) -> Any:
    """The reply cache ``command`` would use, for a dry run to look in: ``judgeq run``'s SQLite
    file when there is one, the workers' cache in Redis for ``submit`` (None when Redis cannot
    be reached: the dry run says so and counts every call)."""
    if command == "run":
        from judgeq.store.reply_cache import SqliteCache

        path = settings.reply_cache_path()
        return SqliteCache(path, settings.cache_ttl) if path.exists() else None
    from judgeq.errors import StoreError
    from judgeq.redis_connect import connect
    from judgeq.store.redis_cache import RedisCache

    try:
        return RedisCache(connect(settings.redis_url), settings.cache_ttl)
    except StoreError as exc:
        click.echo(f"judgeq: the reply cache in Redis cannot be read ({exc})", err=True)
        return None


def report_invalid(plan: Plan) -> None:
    scan = plan.scan
    if scan.invalid:
        click.echo(
            f"judgeq: skipping {scan.invalid} invalid line(s) of {scan.name} (recorded in the report):",
            err=True,
        )
        for line in scan.errors:
            click.echo(f"  {line}", err=True)


@click.command()
@grading_options
@redis_option
@click.option("--wait", is_flag=True, help="Show progress, then write the report files.")
@KEEP_WAITING
def submit(**flags: Any) -> None:
    """Validate JOBS_FILE (JSONL, or - for stdin) and enqueue its grading jobs into Redis."""
    from ..distributed import submit_plan

    if flags["keep_waiting"] and not flags["wait"]:
        raise click.UsageError("--keep-waiting goes with --wait (it says what waiting does on a pause)")
    settings = settings_from(**flags)
    with validated(settings, flags, lambda cal: _grade_and_wait(cal, settings)) as plan:
        if plan is None:
            return
        run_id = plan.spec.run_id

        def started(plan: Plan) -> None:
            click.echo(
                f"judgeq: run {run_id}: enqueuing {plan.spec.total} jobs "
                f"(rubric {plan.spec.rubric.name}, judge {judges_text(plan)})",
                err=True,
            )

        try:
            submitted = submit_plan(plan, settings, on_start=started)
        except KeyboardInterrupt:
            click.echo(
                f"\njudgeq: interrupted while enqueuing run {run_id}; the jobs already "
                f"enqueued will be graded. Re-run the same command with --run-id {run_id} "
                "to enqueue the rest (graded jobs are skipped).",
                err=True,
            )
            raise SystemExit(130) from None
    if submitted.stats.skipped:
        click.echo(
            f"judgeq: {submitted.stats.skipped} job(s) already graded in run {run_id}: skipped", err=True
        )
    click.echo(run_id)
    if flags["wait"]:
        from .wait import wait_and_write

        wait_and_write(
            submitted.store,
            run_id,
            settings,
            nudge=lambda: submitted.dispatcher.reduce(run_id),
            keep_waiting=flags["keep_waiting"],
        )


def _grade_and_wait(plan: Plan, settings: Settings) -> None:
    """Submit ``plan`` (a cascade's calibration set) and wait for its report files."""
    from ..distributed import submit_plan, wait_run

    submitted = submit_plan(plan, settings)
    run_id = submitted.run_id
    wait_run(
        run_id,
        settings,
        stream=sys.stderr,
        store=submitted.store,
        nudge=lambda: submitted.dispatcher.reduce(run_id),
        stop_on_pause=True,
    )
