"""The judge budget on a virtual clock: a deterministic discrete-event simulation that runs the
real budget against modelled servers (issue 28).

What is real and what is modelled:

* **Real**: the budget (:class:`~judgeq.ratelimit.MemoryBudget`: the same Lua scripts Redis
  runs), the callers' retry loop (:func:`~judgeq.judges.base.call_with_retries`: retries,
  ``retry-after``, deadlines, ``JUDGEQ_MAX_RATE_LIMITED``, token estimates and settlement), the
  reading of rate-limit headers (:func:`~judgeq.judges.base.retry_after_seconds`, the budget's
  ``observe``), and the servers' limit models (:mod:`judgeq.testing.limits`, which the stand-in
  servers enforce too).
* **Modelled**: time (every caller is a greenlet; ``sleep`` advances a virtual clock, so a
  simulated hour takes a second and nothing depends on the machine's speed), workers (``W``
  workers of ``C`` callers each, taking jobs from one queue, as Celery workers take messages),
  and each server: its limits, how it enforces them, which headers it sends, its
  ``retry-after``, its latency, its faults.

A :class:`Scenario` is one cell of the matrix; :func:`run` plays it and measures a
:class:`Cell`; :func:`matrix` lists the cells ``benchmarks/budget_sim.py`` prints and
``tests/core/test_budget_sim.py`` holds to their thresholds (:meth:`Cell.failures`).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import format_datetime

from greenlet import getcurrent, greenlet

from judgeq.errors import JudgeAPIError, JudgeRateLimited, JudgeTimeout
from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import JudgeReply, RetryPolicy, call_with_retries, retry_after_seconds
from judgeq.judges.shared_limits import canonical_model
from judgeq.ratelimit import Limits, MemoryBudget, budget_key
from judgeq.testing.limits import Limiter, make_limit

__all__ = [
    "BENCHMARK_MODELS",
    "Cell",
    "Scenario",
    "Server",
    "VirtualTime",
    "benchmark_row",
    "matrix",
    "run",
    "table",
    "use_after",
]

EPOCH = 1_800_000_000.0
"""The wall-clock time (epoch seconds) of virtual time 0: dates in headers are written from it."""


class VirtualTime:
    """Greenlets on a virtual clock: :meth:`sleep` parks the caller until the clock reaches its
    wake time; the clock jumps from one wake time to the next. Ties wake in the order they
    slept, so a run is deterministic."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, greenlet]] = []
        self._seq = 0
        self._hub: greenlet | None = None

    def clock(self) -> float:
        return self.now

    def spawn(self, fn: Callable[[], None], at: float = 0.0) -> greenlet:
        g = greenlet(fn)
        self._push(at, g)
        return g

    def _push(self, at: float, g: greenlet) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, g))

    def sleep(self, seconds: float) -> None:
        assert self._hub is not None, "sleep() outside run()"
        self._push(self.now + max(0.0, seconds), getcurrent())
        self._hub.switch()

    def run(self, until: float = math.inf) -> None:
        """Run every greenlet until none is left or the clock would pass ``until``."""
        self._hub = getcurrent()
        while self._queue and self._queue[0][0] <= until:
            at, _, g = heapq.heappop(self._queue)
            self.now = max(self.now, at)
            g.parent = self._hub
            g.switch()
        self._queue.clear()


# ----------------------------------------------------------------------------- the servers


@dataclass(frozen=True)
class Server:
    """How one server (one model's limits) behaves.

    ``rpm``/``itpm``/``otpm``/``tpm``: the limits it enforces (None: none); ``model``: how
    (:data:`judgeq.testing.limits.LIMIT_MODELS`, or ``concurrency``: at most ``concurrency``
    calls in flight); ``headers``: ``anthropic``, ``openai``, ``none``, ``inflated`` (a gateway
    forwarding its upstream's headers: every limit stated 10**6 times too high) or ``per_day``
    (Groq's: ``x-ratelimit-limit-requests`` is per day, its reset hours away, and the
    per-minute request limit is stated nowhere); ``retry_after``: what its 429s say (``exact``:
    whole seconds until the request would fit, at least 1; ``none``; a number of seconds;
    ``date``: the exact wait as an HTTP-date); ``changes``: ``(at, factor)``: from ``at`` on, the
    limits are ``factor`` x as given; ``outage``: ``(start, end, kind)``, every call refused
    (``429``, no retry-after: a gateway with no deployment left) or failing (``down``)."""

    rpm: int | None = None
    itpm: int | None = None
    otpm: int | None = None
    tpm: int | None = None
    model: str = "token_bucket"
    concurrency: int | None = None
    headers: str = "anthropic"
    retry_after: str | float = "exact"
    latency: float = 1.0
    changes: tuple[tuple[float, float], ...] = ()
    outage: tuple[float, float, str] | None = None
    own_retry_after: float = 2.0
    """The ``retry-after`` of a 429 to a request refused for itself."""

    def limits_at(self, t: float) -> dict[str, float]:
        """The limits enforced at ``t`` (per minute), by dimension."""
        factor = 1.0
        for at, f in self.changes:
            if t >= at:
                factor = f
        out = {}
        for dim, v in (("requests", self.rpm), ("input-tokens", self.itpm), ("output-tokens", self.otpm),
                       ("tokens", self.tpm)):  # fmt: skip
            if v:
                out[dim] = v * factor
        if self.concurrency:
            out["requests"] = self.concurrency * 60.0 / self.latency * factor
        return out


