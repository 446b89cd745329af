"""A worker's Prometheus metrics (``JUDGEQ_METRICS_PORT``): the judge's side of a run as the
worker sees it, made from the pipeline's events (:mod:`judgeq.telemetry`).

Per judge (``provider``, ``model``; never a key): calls by outcome, call latency, tokens in and
out, cost, seconds waited for the shared budget, reply-cache hits, verdicts by outcome; per
worker: jobs stored by status and null reason, grade messages in flight, the last heartbeat.
No series is labelled by run (a worker lives through many runs: that would grow without end);
per-run figures are the exporter's (:mod:`judgeq.workers.exporter`), once for the cluster.

A threads worker (the default pool) serves its own registry. A prefork worker's children count
in files under ``PROMETHEUS_MULTIPROC_DIR`` (the ``judgeq worker`` command makes one when it is
not set), and the parent serves their sum: prometheus_client's multiprocess mode.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client import multiprocess as mp
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from judgeq.telemetry import (
    BudgetWaited,
    CacheHit,
    Event,
    JobStored,
    JudgeCall,
    RunChanged,
    add_observer,
)

__all__ = ["LATENCY_BUCKETS", "Metrics", "metrics", "serve_metrics"]

log = logging.getLogger("judgeq.metrics")

LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds: a judge call takes from a tenth of a second (a cached prompt, a small model) to
minutes (a reasoning model near its deadline)."""


class Metrics:
    """The worker's metrics, in ``registry`` (prometheus_client's default one unless given)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import REGISTRY

        reg = registry or REGISTRY
        judge = ("provider", "model")
        self.calls = Counter(
            "judgeq_judge_calls", "Judge calls (attempts) by outcome: ok or the null reason of the error "
            "(rate_limited is a 429, overloaded a 503/529, api_error a 5xx).",
            (*judge, "outcome"), registry=reg,
        )  # fmt: skip
        self.latency = Histogram(
            "judgeq_judge_call_seconds", "Seconds one judge call (attempt) took.",
            judge, buckets=LATENCY_BUCKETS, registry=reg,
        )  # fmt: skip
        self.tokens = Counter(
            "judgeq_judge_tokens", "Tokens of answered judge calls: input (cache writes included), "
            "output, cache_read.", (*judge, "kind"), registry=reg,
        )  # fmt: skip
        self.cost = Counter(
            "judgeq_judge_cost_usd", "USD the stored results' judge calls cost, at the run's prices "
            "(batch discount taken off; a model without a price adds nothing).", ("model",), registry=reg,
        )  # fmt: skip
        self.budget_wait = Counter(
            "judgeq_budget_wait_seconds", "Seconds calls waited for the judge's shared budget (rate limit).",
            judge, registry=reg,
        )  # fmt: skip
        self.cache_hits = Counter(
            "judgeq_reply_cache_hits", "Judge calls answered from the reply cache (no call made).",
            judge, registry=reg,
        )  # fmt: skip
        self.verdicts = Counter(
            "judgeq_verdicts", "Judge replies read as verdicts, by outcome (ok, parse_error, refusal).",
            (*judge, "outcome"), registry=reg,
        )  # fmt: skip
        self.jobs = Counter(
            "judgeq_jobs_stored", "Job results stored (each job once), by status and null reason "
            "(reason is empty for a graded job).", ("judge", "status", "reason"), registry=reg,
        )  # fmt: skip
        self.run_changes = Counter(
            "judgeq_run_state_changes", "Run state changes seen by this worker (paused, resumed, "
            "finalized, canceled).", ("state",), registry=reg,
        )  # fmt: skip
        self.in_flight = Gauge(
            "judgeq_jobs_in_flight", "Jobs this worker is grading now.", registry=reg,
            multiprocess_mode="livesum",
        )  # fmt: skip
        self._lock = threading.Lock()
        self._judge: dict[tuple[str, str], tuple[Any, Any, Any, Any]] = {}
        """A judge's children on the hot path (a call's latency and tokens), found once."""
        self.heartbeat = Gauge(
            "judgeq_worker_heartbeat_timestamp_seconds", "When this worker last beat (Unix time).",
            registry=reg, multiprocess_mode="max",
        )  # fmt: skip

    def _first_sight(self, provider: str, model: str) -> tuple[Any, Any, Any, Any]:
        """A judge's series at 0 from its first event on (a rate over them is 0, not absent:
        dashboards and alerts see the judge before its first 429, wait or cache hit); its
        children on the hot path."""
        key = (provider, model)
        found = self._judge.get(key)
        if found is not None:
            return found
        with self._lock:
            if key not in self._judge:
                for outcome in ("ok", "rate_limited"):
                    self.calls.labels(provider, model, outcome)
                self.budget_wait.labels(provider, model)
                self.cache_hits.labels(provider, model)
                self.verdicts.labels(provider, model, "ok")
                self._judge[key] = (  # last: a reader that finds it finds everything above
                    self.latency.labels(provider, model),
                    self.tokens.labels(provider, model, "input"),
                    self.tokens.labels(provider, model, "output"),
                    self.tokens.labels(provider, model, "cache_read"),
                )
            return self._judge[key]

    def observe(self, event: Event) -> None:
        """The observer (:func:`judgeq.telemetry.add_observer`)."""
        if isinstance(event, JudgeCall):
            latency, tokens_in, tokens_out, tokens_cached = self._first_sight(event.provider, event.model)
            self.calls.labels(event.provider, event.model, event.outcome).inc()
            if not event.batch:  # a batch's answer comes in hours: not a call's latency
                latency.observe(event.seconds)
            if event.outcome == "ok":
                tokens_in.inc(event.input_tokens)
                tokens_out.inc(event.output_tokens)
                tokens_cached.inc(event.cache_read_tokens)
        elif isinstance(event, JobStored):
            self.jobs.labels(event.judge, event.status, event.reason or "").inc()
            for model, usd in event.cost_usd.items():
                if usd > 0:
                    self.cost.labels(model).inc(usd)
        elif isinstance(event, RunChanged):
            self.run_changes.labels(event.state).inc()
        else:
            self._first_sight(event.provider, event.model)
            if isinstance(event, BudgetWaited):
                self.budget_wait.labels(event.provider, event.model).inc(event.seconds)
            elif isinstance(event, CacheHit):
                self.cache_hits.labels(event.provider, event.model).inc()
            else:
                self.verdicts.labels(event.provider, event.model, event.outcome).inc()

    def beat(self) -> None:
        self.heartbeat.set(time.time())


_lock = threading.Lock()
_metrics: Metrics | None = None


def metrics() -> Metrics:
    """This process's metrics, made and registered as an observer on first use (in a prefork
    child: the child's own, written to the multiprocess directory)."""
    global _metrics
    with _lock:
        if _metrics is None:
            _metrics = Metrics()
            add_observer(_metrics.observe)
        return _metrics


