"""``judgeq rubrics list | show | validate | calibrate``."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
import yaml

from judgeq.errors import JudgeqError, RubricError
from judgeq.grading.request import render_request
from judgeq.jobs.kinds import KINDS, kind_for
from judgeq.jobs.models import JOB_MODELS, Job, infer_kind
from judgeq.rubric.model import Rubric, builtin_names, load_rubric
from judgeq.settings import load_settings

from ..plan import load_rubric_for_run

__all__ = ["SAMPLES", "list_", "load_with_overrides", "rubrics", "sample_job", "show", "validate"]


def load_with_overrides(ref: str, weights: str | None) -> Rubric:
    """Load a rubric and apply ``JUDGEQ_WEIGHT_*`` then ``--weights`` overrides."""
    return load_rubric_for_run(ref, weights, load_settings())[0]


@click.group()
def rubrics() -> None:
    """List, show, validate and calibrate rubrics."""


@rubrics.command("list")
def list_() -> None:
    """List the built-in rubrics (name, version, scale, description)."""
    rows = []
    for name in builtin_names():
        try:
            r = load_rubric(name)
            rows.append((r.name, r.version, r.scale, " ".join(r.description.split())))
        except RubricError as err:
            rows.append((name, "?", "?", f"INVALID: {err}"))
    width = max(len(r[0]) for r in rows) if rows else 4
    click.echo(f"{'NAME':<{width}}  VERSION  SCALE      DESCRIPTION")
    for name, version, scale, desc in rows:
        click.echo(f"{name:<{width}}  {version:<7}  {scale:<9}  {desc}")


SAMPLES: dict[str, dict[str, Any]] = {name: dict(kind.sample) for name, kind in KINDS.items()}
"""The sample job ``rubrics show`` renders for a rubric without goldens, by the kind it grades."""


def sample_job(rubric: Rubric) -> Job:
    """The job ``rubrics show`` renders: the rubric's first golden, else a sample of the kind
    of job the rubric grades (a pair for a pairwise rubric: its Output A and Output B)."""
    row = rubric.goldens[0].job() if rubric.goldens else SAMPLES[kind_for(rubric).name]
    return JOB_MODELS[infer_kind(row)].model_validate(row)


@rubrics.command()
@click.argument("ref")
@click.option("--weights", help="Weight overrides, e.g. accuracy=0.4,clarity=0.15.")
def show(ref: str, weights: str | None) -> None:
    """Show a rubric's frontmatter and the judge request rendered for a sample job."""
    rubric = load_with_overrides(ref, weights)
    front = rubric.model_dump(
        mode="json", exclude={"body", "goldens", "source"}, exclude_none=True, exclude_defaults=True
    )
    click.echo(f"# {rubric.name} {rubric.version}  (source: {rubric.source})")
    click.echo("## Frontmatter")
    click.echo(yaml.safe_dump({"name": rubric.name, **front}, sort_keys=False).rstrip())
    click.echo(f"goldens: {len(rubric.goldens)}")
    request = render_request(rubric, **sample_job(rubric).render_fields())
    click.echo("\n## Rendered request (sample job)")
    for i, block in enumerate(request.system, 1):
        click.echo(f"--- system block {i} (stable across jobs) ---")
        click.echo(block)
    click.echo("--- user message (per job) ---")
    click.echo(request.user)
    click.echo("--- output schema ---")
    click.echo(json.dumps(request.output_schema, indent=2))


@rubrics.command()
@click.argument("refs", nargs=-1, required=True)
def validate(refs: tuple[str, ...]) -> None:
    """Validate rubrics; exit 0 when all are valid, else 1 with one line per problem."""
    bad = 0
    for ref in refs:
        try:
            r = load_with_overrides(ref, None)
        except JudgeqError as err:
            bad += 1
            for line in str(err).splitlines():
                click.echo(f"INVALID {line}")
            continue
        click.echo(
            f"ok      {r.source}: {r.name} {r.version} ({r.scale}, "
            f"{len(r.dimensions)} dimensions, {len(r.goldens)} goldens)"
        )
    if bad:
        sys.exit(1)


def _register() -> None:
    from .calibrate import calibrate

    rubrics.add_command(calibrate)


_register()