class _ServerState:
    """A :class:`Server` running: its limiters and what it admitted."""

    def __init__(self, spec: Server, sim: VirtualTime, seed: int = 0) -> None:
        self.spec, self.sim = spec, sim
        self.rng = random.Random(seed)
        self.factor = 1.0
        self.limiters: dict[str, Limiter] = {}
        self.in_flight = 0
        self._make(1.0)
        self.admitted: list[tuple[float, float, float]] = []  # (t, input, output) per request
        self.out_at: list[tuple[float, float]] = []  # (t, output tokens)
        self.requests = 0
        self.refused = 0  # 429s for the limits
        self.refused_at: list[float] = []
        self.refused_own = 0  # 429s to requests refused for themselves
        self.failed = 0  # outage answers
        self.reserves_output = spec.model in ("token_bucket", "per_second", "concurrency")
        """Output tokens reserved as ``max_tokens`` at admission and settled at the end, as the
        providers document; a gateway (a window) counts them once answered."""

    def _make(self, factor: float) -> None:
        self.factor = factor
        s = self.spec
        self._base = {
            dim: v
            for dim, v in (
                ("requests", s.rpm),
                ("input-tokens", s.itpm),
                ("output-tokens", s.otpm),
                ("tokens", s.tpm),
            )
            if v
        }
        self.limiters = {
            dim: make_limit(s.model, max(1, round(v * factor)), self.sim.now) for dim, v in self._base.items()
        }

    def _factor_now(self) -> float:
        factor = 1.0
        for at, f in self.spec.changes:
            if self.sim.now >= at:
                factor = f
        return factor

    def _quick(self) -> float:
        """The latency of a refusal (tens of milliseconds, as a real one: the jitter keeps retries
        from locking to the server's refill)."""
        return self.rng.uniform(0.02, 0.1)

    def headers(self, now: float) -> dict[str, str]:
        kind = self.spec.headers
        h = {"date": format_datetime(datetime.fromtimestamp(EPOCH + now, UTC), usegmt=True)}
        if kind == "none":
            return h
        scale = 10**6 if kind == "inflated" else 1
        for dim, lim in self.limiters.items():
            limit = lim.per_minute * scale
            remaining = lim.remaining(now) + (limit - lim.per_minute)
            reset = lim.replenished_in(now)
            if kind == "anthropic" and dim != "tokens":
                when = datetime.fromtimestamp(EPOCH + now + math.ceil(reset), UTC)
                h[f"anthropic-ratelimit-{dim}-limit"] = str(limit)
                h[f"anthropic-ratelimit-{dim}-remaining"] = str(remaining)
                h[f"anthropic-ratelimit-{dim}-reset"] = when.isoformat(timespec="seconds").replace(
                    "+00:00", "Z"
                )
            elif kind in ("openai", "inflated") and dim in ("requests", "tokens"):
                h[f"x-ratelimit-limit-{dim}"] = str(limit)
                h[f"x-ratelimit-remaining-{dim}"] = str(remaining)
                h[f"x-ratelimit-reset-{dim}"] = _duration(reset)
            elif kind == "per_day" and dim == "tokens":
                h["x-ratelimit-limit-tokens"] = str(lim.per_minute)
                h["x-ratelimit-remaining-tokens"] = str(lim.remaining(now))
                h["x-ratelimit-reset-tokens"] = _duration(reset)
        if kind == "per_day":  # the per-day request quota, far from used up
            day = 14_400
            used = min(day - 1, self.requests)
            h["x-ratelimit-limit-requests"] = str(day)
            h["x-ratelimit-remaining-requests"] = str(day - used)
            h["x-ratelimit-reset-requests"] = _duration(used * 86_400 / day)
        return h

    def _retry_after(self, wait: float, now: float) -> dict[str, str]:
        ra = self.spec.retry_after
        if ra == "none":
            return {}
        if ra == "exact":
            return {"retry-after": str(max(1, math.ceil(wait)))}
        if ra == "date":
            when = datetime.fromtimestamp(EPOCH + now + max(1, math.ceil(wait)), UTC)
            return {"retry-after": format_datetime(when, usegmt=True)}
        return {"retry-after": f"{float(ra):g}"}

    def call(self, job: _Job, timeout: float, max_tokens: int) -> JudgeReply:
        """One call at the virtual now: admitted (the latency passes, the answer comes) or not.
        Its output tokens are reserved as ``max_tokens`` when it is admitted and settled to
        what it used at its end (:mod:`judgeq.testing.limits` says whose documentation)."""
        sim, spec = self.sim, self.spec
        now = sim.now
        factor = self._factor_now()
        if factor != self.factor:  # the server's limit changes; what it counted stays counted
            self.factor = factor
            for dim, lim in self.limiters.items():
                lim.rescale(max(1, round(self._base[dim] * factor)), now)
        self.requests += 1
        if spec.outage and spec.outage[0] <= now < spec.outage[1]:
            self.failed += 1
            sim.sleep(self._quick())
            if spec.outage[2] == "down":
                raise JudgeAPIError("connection to the judge failed: APIConnectionError")
            raise JudgeRateLimited("429: no deployments available", headers={})
        if job.refused_for_itself:
            self.refused_own += 1
            sim.sleep(self._quick())
            h = {**self.headers(now), "retry-after": f"{spec.own_retry_after:g}"}
            raise JudgeRateLimited("429 (for itself)", retry_after=retry_after_seconds(h), headers=h)
        # a provider reserves max_tokens; a gateway counts output tokens once answered (and
        # admits a request while its window has room for one)
        ahead = float(max_tokens) if self.reserves_output else 1.0
        need = {"requests": 1.0, "input-tokens": float(job.input_tokens), "output-tokens": ahead,
                "tokens": float(job.input_tokens) + ahead}  # fmt: skip
        wait = max((lim.wait_for(need[d], now) for d, lim in self.limiters.items()), default=0.0)
        if spec.concurrency and self.in_flight >= round(spec.concurrency * factor):
            wait = max(wait, 0.5)
        if wait > 0:
            self.refused += 1
            self.refused_at.append(now)
            sim.sleep(self._quick())
            h = {**self.headers(now), **self._retry_after(wait, now)}
            raise JudgeRateLimited("429: rate limit", retry_after=retry_after_seconds(h), headers=h)
        for d, lim in self.limiters.items():
            if self.reserves_output:
                lim.take(need[d], now)
            elif d != "output-tokens":
                lim.take(need[d] - (ahead if d == "tokens" else 0.0), now)
        self.admitted.append((now, float(job.input_tokens), float(job.output_tokens)))
        headers = self.headers(now)
        self.in_flight += 1
        used = float(job.output_tokens)
        try:
            latency = spec.latency * self.rng.uniform(0.8, 1.2)
            if latency > timeout:
                used = 0.0
                sim.sleep(timeout)
                raise JudgeTimeout("the judge did not answer within the attempt timeout")
            sim.sleep(latency)
        finally:
            self.in_flight -= 1
            for d, base in (("output-tokens", 0.0), ("tokens", float(job.input_tokens))):
                if d not in self.limiters:
                    continue
                if self.reserves_output:
                    self.limiters[d].settle(now, base + max_tokens, base + used, sim.now)
                else:
                    self.limiters[d].take(used, sim.now)
        self.out_at.append((sim.now, used))
        return JudgeReply(
            text="{}",
            input_tokens=job.input_tokens,
            output_tokens=job.output_tokens,
            headers=headers,
        )


