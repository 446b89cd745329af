"""Options shared by several subcommands; each also reads its ``JUDGEQ_…`` variable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from judgeq.judges.providers import spec_forms
from judgeq.settings import Settings

from ..settings import settings_for

__all__ = ["F", "grading_options", "out_option", "redis_option", "settings_from"]

F = Callable[..., Any]


def redis_option(f: F) -> F:
    return click.option(
        "--redis-url",
        envvar="JUDGEQ_REDIS_URL",
        default=None,
        help="Redis URL for the store and broker [JUDGEQ_REDIS_URL; default redis://localhost:6379/0].",
    )(f)


def out_option(f: F) -> F:
    return click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Directory for report files [JUDGEQ_RESULTS_DIR; default ./results].",
    )(f)


def grading_options(f: F) -> F:
    """The options of ``submit`` and ``run``."""
    opts: list[Callable[[F], F]] = [
        click.argument("jobs_file", metavar="JOBS_FILE"),
        click.option(
            "--rubric", "rubric_ref", required=True, help="Built-in rubric name or path to a rubric .md file."
        ),
        click.option(
            "--judge",
            multiple=True,
            help=f"{spec_forms()} [JUDGEQ_JUDGE; default anthropic when "
            "ANTHROPIC_API_KEY is set, else lexical]. Give it several times for a council of "
            "judges: every job is graded by each.",
        ),
        click.option(
            "--council",
            "council_mode",
            type=click.Choice(["mean", "z"]),
            default=None,
            help="How a council's scores combine: mean (default) or z (mean of per-judge z-scores).",
        ),
        click.option(
            "--jury",
            type=click.Choice(["median", "mean"]),
            default=None,
            help="Make the council a jury: a category (pass/fail, a pair's winner) is the one more "
            "than half of the whole panel gave, members that gave no verdict counted; scores are "
            "the median (or mean) of the members that answered, when more than half did.",
        ),
        click.option(
            "--no-majority",
            "no_majority",
            type=click.Choice(["null", "tie"]),
            default=None,
            help="A jury's pair no verdict has a majority for: a null (no_majority; default) or a tie.",
        ),
        click.option(
            "--cascade",
            default=None,
            metavar="JUDGE,JUDGE[,...]",
            help="Grade with a cascade of judges, cheapest first: each job is kept by the first judge "
            "confident enough and escalated otherwise; a job no judge is confident about is "
            "abstained. Needs --calibration.",
        ),
        click.option(
            "--calibration",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="A cascade's calibration set: a jobs file with a person's label on every job, "
            "graded by every judge of the cascade first (run id RUN_ID-calibration) to fit the "
            "thresholds.",
        ),
        click.option(
            "--agreement",
            type=float,
            default=None,
            help="A cascade's guaranteed agreement with people of the verdicts it keeps [default 0.85].",
        ),
        click.option(
            "--risk",
            type=float,
            default=None,
            help="The chance the cascade's guarantee fails, over calibration sets [default 0.1].",
        ),
        click.option(
            "--samples",
            type=int,
            default=None,
            help="Samples per judge of a cascade: its confidence is the share agreeing [default 3].",
        ),
        click.option(
            "--disagreement",
            type=float,
            default=None,
            help="A council disagrees on a job when its judges' scores spread more than this "
            "[default: 30% of the scale].",
        ),
        click.option(
            "--no-swap",
            "no_swap",
            is_flag=True,
            help="Judge each pair once (A first) instead of in both orders.",
        ),
        click.option("--weights", default=None, help="Dimension weights, e.g. accuracy=0.4,clarity=0.15."),
        click.option(
            "--thresholds", default=None, help="Pass-rate thresholds, e.g. 8,7,6.5 [JUDGEQ_THRESHOLDS]."
        ),
        click.option("--run-id", default=None, help="Run id (re-submitting one skips graded jobs)."),
        click.option(
            "--skip-invalid", is_flag=True, help="Grade the valid lines; record rejected ones in the report."
        ),
        click.option(
            "--dry-run",
            is_flag=True,
            help="Validate, render every request, count tokens and estimate the cost; call no judge.",
        ),
        click.option(
            "--position-weights",
            default=None,
            help="Retrieval rank weights, e.g. 1=1.0,2-3=0.95,4-5=0.85 [default: the rubric's].",
        ),
        click.option(
            "--default-weight",
            type=float,
            default=None,
            help="Retrieval weight when the needle is missing or beyond every band [rubric's; 0.6].",
        ),
        click.option("--hit-k", default=None, help="Retrieval hit@k cut-offs, e.g. 1,3,5,10."),
        click.option(
            "--safety-gate/--no-safety-gate",
            default=None,
            help="Force the safety gate on or off [JUDGEQ_SAFETY_GATE; default: the rubric's].",
        ),
        click.option(
            "--judge-timeout",
            type=float,
            default=None,
            help="Seconds per judge attempt [JUDGEQ_JUDGE_TIMEOUT; default 30].",
        ),
        click.option(
            "--rpm",
            type=click.IntRange(min=1),
            default=None,
            help="Set the judge's requests per minute, for every run and worker on it [JUDGEQ_JUDGE_RPM; "
            "default: the server's].",
        ),
        click.option(
            "--itpm",
            type=click.IntRange(min=1),
            default=None,
            help="Set the judge's input tokens per minute [JUDGEQ_JUDGE_ITPM; default: the server's].",
        ),
        click.option(
            "--otpm",
            type=click.IntRange(min=1),
            default=None,
            help="Set the judge's output tokens per minute [JUDGEQ_JUDGE_OTPM; default: the server's].",
        ),
        click.option(
            "--share",
            type=click.FloatRange(min=0, max=1, min_open=True),
            default=None,
            help="This run takes at most this share of each judge limit [JUDGEQ_JUDGE_SHARE; default: all].",
        ),
        click.option(
            "--max-cost",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Pause the run (no new judge calls) once it has spent this many USD [JUDGEQ_MAX_COST].",
        ),
        click.option(
            "--prices",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="A prices file of your own, the format of judgeq/data/prices.json: adds or "
            "replaces model prices [JUDGEQ_PRICES].",
        ),
        click.option(
            "--no-cache",
            "no_cache",
            is_flag=True,
            help="Ask the judge again even for requests whose reply is cached [JUDGEQ_CACHE=false].",
        ),
        click.option(
            "--batch-api",
            "batch_api",
            is_flag=True,
            default=None,
            help="Send judge calls as Message Batches: half the price, results within 24 h "
            "(usually minutes) [JUDGEQ_BATCH_API].",
        ),
        click.option(
            "--judge-deadline",
            type=float,
            default=None,
            help="Seconds for all attempts of one job [JUDGEQ_JUDGE_DEADLINE; default 120].",
        ),
        out_option,
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def settings_from(**flags: Any) -> Settings:
    return settings_for(**flags)
