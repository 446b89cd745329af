"""``judgeq resume RUN``: continue a run that paused on a systemic judge failure."""

from __future__ import annotations

from typing import Any

import click

from judgeq.errors import ConfigError

from .options import redis_option, settings_from

__all__ = ["CHUNK", "resume"]

CHUNK = 1000


@click.command()
@click.argument("run_id")
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="A new cost limit in USD (a run paused on its limit needs a higher one).",
)
@redis_option
def resume(run_id: str, max_cost: float | None, **flags: Any) -> None:
    """Resume RUN_ID after fixing what paused it (a key, the account, the model, the cost limit).

    Its pending jobs are enqueued again; jobs already graded are skipped, so nothing is
    graded or counted twice.
    """
    from judgeq.store.redis import RedisStore
    from judgeq.workers.celery_app import create_app

    from ..celery_dispatch import CeleryDispatcher

    settings = settings_from(**flags)
    store = RedisStore.open(settings)
    spec = store.spec(run_id)
    if spec is None:
        raise ConfigError(f"run {run_id!r} is unknown or expired")
    unpriced = spec.unpriced_models()
    if max_cost is not None and unpriced:  # its calls would count as nothing against the limit
        raise ConfigError(
            f"run {run_id} has no price for model {unpriced[0]!r}, so a cost limit cannot hold: "
            "resume it without --max-cost, or submit the batch again with a prices file "
            "(JUDGEQ_PRICES=path, the format of judgeq/data/prices.json)"
        )
    state = store.state(run_id)
    reason = state.get("pause_reason") or "?"
    spent = store.counters(run_id).get("cost_usd", 0.0)
    limit = max_cost if max_cost is not None else float(state.get("max_cost_usd") or 0)
    if state.get("state") == "paused" and limit and spent >= limit:
        raise ConfigError(
            f"run {run_id} has spent ${spent:.4f} of its ${limit:.4f} limit: resume it with a higher "
            "--max-cost"
        )
    if state.get("state") == "paused" and reason.startswith("max_cost:") and max_cost is None:
        # the Message Batches lane pauses before a batch that would pass the limit
        raise ConfigError(
            f"run {run_id} paused on its cost limit ({reason}): resume it with a higher --max-cost"
        )
    if max_cost is not None:
        store.set_state(run_id, max_cost_usd=max_cost)
    if not store.resume(run_id):
        raise ConfigError(f"run {run_id} is not paused (it is {state.get('state', 'unknown')})")
    spec = store.spec(run_id)
    judges = spec.judges if spec is not None else []
    dispatcher = CeleryDispatcher(create_app(settings), settings.queue, settings.jobs_per_message, judges)
    pending = store.pending_indices(run_id)
    for i in range(0, len(pending), CHUNK):
        group = pending[i : i + CHUNK]
        dispatcher.resend(run_id, group, store.job_ids(run_id, group))
    click.echo(
        f"judgeq: run {run_id} resumed ({len(pending)} pending job(s) enqueued again); it had paused "
        f"on: {reason}",
        err=True,
    )
    click.echo(f"judgeq: follow it with 'judgeq status {run_id}'", err=True)