def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``6m0s``, ``1.5s``, ``20ms``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    m, s = divmod(seconds, 60)
    return f"{int(m)}m{s:.0f}s" if m else f"{s:.3g}s"


# ----------------------------------------------------------------------------- the callers


@dataclass
class _Job:
    index: int
    model: str
    input_tokens: int
    output_tokens: int
    refused_for_itself: bool = False
    run: int = 0
    outcome: str = ""
    calls: int = 0
    ended: float = 0.0


class _Judge:
    """A :class:`~judgeq.judges.base.Judge` whose calls go to a modelled server."""

    provider = "anthropic"

    def __init__(self, model: str, server: _ServerState, jobs: dict[int, _Job], budget: _Budget) -> None:
        self.model, self.server, self.jobs, self.budget = model, server, jobs, budget

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        job = self.jobs[int(request.fields["job"])]
        job.calls += 1
        return self.server.call(job, timeout, request.max_tokens)


class _Budget(MemoryBudget):
    """The in-process budget, each greenlet a caller of its own (as each worker thread is),
    named by the order it was spawned in (a run is the same on every machine)."""

    def __init__(self, name: str, clock: Callable[[], float], names: dict[greenlet, str]) -> None:
        super().__init__(name, clock)
        self.names = names

    def _caller(self) -> str:
        return self.names.get(getcurrent(), "main")


