"""The judge's rate limit in one process (``judgeq run``, tests): the policy of
:mod:`judgeq.ratelimit.policy` over plain Python state, with an injectable clock. The Redis
implementation (:mod:`judgeq.ratelimit.redis`) runs the same steps in Lua; one contract test
(``tests/core/test_budget.py``) holds both to the policy."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from judgeq.ratelimit.policy import (
    CLEAN,
    CUT,
    DEFAULT_RETRY_AFTER,
    DIMENSIONS,
    FLOOR,
    GROW,
    GROW_NEAR,
    MIN_EVIDENCE,
    MIN_REFUSED,
    MIN_SHARE,
    MIN_SPAN,
    NEAR,
    PACE,
    PROBE,
    PROBE_STEP,
    RECENT,
    WINDOW,
    BudgetState,
    Grant,
    Limits,
    Share,
    Usage,
    capacity,
    server_limits,
    start,
)

__all__ = ["MemoryBudget"]

_STAT = ("a", "o", "r", "q", "x")
"""Per-second counts: granted, served, jobs refused (a first refusal), 429s, and refusals of jobs
refused for themselves (again, with no congestion in between)."""


@dataclass(slots=True)
class _Buckets:
    levels: dict[str, float] = field(default_factory=dict)  # absent: not started (starts full)
    at: float | None = None

    def refill(self, now: float, limits: Mapping[str, float]) -> None:
        elapsed = 0.0 if self.at is None else max(0.0, now - self.at)
        self.at = now
        for dim, limit in limits.items():
            cap = capacity(dim, limit)
            level = self.levels.get(dim)
            self.levels[dim] = start(dim, cap) if level is None else min(cap, level + elapsed * limit / 60.0)

    def wait(self, need: Mapping[str, float], limits: Mapping[str, float]) -> float:
        wait = 0.0
        for dim, limit in limits.items():
            want = min(need[dim], capacity(dim, limit))  # a large request waits for a full bucket
            level = self.levels[dim]
            if level < want - 1e-6:  # a rounding remnant is no wait (it would never pass)
                wait = max(wait, (want - level) * 60.0 / limit)
        return wait

    def add(self, amounts: Mapping[str, float]) -> None:
        for dim, amount in amounts.items():
            if dim in self.levels:
                self.levels[dim] += amount


class MemoryBudget:
    """A :class:`~judgeq.ratelimit.policy.Budget` for one process; ``clock`` is injectable."""

    def __init__(self, name: str = "memory", clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._judge = _Buckets()
        self._runs: dict[str, _Buckets] = {}
        self._config: dict[str, int] = {}
        self._server: dict[str, int] = {}
        self._adaptive: float | None = None  # requests a minute; None: no adaptive limit
        self._peak = math.inf  # the capacity estimated at the last cut (requests a minute)
        self._epoch = 0  # congestion episodes so far
        self._pause = 0.0
        self._changed = -math.inf  # the adaptive rate was last cut or grown
        self._bound_at = -math.inf  # the adaptive rate last held a caller back
        self._began = math.inf  # this epoch's first grant
        self._stats: dict[int, list[int]] = {}
        self._recent: deque[int] = deque(maxlen=RECENT)  # this epoch's last answers: 1 refused
        self._waiting: dict[int, float] = {}
        self._answered = False  # an answer (served, refused or headers) came back
        self._probe: float | None = None  # the grant of the call that went alone

    # ------------------------------------------------------------------ helpers

    def _limits(self) -> dict[str, float]:
        """The rate each bucket refills at (requests or tokens a minute)."""
        out: dict[str, float] = {}
        for dim in DIMENSIONS:
            known = [x for x in (self._config.get(dim), self._server.get(dim)) if x]
            if known:
                out[dim] = PACE * min(known)
            elif dim == "requests" and self._adaptive:
                out[dim] = self._adaptive
        return out

    def _adaptive_applies(self) -> bool:
        return not self._config.get("requests") and not self._server.get("requests")

    def _count(self, now: float, what: str) -> None:
        sec = math.floor(now)
        row = self._stats.get(sec)
        if row is None:
            row = self._stats[sec] = [0, 0, 0, 0, 0]
            for old in [s for s in self._stats if s < sec - 60]:
                del self._stats[old]
        row[_STAT.index(what)] += 1

    def _window(self, now: float, first: int) -> dict[str, int]:
        """The counts of the whole seconds from ``first`` to now."""
        sec = math.floor(now)
        rows = [self._stats[s] for s in range(first, sec + 1) if s in self._stats]
        return {k: sum(r[i] for r in rows) for i, k in enumerate(_STAT)}

    def _wait(self, caller: int, now: float, until: float) -> None:
        for gone in [c for c, t in self._waiting.items() if t <= now]:
            del self._waiting[gone]
        self._waiting[caller] = until

    def _congested(self) -> bool:
        refused, answered = sum(self._recent), len(self._recent)
        return answered >= MIN_EVIDENCE and refused >= MIN_REFUSED and refused >= MIN_SHARE * answered

    def _refund(self, amounts: dict[str, float], share: Share | None) -> None:
        self._judge.add(amounts)
        if share is not None and share.run in self._runs:
            self._runs[share.run].add(amounts)

    # ------------------------------------------------------------------ the policy's steps

    def acquire(self, input_tokens: int, output_tokens: int, share: Share | None = None) -> Grant:
        caller = threading.get_ident()
        with self._lock:
            now = self._clock()
            if now < self._pause:
                self._wait(caller, now, self._pause)
                return Grant(self._pause - now, self._epoch)
            limits = self._limits()
            if not limits and not self._answered:  # one call alone may find the server's limits
                if self._probe is None:
                    self._probe = now
                elif now < self._probe + PROBE:
                    self._wait(caller, now, now + PROBE_STEP)
                    return Grant(PROBE_STEP, self._epoch)
            need = {
                "requests": 1.0,
                "input-tokens": float(input_tokens),
                "output-tokens": float(output_tokens),
            }
            self._judge.refill(now, limits)
            wait = self._judge.wait(need, limits)
            run = None
            if share is not None and limits:
                run_limits = {d: v * share.fraction for d, v in limits.items()}
                run = self._runs.setdefault(share.run, _Buckets())
                run.refill(now, run_limits)
                wait = max(wait, run.wait(need, run_limits))
            if wait > 0.0:
                if (
                    self._adaptive
                    and self._adaptive_applies()
                    and self._judge.levels["requests"] < 1.0 - 1e-6
                ):
                    self._bound_at = now
                self._wait(caller, now, now + wait)
                return Grant(wait, self._epoch)
            self._judge.add({d: -need[d] for d in limits})
            if run is not None:
                run.add({d: -need[d] for d in limits})
            self._count(now, "a")
            self._began = min(self._began, now)
            self._waiting.pop(caller, None)
            return Grant(0.0, self._epoch)

    def settle(
        self, reserved: Usage, used: Usage, *, ok: bool, epoch: int, share: Share | None = None
    ) -> None:
        with self._lock:
            self._refund(
                {
                    "input-tokens": float(reserved.input_tokens - used.input_tokens),
                    "output-tokens": float(reserved.output_tokens - used.output_tokens),
                },
                share,
            )
            self._answered = True
            if not ok:
                return
            now = self._clock()
            self._count(now, "o")
            if epoch == self._epoch:
                self._recent.append(0)
            if (
                self._adaptive
                and self._adaptive_applies()
                and now - self._changed >= CLEAN
                and self._bound_at >= self._changed
                and not self._congested()
            ):
                near = self._adaptive >= NEAR * self._peak
                self._adaptive = (
                    self._adaptive * GROW_NEAR if near else min(self._adaptive * GROW, NEAR * self._peak)
                )
                if self._adaptive >= 2 * self._peak:  # served well past its last capacity: it rose
                    self._peak = self._adaptive
                self._changed = now

    def refused(
        self,
        reserved: Usage,
        retry_after: float | None,
        *,
        epoch: int,
        nth: int = 1,
        first_epoch: int = -1,
        share: Share | None = None,
    ) -> float:
        with self._lock:
            self._refund(
                {
                    "input-tokens": float(reserved.input_tokens),
                    "output-tokens": float(reserved.output_tokens),
                },
                share,
            )
            self._answered = True
            now = self._clock()
            self._count(now, "q")
            if nth == 1:
                self._count(now, "r")
            elif first_epoch == epoch:
                self._count(now, "x")  # refused again with no congestion in between: for itself
            if epoch != self._epoch:  # sent before the last congestion was acted on: no news
                return 0.0
            if nth == 1:
                self._recent.append(1)
            elif nth == 2 and first_epoch == epoch and 1 in self._recent:
                # refused again with no congestion in between: refused for itself, not news
                self._recent.remove(1)
                self._recent.appendleft(0)
            if not self._congested():
                return 0.0
            pause = DEFAULT_RETRY_AFTER if retry_after is None else max(0.0, retry_after)
            self._pause = max(self._pause, now + pause)
            self._epoch += 1
            self._recent.clear()
            if self._adaptive_applies():
                self._cut(now, pause)
            return pause

    def _cut(self, now: float, pause: float) -> None:
        # the rates of this epoch's calls in the last WINDOW seconds (whole seconds: the stats')
        began = self._began if self._began <= now else now
        begin = max(began, math.floor(now) - math.ceil(WINDOW) + 1)
        span = max(now - begin, MIN_SPAN)
        w = self._window(now, math.floor(begin))
        if w["a"] == 0 and w["o"] == 0:  # slow calls: nothing of this epoch's in the window; the minute
            begin = max(began, math.floor(now) - 59)
            span = max(now - begin, MIN_SPAN)
            w = self._window(now, math.floor(begin))
        # the rate granted, and what the server answered (served, or refused a job for itself),
        # spread over its retry-after when that is longer (a sliding minute full for another
        # 50 s); a rate not seen says nothing
        answered = (w["o"] + w["x"]) / max(span, pause)
        per_second = [r for r in (w["a"] / span, answered) if r > 0]
        if self._adaptive:
            per_second.append(self._adaptive / 60.0)
        if per_second:
            self._peak = 60.0 * min(per_second)
            self._adaptive = max(FLOOR, CUT * self._peak)
        self._changed = now
        self._began = now + pause
        if "requests" in self._judge.levels:
            self._judge.levels["requests"] = min(self._judge.levels["requests"], 0.0)

    def observe(self, headers: Mapping[str, str]) -> None:
        learned = server_limits(headers)
        if not learned:
            return
        with self._lock:
            self._answered = True
            if all(self._server.get(k) == v for k, v in learned.items()):
                return
            self._server.update(learned)
            if "requests" in learned:
                self._adaptive = None
            self._judge.refill(self._clock(), self._limits())  # new buckets start small
            for dim, remaining in server_limits(headers, "remaining").items():
                if dim in self._judge.levels:
                    self._judge.levels[dim] = min(self._judge.levels[dim], float(remaining))

    def configure(self, limits: Limits | None) -> None:
        with self._lock:
            self._config = {**self._config, **limits.by_dimension()} if limits is not None else {}
            if self._config.get("requests"):
                self._adaptive = None

    def snapshot(self) -> BudgetState:
        with self._lock:
            now = self._clock()
            limits = self._limits()
            self._judge.refill(now, limits)
            minute = self._window(now, math.floor(now) - 59)
            return BudgetState(
                name=self.name,
                configured=Limits.of(self._config),
                server=Limits.of(self._server),
                adaptive_rpm=self._adaptive if self._adaptive_applies() else None,
                levels={d: self._judge.levels[d] for d in limits},
                paused_for=max(0.0, self._pause - now),
                requests_last_minute=minute["a"],
                served_last_minute=minute["o"],
                refused_last_minute=minute["q"],
                waiting=sum(1 for until in self._waiting.values() if until > now),
            )
