"""``judgeq exporter``: the Redis-side figures of the whole cluster for Prometheus, read once per
scrape (not once per worker): queue depth, live workers, each active run's progress (jobs done,
graded, nulls by reason, pending, rate, time left, spend against its ``--max-cost``, paused or
not, seconds since its last result) and each judge budget's limits and levels.

A run is exported while it is active (not yet finished or canceled) and for
``grace`` seconds after (300 by default), so its final figures are scraped; then its series go
(Prometheus marks them stale): the run label never accumulates. Budgets are labelled by
provider, model and the first 8 hex digits of the key's sha256 (as ``judgeq budget`` shows
them), never by the key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from judgeq.ratelimit import COMBINED, DIMENSIONS
from judgeq.store.redis import RedisStore

from .progress import snapshot

__all__ = ["ClusterCollector", "serve_exporter"]

log = logging.getLogger("judgeq.exporter")

FINISHED = ("finished", "canceled", "incomplete", "failed", "archived")
"""Run states after which a run is exported only for the grace period."""
RECENT_RUNS = 500
"""Runs looked at per scrape (the newest; active runs are among them): their states are read in
one round trip, and only the active ones further."""
WORKERS_EVERY = 30.0
"""Seconds between two counts of the live workers."""


def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class ClusterCollector(Collector):
    """Reads the store (and the broker, through ``queue_depth``) at each scrape."""

    def __init__(
        self,
        store: RedisStore,
        queue: str,
        queue_depth: Callable[[], int],
        *,
        grace: float = 300.0,
    ) -> None:
        self.store, self.queue, self.queue_depth, self.grace = store, queue, queue_depth, grace
        self._counted: tuple[float, int] | None = None

    def _workers(self) -> int:
        """Live workers, counted at most every :data:`WORKERS_EVERY` seconds (their heartbeats
        are found by a SCAN of the keyspace, which holds a key per cached reply too)."""
        now = time.monotonic()
        if self._counted is None or now - self._counted[0] >= WORKERS_EVERY:
            self._counted = (now, len(self.store.workers(self.queue)))
        return self._counted[1]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        started = time.monotonic()
        up = GaugeMetricFamily("judgeq_exporter_up", "1 when Redis and the broker answered this scrape.")
        try:
            families = list(self._collect())
        except Exception as exc:  # Redis or the broker down: say so, never a traceback per scrape
            log.warning("exporter scrape failed: %s", exc)
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        yield up
        yield from families
        took = GaugeMetricFamily("judgeq_exporter_scrape_seconds", "Seconds this scrape took.")
        took.add_metric([], time.monotonic() - started)
        yield took

    def _collect(self) -> Iterator[GaugeMetricFamily]:
        queue = GaugeMetricFamily(
            "judgeq_queue_messages", "Grade messages waiting on the broker.", labels=["queue"]
        )
        queue.add_metric([self.queue], float(self.queue_depth()))
        yield queue
        workers = GaugeMetricFamily(
            "judgeq_workers", "Workers whose heartbeat in Redis is alive.", labels=["queue"]
        )
        workers.add_metric([self.queue], float(self._workers()))
        yield workers
        yield from self._runs()
        yield from self._budgets()

    def _runs(self) -> Iterator[GaugeMetricFamily]:
        store, now = self.store, self.store.now()
        run = ["run"]
        fam = {
            "info": GaugeMetricFamily(
                "judgeq_run_info", "1 per exported run, with its judge, state and lane.",
                labels=["run", "judge", "state", "lane"],
            ),
            "total": GaugeMetricFamily("judgeq_run_jobs", "Jobs of the run.", labels=run),
            "done": GaugeMetricFamily("judgeq_run_jobs_done", "Jobs with a stored result.", labels=run),
            "graded": GaugeMetricFamily("judgeq_run_jobs_graded", "Jobs graded (not null).", labels=run),
            "pending": GaugeMetricFamily("judgeq_run_jobs_pending", "Jobs without a result yet.", labels=run),
            "nulls": GaugeMetricFamily(
                "judgeq_run_nulls", "Null results by reason.", labels=["run", "reason"]
            ),
            "rate": GaugeMetricFamily(
                "judgeq_run_jobs_per_second", "Jobs finished a second since the run started.", labels=run
            ),
            "eta": GaugeMetricFamily(
                "judgeq_run_eta_seconds", "Estimated seconds left (absent while unknown or paused).",
                labels=run,
            ),
            "cost": GaugeMetricFamily("judgeq_run_cost_usd", "USD spent on the judge so far.", labels=run),
            "limit": GaugeMetricFamily(
                "judgeq_run_max_cost_usd", "The run's cost limit (--max-cost); absent without one.",
                labels=run,
            ),
            "paused": GaugeMetricFamily("judgeq_run_paused", "1 while the run is paused.", labels=run),
            "waiting": GaugeMetricFamily(
                "judgeq_run_judge_waiting_seconds", "Seconds the run has waited for its judge, which "
                "answers no job (its jobs held, not nulled); 0 while it answers.", labels=run,
            ),
            "quiet": GaugeMetricFamily(
                "judgeq_run_seconds_since_progress", "Seconds since the run last stored a result "
                "(since it started, before its first).", labels=run,
            ),
        }  # fmt: skip
        ids = store.runs(RECENT_RUNS)
        for run_id, state in zip(ids, store.states(ids), strict=True):
            status = state.get("state", "")
            if status in FINISHED:
                finished = _epoch(state.get("finished_at"))
                if finished is None or now - finished > self.grace:
                    continue
            snap = snapshot(store, run_id, now=now)
            spec = store.spec(run_id)
            if snap is None or spec is None:
                continue
            label = [run_id]
            judge = str(spec.judge)
            fam["info"].add_metric([run_id, judge, status or "running", spec.lane], 1.0)
            fam["total"].add_metric(label, float(snap.total))
            fam["done"].add_metric(label, float(snap.done))
            fam["graded"].add_metric(label, float(snap.graded))
            fam["pending"].add_metric(label, float(max(0, snap.total - snap.done)))
            for reason, n in snap.nulls.items():
                fam["nulls"].add_metric([run_id, reason], float(n))
            fam["rate"].add_metric(label, float(snap.rate or 0.0))
            if snap.eta_s is not None and status != "paused" and snap.waiting_s is None:
                fam["eta"].add_metric(label, float(snap.eta_s))
            fam["cost"].add_metric(label, snap.cost_usd)
            limit = float(state.get("max_cost_usd") or 0)
            if limit > 0:
                fam["limit"].add_metric(label, limit)
            fam["paused"].add_metric(label, 1.0 if status == "paused" else 0.0)
            fam["waiting"].add_metric(label, snap.waiting_s or 0.0)
            since = snap.last_done_s
            if since is None:
                started = float(state.get("started_epoch") or 0)
                since = now - started if started else None
            if since is not None:
                fam["quiet"].add_metric(label, max(0.0, since))
        yield from fam.values()

    def _budgets(self) -> Iterator[GaugeMetricFamily]:
        from judgeq.ratelimit.redis import budget_names, read_state

        labels = ["provider", "model", "budget", "dimension"]
        limit = GaugeMetricFamily(
            "judgeq_budget_limit_per_minute",
            "The limit that applies to a judge's shared budget, per minute (set, stated by the server, "
            "or found from 429s).",
            labels=labels,
        )
        level = GaugeMetricFamily(
            "judgeq_budget_available", "What a judge's budget lets be sent at once now.", labels=labels
        )
        short = ["provider", "model", "budget"]
        sent = GaugeMetricFamily(
            "judgeq_budget_requests_last_minute",
            "Requests the budget granted in the last minute.",
            labels=short,
        )
        refused = GaugeMetricFamily(
            "judgeq_budget_refused_last_minute", "Requests the server refused (429) in the last minute.",
            labels=short,
        )  # fmt: skip
        waiting = GaugeMetricFamily(
            "judgeq_budget_waiting", "Callers waiting for the budget now.", labels=short
        )
        client = self.store.r
        for name in budget_names(client):
            state = read_state(client, name)
            provider, _, rest = name.partition(":")
            model, _, digest = rest.rpartition(":")
            who = [provider, model, digest[:8]]
            applies = state.effective()
            if state.tokens_limit:
                applies[COMBINED] = float(state.tokens_limit)
            for dim in (*DIMENSIONS, COMBINED):
                if dim in applies:
                    limit.add_metric([*who, dim], applies[dim])
                    if dim in state.levels:
                        level.add_metric([*who, dim], state.levels[dim])
            sent.add_metric(who, float(state.requests_last_minute))
            refused.add_metric(who, float(state.refused_last_minute))
            waiting.add_metric(who, float(state.waiting))
        yield from (limit, level, sent, refused, waiting)


def serve_exporter(collector: ClusterCollector, port: int, addr: str = "127.0.0.1") -> Any:
    """Serve the collector's figures on ``port`` (``/metrics``); returns the server."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, _ = start_http_server(port, addr=addr, registry=registry)
    return server