# ----------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    """One cell: a server, what the budget is told, the callers, the jobs.

    ``given``: the limits configured (``--rpm`` etc.), as a factor of the server's real ones
    (None: none given); ``refused``: share of jobs the server refuses for themselves;
    ``names``: the names the jobs call the one model by (an alias and its dated id); ``runs``:
    runs sharing the budget at once; ``judges``: judges (each its own model and server limits)
    on one key; ``kind``: what the cell measures beyond the common thresholds."""

    name: str
    server: Server
    given: float | None = None
    given_dims: tuple[str, ...] = ("requests",)
    workers: int = 4
    concurrency: int = 4
    jobs: int = 480
    input_tokens: int = 1_000
    estimate: float = 1.0
    """The budget's input estimate as a factor of the true count (chars/4 is off for some text)."""
    max_tokens: int = 1_024
    output_tokens: int = 200
    refused: float = 0.0
    refused_evenly: bool = False
    """The jobs refused for themselves: every ``1/refused``-th (as ``benchmarks/rate_limit.py``
    picks them) instead of each at random."""
    names: tuple[str, ...] = ("claude-sonnet-4-5",)
    runs: int = 1
    judges: int = 1
    kind: str = "rate"
    seed: int = 0
    horizon: float = 1_800.0
    """Virtual seconds a cell may take at most (one that needs more has collapsed)."""


@dataclass
class Cell:
    """What one scenario measured."""

    scenario: Scenario
    used: float
    """Share of the binding limit used after the first minute, while jobs waited."""
    refused_share: float
    """Share of the requests answered 429 for the limits (refusals of jobs refused for
    themselves and outage answers left out)."""
    refused_after_fix: float
    """The same, leaving out the first minute, the minute after each change of the server's
    limit, and an outage with the minute after it (the time the budget has to correct itself)."""
    rate_limited: int
    """Clean jobs (not refused for themselves) that ended ``rate_limited``."""
    nulls: dict[str, int]
    worst_window: float
    """The lowest share of the limit used in a 60-s window after the first minute while jobs
    waited."""
    wall: float
    ideal: float
    own_calls_max: int
    """The most calls one job refused for itself took."""
    recovered: float
    """After an outage or a limit drop and rise: the share of the limit used in the minute
    that starts 60 s after the server is healthy again (nan: no such event)."""
    binding: str
    graded: int
    total: int
    kept_after: float | None = None
    """The adaptive rate the budget kept after the run (requests a minute), None: none."""
    clean_wall: float = 0.0
    """When the last clean job (not refused for itself) ended."""
    baseline: float | None = None
    """With jobs refused for themselves: :attr:`clean_wall` of the same cell without them."""
    admitted_at: tuple[float, ...] = ()
    """When the servers admitted each request (virtual seconds, in order): to measure a cell
    as ``benchmarks/rate_limit.py`` measures a real run."""

    def failures(self) -> list[str]:
        """The thresholds of issue 28 this cell misses (empty: it holds)."""
        s = self.scenario
        out = []
        given_right = s.given == 1.0 and s.server.headers != "inflated" and not s.server.changes
        if self.used < 0.90:
            out.append(f"used {self.used:.0%} < 90%")
        limit_429 = 0.005 if given_right else 0.02
        measured = (
            self.refused_after_fix
            if (s.server.changes or (s.given or 0) > 1 or s.server.outage)
            else self.refused_share
        )
        if measured > limit_429:
            out.append(f"429s {measured:.1%} > {limit_429:.1%}")
        if self.worst_window < 0.50:
            out.append(f"worst window {self.worst_window:.0%} < 50%")
        if self.rate_limited:
            out.append(f"{self.rate_limited} clean jobs rate_limited")
        if s.refused and self.own_calls_max > 10:
            out.append(f"a job refused for itself took {self.own_calls_max} calls > 10")
        if not math.isnan(self.recovered) and self.recovered < 0.90:
            out.append(f"recovered {self.recovered:.0%} < 90% a minute after")
        if self.nulls.get("not run"):
            out.append(f"{self.nulls['not run']} jobs not ended in {s.horizon:.0f} s")
        if self.baseline and self.clean_wall > 1.1 * self.baseline:
            out.append(
                f"clean jobs took {self.clean_wall / self.baseline:.2f}x their time without them > 1.1x"
            )
        if s.server.outage and self.kept_after is not None:
            limit = s.server.limits_at(s.horizon).get("requests", 0.0)
            if self.kept_after < 0.9 * limit:
                out.append(f"kept {self.kept_after:.0f}/min learned in the outage")
        return out