_LIVE_GAUGE = re.compile(r"gauge_live[a-z]*_(\d+)\.db$")


class DeadChildren(Collector):
    """Before each scrape in multiprocess mode: the live gauges (jobs in flight) of child
    processes that are gone (killed by a time limit or the OOM killer, or replaced) are
    removed, so they stop counting; a pid reused later starts afresh. Yields no metric."""

    def __init__(self, path: str) -> None:
        self.path = path

    def collect(self) -> Iterator[Metric]:
        try:
            names = os.listdir(self.path)
        except OSError:
            return iter(())
        for name in names:
            found = _LIVE_GAUGE.match(name)
            if found and not _alive(int(found.group(1))):
                mp.mark_process_dead(int(found.group(1)), self.path)
        return iter(())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def serve_metrics(port: int, addr: str = "127.0.0.1") -> Any:
    """Serve ``/metrics`` on ``port``: this process's registry, or, in multiprocess mode, the
    sum over every process writing to ``PROMETHEUS_MULTIPROC_DIR``. Returns the server."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        registry.register(DeadChildren(os.environ["PROMETHEUS_MULTIPROC_DIR"]))  # before the sum
        mp.MultiProcessCollector(registry)
        metrics()  # the parent's own (heartbeat)
        server, _ = start_http_server(port, addr=addr, registry=registry)
    else:
        metrics()
        server, _ = start_http_server(port, addr=addr)
    log.info("metrics on http://%s:%d/metrics", addr, server.server_port)
    return server