def _jobs(s: Scenario) -> list[_Job]:
    rng = random.Random(s.seed)
    jobs = []
    for i in range(s.jobs):
        model = s.names[i % len(s.names)]
        if s.judges > 1:
            model = f"judge-{i % s.judges}"
        own = rng.random() < s.refused
        if s.refused_evenly:
            own = s.refused > 0 and i % round(1 / s.refused) == 0
        if own and s.kind == "baseline":  # the same run without the jobs refused for themselves
            continue
        jobs.append(_Job(i, model, s.input_tokens, s.output_tokens, own, run=i % s.runs))
    return jobs


def run(s: Scenario) -> Cell:
    """Play ``s`` to the end on a virtual clock and measure it."""
    sim = VirtualTime()
    jobs = _jobs(s)
    by_index = {j.index: j for j in jobs}
    # one server per real limit: per judge (several judges: several models); names of one model
    # are one server
    servers: dict[str, _ServerState] = {}
    budgets: dict[str, _Budget] = {}
    names: dict[greenlet, str] = {}
    judges: dict[str, _Judge] = {}
    for j in jobs:
        if j.model in judges:
            continue
        real = "one" if s.judges == 1 else j.model
        server = servers.get(real) or servers.setdefault(
            real, _ServerState(s.server, sim, s.seed + len(servers))
        )
        # the budget's name as workers make it (an alias and its dated id share one)
        name = budget_key("anthropic", canonical_model("anthropic", j.model), "sim-key")
        if name not in budgets:
            budgets[name] = _Budget(name, sim.clock, names)
            if s.given is not None:
                lim = s.server.limits_at(0.0)
                given = {d: int(lim[d] * s.given) for d in s.given_dims if d in lim}
                budgets[name].configure(Limits.of(given))
        judges[j.model] = _Judge(j.model, server, by_index, budgets[name])
    policy = RetryPolicy()
    queues = [deque(j for j in jobs if j.run == r) for r in range(s.runs)]
    drained = [0.0]
    rng = random.Random(s.seed + 1)

    def worker(queue: deque[_Job], seed: int) -> Callable[[], None]:
        def loop() -> None:
            own_rng = random.Random(seed)
            while queue:
                job = queue.popleft()
                if not any(queues):
                    drained[0] = sim.now
                judge = judges[job.model]
                request = JudgeRequest(
                    system=("x" * max(0, round(4 * job.input_tokens * s.estimate) - 2),),
                    user="",
                    output_schema={},
                    max_tokens=s.max_tokens,
                    fields={"job": job.index},
                )
                outcome = call_with_retries(
                    judge, request, policy, clock=sim.clock, sleep=sim.sleep, rng=own_rng, budget=judge.budget
                )
                job.outcome = (
                    "ok" if outcome.reply is not None else (outcome.error.reason if outcome.error else "?")
                )
                job.ended = sim.now

        return loop

    for r, queue in enumerate(queues):
        for w in range(s.workers):
            for c in range(s.concurrency):
                g = sim.spawn(worker(queue, rng.randrange(1 << 30)), at=0.001 * c)
                names[g] = f"run{r}:worker{w}:{c}"
    sim.run(until=s.horizon)
    wall = sim.now
    cell = _measure(s, jobs, list(servers.values()), budgets, wall, drained[0] or wall)
    if s.refused and s.kind != "baseline":  # the same jobs less those refused for themselves
        cell.baseline = run(replace(s, name=f"{s.name} (baseline)", kind="baseline")).clean_wall
    return cell


def _measure(
    s: Scenario,
    jobs: list[_Job],
    servers: Sequence[_ServerState],
    budgets: dict[str, _Budget],
    wall: float,
    drained: float,
) -> Cell:
    spec = s.server
    # the binding dimension: the one whose limit the clean jobs' volume would take longest to pass
    clean = [j for j in jobs if not j.refused_for_itself]
    volume = {
        "requests": float(len(clean)),
        "input-tokens": float(sum(j.input_tokens for j in clean)),
        "output-tokens": float(sum(j.output_tokens for j in clean)),
        "tokens": float(sum(j.input_tokens + j.output_tokens for j in clean)),
    }
    limits_at = _binding_limits(s)
    lim0 = limits_at(0.0)
    binding = max(lim0, key=lambda d: volume[d] / lim0[d]) if lim0 else "requests"
    n_servers = len(servers)

    def limit_between(a: float, b: float) -> float:
        """The binding limit's volume in [a, b), all servers."""
        total, t, step = 0.0, a, 0.25
        while t < b:
            dt = min(step, b - t)
            total += limits_at(t).get(binding, 0.0) / 60.0 * dt
            t += dt
        return total * n_servers

    def used_between(a: float, b: float) -> float:
        total = 0.0
        for server in servers:
            if binding == "output-tokens":
                total += sum(v for t, v in server.out_at if a <= t < b)
            else:
                for t, i, o in server.admitted:
                    if a <= t < b:
                        total += {"requests": 1.0, "input-tokens": i, "tokens": i + o}[binding]
        return total

    end = max(drained, 61.0)
    settling = [(0.0, 60.0), *((at, at + 60.0) for at, _ in spec.changes)]
    if spec.outage:
        settling.append((spec.outage[0], spec.outage[1] + 60.0))
    span_used = used_between(60.0, end)
    span_limit = limit_between(60.0, end)
    if spec.outage:  # the outage itself is no use to be had
        span_limit -= limit_between(max(60.0, spec.outage[0]), min(end, spec.outage[1]))
        span_used -= used_between(max(60.0, spec.outage[0]), min(end, spec.outage[1]))
    used = span_used / span_limit if span_limit > 0 else 1.0
    worst = math.inf
    t = 60.0
    while t + 60.0 <= end:
        if not any(t < b and t + 60.0 > a for a, b in settling[1:]):  # (the first minute: t >= 60)
            worst = min(worst, used_between(t, t + 60.0) / limit_between(t, t + 60.0))
        t += 5.0
    if worst is math.inf:
        worst = used
    requests = sum(x.requests - x.refused_own - x.failed for x in servers)
    refused = sum(x.refused for x in servers)
    refused_after = _refused_outside(servers, settling)
    recovered = math.nan
    if spec.outage or (spec.changes and len(spec.changes) > 1):
        healthy = spec.outage[1] if spec.outage else spec.changes[-1][0]
        if healthy + 120.0 <= end:
            recovered = used_between(healthy + 60.0, healthy + 120.0) / limit_between(
                healthy + 60.0, healthy + 120.0
            )
    nulls: dict[str, int] = {}
    for j in jobs:
        if j.outcome != "ok":
            nulls[j.outcome or "not run"] = nulls.get(j.outcome or "not run", 0) + 1  # not run: horizon
    ideal = _ideal(limits_at, binding, volume[binding], n_servers) + spec.latency
    kept = None
    for b in budgets.values():
        state = b.snapshot()
        if state.adaptive_rpm is not None:
            kept = state.adaptive_rpm
    return Cell(
        scenario=s,
        used=used,
        refused_share=refused / max(1, requests),
        refused_after_fix=refused_after,
        rate_limited=sum(1 for j in clean if j.outcome == "rate_limited"),
        nulls=nulls,
        worst_window=worst,
        wall=wall,
        ideal=ideal,
        own_calls_max=max((j.calls for j in jobs if j.refused_for_itself), default=0),
        recovered=recovered,
        binding=binding,
        graded=sum(1 for j in jobs if j.outcome == "ok"),
        total=len(jobs),
        kept_after=kept,
        clean_wall=max((j.ended for j in clean), default=0.0),
        admitted_at=tuple(sorted(t for x in servers for t, _, _ in x.admitted)),
    )


def _refused_outside(servers: Sequence[_ServerState], settling: Sequence[tuple[float, float]]) -> float:
    """The share of requests answered 429 for the limits outside the ``settling`` intervals."""

    def counted(t: float) -> bool:
        return not any(a <= t < b for a, b in settling)

    admitted = sum(1 for x in servers for t, _, _ in x.admitted if counted(t))
    refused = sum(1 for x in servers for t in x.refused_at if counted(t))
    return refused / max(1, admitted + refused)


def _binding_limits(s: Scenario) -> Callable[[float], dict[str, float]]:
    """The limits that bind the callers at each moment: the server's, or a lower one given."""
    lim0 = s.server.limits_at(0.0)
    given = {d: int(lim0[d] * s.given) for d in s.given_dims if d in lim0} if s.given is not None else {}

    def at(t: float) -> dict[str, float]:
        lim = s.server.limits_at(t)
        return {d: min(v, given.get(d, math.inf)) for d, v in lim.items()}

    return at


def _ideal(
    limits_at: Callable[[float], dict[str, float]], binding: str, volume: float, n_servers: int
) -> float:
    """Seconds the clean jobs' volume takes at exactly the binding limit."""
    t, done, step = 0.0, 0.0, 0.25
    while done < volume and t < 1e6:
        done += limits_at(t).get(binding, 0.0) / 60.0 * step * n_servers
        t += step
    return t


# ----------------------------------------------------------------------------- the matrix


MODELS = ("token_bucket", "sliding_window", "fixed_window", "per_second")
HEADERS = ("anthropic", "openai", "none", "inflated")
GIVEN = (None, 1.0, 3.0, 0.5)
"""The limit given (``--rpm``) as a share of the server's: none, right, 3x too high, too low."""
RETRY_AFTERS: tuple[str | float, ...] = ("exact", "none", 0.0, 1.0, 2.0, 30.0, "date")
REFUSED = (0.05, 0.10, 0.20)


def matrix() -> list[Scenario]:
    """Every cell ``benchmarks/budget_sim.py`` prints and ``tests/core/test_budget_sim.py`` holds:
    how servers enforce a limit x the headers they send x the limit given; then, on the servers
    that tell least, each fault or setting apart (retry-after, jobs refused for themselves,
    token limits and estimates, a limit that drops and rises, per-day limits, aliases, runs and
    judges sharing a key, 1 and 20 workers, outages)."""
    base = Server(rpm=120, latency=1.0)
    window = replace(base, model="sliding_window", headers="none")
    bucket = replace(base, headers="none")
    cells = [
        Scenario(f"{model}/{headers}/given={given}", replace(base, model=model, headers=headers), given=given)
        for model in MODELS
        for headers in HEADERS
        for given in GIVEN
    ]
    cells.append(Scenario("concurrency/none/given=None", Server(concurrency=4, latency=2.0, headers="none")))
    cells += [
        Scenario(f"sliding_window/none/retry-after={ra}", replace(window, retry_after=ra))
        for ra in RETRY_AFTERS
    ]
    for share in REFUSED:
        cells.append(
            Scenario(f"token_bucket/none/refused={share:.0%}", bucket, refused=share, kind="refused")
        )
        cells.append(
            Scenario(f"sliding_window/none/refused={share:.0%}", window, refused=share, kind="refused")
        )
    # ... and where the limit is known: stated (Anthropic's headers), or given right
    stated_window = replace(window, headers="anthropic")
    cells.append(Scenario("token_bucket/anthropic/refused=10%", base, refused=0.1, kind="refused"))
    cells.append(Scenario("sliding_window/anthropic/refused=10%", stated_window, refused=0.1, kind="refused"))
    cells.append(
        Scenario("token_bucket/none/given=1.0/refused=10%", bucket, given=1.0, refused=0.1, kind="refused")
    )
    tokens = Server(itpm=60_000, otpm=12_000, latency=1.0)
    for model in ("token_bucket", "per_second"):
        for estimate in (0.7, 1.0, 1.4):
            cells.append(
                Scenario(
                    f"{model}/tokens/estimate={estimate}", replace(tokens, model=model), estimate=estimate
                )
            )
    # a slow judge: a reservation of max_tokens (1,024) outlives many seconds of the limit before
    # its unused part (824) comes back
    slow = Server(otpm=12_000, latency=4.0)
    for model in ("token_bucket", "per_second", "sliding_window"):
        cells.append(Scenario(f"{model}/otpm/latency=4", replace(slow, model=model)))
    drop = ((120.0, 1 / 3), (300.0, 1.0))  # the limit drops 3x for 3 minutes, then rises again
    cells.append(
        Scenario(
            "sliding_window/anthropic/drop3x", replace(window, headers="anthropic", changes=drop), jobs=900
        )
    )
    cells.append(Scenario("sliding_window/none/drop3x", replace(window, changes=drop), given=1.0, jobs=900))
    cells.append(Scenario("token_bucket/per_day", replace(base, headers="per_day", tpm=10**7)))
    alias = ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929")
    cells.append(Scenario("token_bucket/anthropic/alias", base, names=alias))
    cells.append(Scenario("token_bucket/anthropic/two-runs", base, runs=2, workers=2))
    cells.append(Scenario("token_bucket/anthropic/two-judges", base, judges=2, workers=2, jobs=1000))
    cells.append(Scenario("sliding_window/none/workers=1", window, workers=1, concurrency=8))
    cells.append(Scenario("sliding_window/none/workers=20", window, workers=20))
    for kind in ("429", "down"):
        outage = replace(bucket, outage=(120.0, 180.0, kind))
        cells.append(Scenario(f"token_bucket/none/outage-{kind}", outage, jobs=800, kind="outage"))
    return cells


def table(cells: Sequence[Cell]) -> Iterator[str]:
    """The matrix as text lines."""
    yield f"{'cell':<44} {'used':>5} {'429s':>6} {'worst':>6} {'rl':>4} {'wall/ideal':>10}  holds"
    for c in cells:
        miss = c.failures()
        yield (
            f"{c.scenario.name:<44} {c.used:>5.0%} {c.refused_share:>6.1%} {c.worst_window:>6.0%} "
            f"{c.rate_limited:>4} {c.wall / c.ideal:>10.2f}  {'yes' if not miss else '; '.join(miss)}"
        )


def run_all(cells: Sequence[Scenario], processes: int = 1) -> list[Cell]:
    """Every scenario, in ``processes`` processes (the order kept)."""
    if processes <= 1:
        return [run(c) for c in cells]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(processes) as pool:
        return list(pool.map(run, cells, chunksize=1))


# ----------------------------------------------------------------------------- the real benchmark's rows

BENCHMARK_MODELS = {"sliding": "sliding_window", "persecond": "per_second", "bucket": "token_bucket"}
"""``benchmarks/rate_limit.py``'s server names and the limit models they stand for."""


def use_after(times: Sequence[float], rpm: float, skip: float) -> float:
    """Requests admitted a minute after the first ``skip`` seconds (from the first admission
    to the last), as a share of ``rpm``; nan when that span is under 10 s. How
    ``benchmarks/rate_limit.py`` measures a real run, and the simulated one beside it."""
    ordered = sorted(times)
    if len(ordered) < 2:
        return math.nan
    start, end = ordered[0] + skip, ordered[-1]
    if end - start < 10:
        return math.nan
    n = sum(1 for t in ordered if start <= t <= end)
    return n / ((end - start) / 60.0) / rpm


def benchmark_row(row: str, rpm: int, jobs: int, latency: float) -> Cell:
    """A row of ``benchmarks/rate_limit.py`` (``BUDGET/SERVER[+refused]``: ``given``,
    ``learned`` or ``adaptive``; ``sliding``, ``persecond`` or ``bucket``) in the simulator: the
    stand-in's server model, headers and ``retry-after`` (whole seconds until a request fits, at
    least 1; 0 for a job refused for itself), 4 workers x 8 callers, the same jobs (every 20th
    refused for itself) and judge latency."""
    budget, server = row.split("/")
    server, _, refused = server.partition("+")
    spec = Server(
        rpm=rpm,
        model=BENCHMARK_MODELS[server],
        headers="none" if budget == "adaptive" else "anthropic",
        retry_after="exact",
        latency=latency,
        own_retry_after=0.0,
    )
    return run(
        Scenario(
            row,
            spec,
            given=1.0 if budget == "given" else None,
            workers=4,
            concurrency=8,
            jobs=jobs,
            refused=0.05 if refused else 0.0,
            refused_evenly=True,
            kind="refused" if refused else "rate",
        )
    )
