"""The judge's rate limit: requests, input tokens and output tokens per minute, shared by every
caller of one judge (provider + model + a hash of the API key).

This module states the policy in words and constants; it is executed once, by one Lua script
per operation (``lua/``, :mod:`judgeq.ratelimit.scripts`), which both backends run: Redis for
every worker on every machine (:mod:`judgeq.ratelimit.redis`), an embedded Lua for one process
(:mod:`judgeq.ratelimit.memory`: ``judgeq run``, tests). One contract test runs on both.

**Buckets.** Each known limit is refilled at limit/60 a second. A minute's worth is never sent
at once: providers document that a per-minute limit may be enforced over shorter intervals (60
requests a minute as one a second) and that bursts are refused, and a gateway counting a sliding
minute refuses everything once a burst used it up. A known limit is paced at :data:`PACE` of
itself. Before each attempt the caller reserves one request, its estimated input tokens and
``max_tokens`` output tokens (:meth:`Budget.acquire`); afterwards the reservation is settled to
the usage the server reports (:meth:`Budget.settle`). The request bucket holds
:data:`BURST_SECONDS` of its limit (at least one request) and starts with one. A token limit
has two buckets: the reservations' holds :data:`TOKEN_SECONDS` (what the minute allows, so the
refund of an unused reservation is never dropped: the limit is reserved as the servers reserve
it, ``max_tokens`` at the start and settled at the end), and a pace bucket holds
:data:`BURST_SECONDS` of what calls are expected to *use* (their reservation times the share of
it answered calls used, learned with :data:`USE_WEIGHT`), settled to what they used: no burst
of real tokens passes a per-second enforcement. A request larger than a bucket waits for a full
bucket and leaves it in debt (the average rate still holds).

**Which limits.** For each of the three, the lower of the judge's configured limit
(:meth:`Budget.configure`: ``--rpm/--itpm/--otpm``, ``JUDGEQ_JUDGE_RPM/ITPM/OTPM``, ``judgeq
budget set``; it belongs to the judge, so every run and worker on it obeys it) and the limit the
server states in its rate-limit headers (:meth:`Budget.observe`; read by :mod:`.headers`,
which leaves out a limit whose window it finds longer than a minute). A run may ask for a
:class:`Share` of them: it is then also held to ``fraction`` x each limit by a bucket of its own.

**Congestion.** A 429 is reported with :meth:`Budget.refused`, saying how many times that job
was refused so far. Congestion is decided from refused *jobs*, not refused calls, over the last
:data:`RECENT` jobs answered since the last congestion (refused for the first time, or served):
at least :data:`MIN_REFUSED` of them refused, and :data:`MIN_SHARE`, out of at least
:data:`MIN_EVIDENCE`, over and above the share of jobs the server refuses for themselves
(learned, :data:`OWN_WEIGHT`); and not while most of the epoch's calls are still out (a 429
comes back before the answers of the calls sent with it: 96 callers sent at once, 9 of the
first 10 answers were refusals of jobs refused for themselves, and the cut made a 4-s run take
4 minutes). Refusals of calls granted before the last congestion was acted on (an older epoch:
:class:`Grant`) are no news. On congestion every caller pauses for the
server's ``retry-after``; a refusal that is no congestion only makes its own job wait. A job
refused again is news too when the server served nothing over the time since and refused
others' calls as well, at least three times as many as that job's before (several jobs, not
one or two left at a run's end): in a full window every caller holds a job it retries, no fresh job
comes, and the storm went unseen (jobs spent their refusals while the pace stayed where the
burst had put it).

**A closed server.** A congestion at which none of the epoch's calls was served (a window
counting a minute is full; a gateway with no deployment left refuses everything) is waited out
whatever the ``retry-after`` says: every caller pauses until the oldest answer of the last
minute is a minute old (its slot frees), and the pace is cut from what that minute served
(at least :data:`MIN_EVIDENCE` answers), which is what such a minute allows. Closed again with
nothing served since: no news of the rate (no cut), the pause doubles, up to
:data:`HORIZON`. (Simulated, a full sliding minute answering ``retry-after`` 1, 2 s or none: 27-44 % of the
limit used and up to 17 clean jobs ``rate_limited`` before, 93-99 % and none after; answering
0: 71 % and 36 before, 95 % and 4 after.)

**Jobs refused for themselves** (a request the server refuses whatever the load: too large, a
gateway's policy). A job refused again (under the adaptive rate twice again, with no congestion
in between), while the server served at least as many fresh jobs as it refused over the time
since, is judged refused for itself (:class:`Refusal`): its mark is taken out of the congestion
count; the server counted none of its calls, so their requests are given back; and its next
calls go free (:attr:`Grant.free`: no wait in line, nothing taken, charged only if served).
Under a known request limit its second call goes free too (it tells whether the job is its
own). Before, such jobs' first refusals read as congestion and their calls took the budget's
requests and held its callers in line: 10 % of them collapsed a run to 13 % of its server's
limit (no headers), or to 40 % (a known limit).

**Adaptive rate.** A request limit given or stated is a ceiling, never a promise: a gateway
forwards its upstream's ``x-ratelimit-limit-requests: 1000000000`` and a ``--rpm`` may be
wrong. No adaptive rate until the first congestion (the known limit, if any, paces); then the
rate becomes :data:`CUT` x the lowest of the current rate, the known limit, the rate
granted in the window (less the calls of jobs refused for themselves), and the rate the server
served in the window; when the ``retry-after`` is longer than the window (a sliding or calendar
minute full for the rest of it says so), what it served in the window spread over the
``retry-after``, or what it served over the last :data:`HORIZON`
(at most since the budget was born) spread over that time and the ``retry-after``, if that is
higher: what such a server served in its minute is its limit, while the window alone saw only
the end of it. A shorter ``retry-after`` is not spread over (a token bucket's whole-second
``retry-after: 1`` spread a fifth of a second's answers over a second). A rate not seen (nothing
granted or answered) is left out; never below :data:`FLOOR`. After :data:`CLEAN` seconds without
congestion while the rate was what held callers back, each successful call (never a failed one)
may grow it: by :data:`GROW` up to :data:`NEAR` of the capacity estimated at the last cut, then
by :data:`GROW_NEAR`: from the floor back to hundreds of requests a second in minutes; back
at the known limit, it is dropped and the known limit paces again. (Until issue 28 a known
limit switched adaptation off: ``--rpm 1000`` against a 300/min server, no headers, had 78 %
of its requests refused; making it a ceiling then made jobs refused for themselves slow every
run whose server states its limit, until they were told apart.)

How this holds against every kind of server is measured by the simulator
(:mod:`judgeq.testing.budget_sim`, ``python benchmarks/budget_sim.py``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from judgeq.ratelimit.headers import fmt_duration, server_limits

__all__ = [
    "BURST_SECONDS",
    "CLEAN",
    "COMBINED",
    "CUT",
    "DEFAULT_RETRY_AFTER",
    "DIMENSIONS",
    "FLOOR",
    "GROW",
    "GROW_NEAR",
    "HORIZON",
    "MAX_PAUSE",
    "MIN_EVIDENCE",
    "MIN_REFUSED",
    "MIN_SHARE",
    "MIN_SPAN",
    "NEAR",
    "NO_LIMITS",
    "OWN_WEIGHT",
    "PACE",
    "PROBE",
    "PROBE_STEP",
    "RECENT",
    "TOKEN_SECONDS",
    "USE_WEIGHT",
    "WINDOW",
    "Budget",
    "BudgetState",
    "Grant",
    "Limits",
    "PausedPastDeadline",
    "Refusal",
    "Share",
    "Usage",
    "budget_key",
    "estimate_input_tokens",
    "server_limits",
    "wait_for_budget",
]

DIMENSIONS = ("requests", "input-tokens", "output-tokens")
"""The three limits a judge may be given, named as in Anthropic's headers."""
COMBINED = "tokens"
"""A fourth limit, learned only from a server's headers: input and output tokens together
(OpenAI's ``x-ratelimit-limit-tokens``). A call reserves its input estimate plus ``max_tokens``
in it, and the unused part is refunded."""

BURST_SECONDS = 1.0
"""A request bucket holds this many seconds of its limit (at least 1 request; it starts with
one), and so does a token limit's pace bucket (what calls are expected to use)."""
TOKEN_SECONDS = 60.0
"""A token limit's reservation bucket holds this many seconds of it (a minute: what the minute
allows; it starts full). A call reserves ``max_tokens`` and uses a fraction of it: with a
bucket of one second, the refund of the unused part arrived when the bucket had refilled to
its brim and was dropped (issue 28: 50 % of an output limit used with ``max_tokens`` 1,024 and
200 used)."""
USE_WEIGHT = 0.2
"""The weight of the newest answered call in the share of its reservation a call is expected
to use (per token limit: the first answered call sets it; 1 until then)."""
WINDOW = 5.0
"""Seconds of recent calls that decide congestion and measure the rates sent and served."""
RECENT = 30
"""Congestion is decided over the last this many jobs answered (refused for the first time, or
served): a count, not a time, so it reacts as fast at 5 requests a second as at 500."""
MIN_REFUSED = 3
"""Congestion: at least this many of them refused ..."""
MIN_SHARE = 0.10
"""... and at least this share of them ..."""
MIN_EVIDENCE = 10
"""... of at least this many answers (a few jobs refused at once, with nothing else answered
yet, are no evidence) ..."""
OWN_WEIGHT = 0.02
"""... over and above the share of jobs the server refuses for themselves, learned per job
(a job refused again with no congestion in between counts 1, a served job 0) with this
weight: when 10 % of jobs are refused for themselves, 10 % of recent jobs refused is no
congestion (simulated, 10 % of such jobs behind a server with no headers: the rate collapsed
to 13 % of the limit while a fixed share counted them as congestion)."""
MIN_SPAN = 0.1
"""Seconds: the shortest span a rate is measured over (at the very start of a budget)."""
CUT = 0.75
"""Adaptive rate: multiplicative decrease, once per congestion episode."""
GROW = 1.25
"""Adaptive rate: multiplicative increase after a clean interval, up to :data:`NEAR` of the
capacity estimated at the last cut ..."""
NEAR = 0.9
GROW_NEAR = 1.02
"""... and past it, this slower increase (a server counting a sliding minute shows an overshoot
only when its whole minute is over the limit)."""
CLEAN = 5.0
"""Adaptive rate: seconds without a refused job before it grows."""
FLOOR = 6.0
"""Adaptive rate: requests a minute it never goes below."""
PROBE = 10.0
"""Seconds a fresh budget with no limit known lets one call alone find the server's limits (its
answer's headers) before the others go; the first answer ends it (a fast judge loses nothing).
It was 2 s: a judge answering in 4 s had every caller sent at once, blind (simulated: 14
callers refused at once, 2.8 % of a run's requests)."""
PROBE_STEP = 0.05
"""Seconds the others wait between asks meanwhile."""
PACE = 0.95
"""A known limit is paced at this share of itself: a server counting a sliding second refuses a
call that arrives a few milliseconds early, and calls do arrive unevenly."""
DEFAULT_RETRY_AFTER = 1.0
"""Seconds to pause on congestion when the server sent no ``retry-after``."""
HORIZON = 60.0
"""Seconds of answered calls a cut counts when the server's ``retry-after`` is longer than
:data:`WINDOW` (a sliding or calendar minute full for the rest of it): what such a server
served in its minute is its limit."""
MAX_PAUSE = 86_400.0
"""Seconds: the longest pause every caller takes on a congestion, whatever the server's
``retry-after`` says (a day: the longest window a provider documents a limit over). A job whose
time left is shorter than the pause ends ``rate_limited`` saying so (:class:`PausedPastDeadline`)
instead of holding its worker; until issue 28 a pause was held to ten minutes, since callers
waited any pause out."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-minute limits; None: not set."""

    rpm: int | None = None
    itpm: int | None = None
    otpm: int | None = None

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.rpm or 0, self.itpm or 0, self.otpm or 0)

    def by_dimension(self) -> dict[str, int]:
        """``{dimension: limit}`` of the limits that are set."""
        return {d: v for d, v in zip(DIMENSIONS, self.as_tuple(), strict=True) if v}

    @classmethod
    def of(cls, values: Mapping[str, float]) -> Limits:
        def get(dim: str) -> int | None:
            v = values.get(dim)
            return int(v) if v else None

        return cls(get("requests"), get("input-tokens"), get("output-tokens"))

    def __bool__(self) -> bool:
        return any(self.as_tuple())

    def describe(self) -> str:
        """``300 rpm, 40,000 itpm`` (or ``none``)."""
        parts = [f"{v:,} {n}" for n, v in zip(("rpm", "itpm", "otpm"), self.as_tuple(), strict=True) if v]
        return ", ".join(parts) or "none"


NO_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class Share:
    """A run that takes at most ``fraction`` of each of its judge's limits."""

    run: str
    fraction: float


class Grant(NamedTuple):
    """What :meth:`Budget.acquire` answers: ``wait`` 0.0 when granted (else the seconds to wait
    before asking again, nothing reserved), the congestion ``epoch`` the grant belongs to
    (handed back with the call's outcome: a refusal of a call sent before the last congestion
    was acted on is no news), and whether the wait is a ``paused`` budget (every caller waits
    out the server's ``retry-after``) rather than its pace."""

    wait: float
    epoch: int
    paused: bool = False
    free: bool = False
    """Granted without taking anything from the buckets: the job's last call was refused for
    itself in this epoch (:class:`Refusal`), and another such call costs the server nothing.
    Its outcome is reported with ``free=True``: a call served is charged then (its request and
    what it used), one refused for itself again costs nothing, and one refused for the limits
    is charged its request."""


class Refusal(NamedTuple):
    """What :meth:`Budget.refused` answers: the ``pause`` every caller now takes (0.0: no
    congestion), and whether the job was judged refused ``own``-ly (for itself): its next call
    may then be asked for with ``own_epoch`` (:meth:`Budget.acquire`)."""

    pause: float
    own: bool = False


class PausedPastDeadline(Exception):
    """The judge's budget is paused (the server's ``retry-after`` on a congestion) for longer
    than the job may still take: it ends with this reason instead of waiting."""

    def __init__(self, pause: float) -> None:
        self.pause = pause
        super().__init__(f"paused for {fmt_duration(pause)}")


@dataclass(frozen=True, slots=True)
class Usage:
    """What one judge attempt used (as the API reports it): requests 1, and its tokens."""

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(slots=True)
class BudgetState:
    """What ``judgeq budget`` shows of one judge's budget."""

    name: str
    configured: Limits = NO_LIMITS
    server: Limits = NO_LIMITS
    adaptive_rpm: float | None = None
    """The adaptive request rate (requests a minute) while it paces (below the known limit, if
    any), else None."""
    levels: dict[str, float] = field(default_factory=dict)
    """Each limited bucket's level now (what may be sent at once)."""
    paused_for: float = 0.0
    requests_last_minute: int = 0
    served_last_minute: int = 0
    refused_last_minute: int = 0
    waiting: int = 0
    """Callers waiting for this budget now."""
    tokens_limit: int | None = None
    """The combined tokens (input and output) a minute the server stated (OpenAI's
    ``x-ratelimit-limit-tokens``), None when it stated none."""

    def effective(self) -> dict[str, float]:
        """The limit that applies per dimension (per minute)."""
        out: dict[str, float] = {}
        for dim, given, stated in zip(
            DIMENSIONS, self.configured.as_tuple(), self.server.as_tuple(), strict=True
        ):
            known = [float(x) for x in (given, stated) if x]
            if dim == "requests" and self.adaptive_rpm:
                known.append(self.adaptive_rpm)
            if known:
                out[dim] = min(known)
        return out


class Budget(Protocol):
    """The rate limit shared by every caller of one judge (see the module docstring)."""

    name: str

    def acquire(
        self,
        input_tokens: int,
        output_tokens: int,
        share: Share | None = None,
        *,
        own_epoch: int = -1,
        first_epoch: int = -1,
    ) -> Grant:
        """Reserve one request and these tokens (see :class:`Grant`). ``own_epoch``: the epoch
        in which the job's last call was judged refused for itself (-1: it was not); while the
        budget is still in that epoch and not paused, the call is granted free at once: it
        neither waits for the pace nor takes from it (a job refused for itself held a caller for
        ten waits in line, and 10 % of such jobs held most of a run's callers). ``first_epoch``:
        the epoch of the job's first refusal, when that was its last: under a known request
        limit its second call goes free the same way (that one tells whether the job is refused
        for itself; under the adaptive rate, where refusals are the measure, it waits)."""
        ...

    def settle(
        self,
        reserved: Usage,
        used: Usage,
        *,
        ok: bool,
        epoch: int,
        share: Share | None = None,
        free: bool = False,
        first: bool = False,
    ) -> None:
        """Reconcile a granted reservation with what the attempt used (refund or charge);
        ``ok``: the judge answered (only that counts as served and grows the adaptive rate);
        ``free``: the grant was free (:attr:`Grant.free`; nothing reserved): its request is
        charged too; ``first``: the job's first call (a fresh job served tells that the server
        serves: :meth:`refused`). Not called for a 429 (:meth:`refused`)."""
        ...

    def refused(
        self,
        reserved: Usage,
        retry_after: float | None,
        *,
        epoch: int,
        nth: int = 1,
        previous_epoch: int = -1,
        since: float = 0.0,
        share: Share | None = None,
        free: bool = False,
        lent: int = 0,
    ) -> Refusal:
        """The server answered 429 to a granted reservation (its tokens are refunded; the request
        stays spent, unless the job is refused for itself). ``nth``: how many times this job
        has been refused, this time included; ``previous_epoch`` and ``since``: the epoch of
        its previous refusal and the seconds since it; ``free``: the grant was free; ``lent``:
        the requests this job's earlier refusals were charged. A job refused again (under the
        adaptive rate, twice again with no congestion in between), while the server served at
        least as many fresh jobs as it refused since, is refused for itself: the server counted
        none of that call, so its request is given back, and the ``lent`` ones too, and the job
        is counted in the share of such jobs (:data:`OWN_WEIGHT`). Only a job's first refusal is
        news: a job refused again after a congestion was acted on is one the pause did not
        help, and counting it again made jobs refused for themselves collapse the rate, epoch
        after epoch. See :class:`Refusal` for the answer."""
        ...

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn the server's limits from an answer's rate-limit headers; when they are new,
        also take the server's ``remaining`` as the level if it is lower."""
        ...

    def configure(self, limits: Limits | None) -> None:
        """Set the judge's configured limits: those given replace the ones set before, the
        others stay; None clears them all."""
        ...

    def snapshot(self) -> BudgetState:
        """The budget's state now."""
        ...


def budget_key(provider: str, model: str, api_key: str | None) -> str:
    """The budget's name: provider, model and a hash of the key (never the key itself)."""
    digest = hashlib.sha256((api_key or "").encode()).hexdigest()[:16]
    return f"{provider}:{model}:{digest}"


def estimate_input_tokens(text_chars: int) -> int:
    """Input tokens estimated before a call: about 4 characters a token, rounded up (an
    over-estimate for JSON and English; reconciled with the real count afterwards)."""
    return -(-text_chars // 4)


def wait_for_budget(
    budget: Budget,
    reserve: Usage,
    share: Share | None = None,
    *,
    sleep: Callable[[float], None],
    max_step: float = 1.0,
    longest_pause: float = math.inf,
    own_epoch: int = -1,
    first_epoch: int = -1,
) -> tuple[float, Grant]:
    """Block until ``budget`` grants ``reserve``: the seconds waited and the grant
    (``own_epoch``, ``first_epoch``: see :meth:`Budget.acquire`).

    Sleeps at most ``max_step`` at a time, so a caller notices a budget freed early (another
    worker's refund). Raises :class:`PausedPastDeadline` when the budget is paused for longer
    than ``longest_pause`` seconds (what the job may still take): a pause is the server's word
    for every caller, and waiting it out would hold the job past its deadline."""
    waited = 0.0
    while True:
        grant = budget.acquire(
            reserve.input_tokens, reserve.output_tokens, share, own_epoch=own_epoch, first_epoch=first_epoch
        )
        if grant.wait <= 0.0:
            return waited, grant
        if grant.paused and grant.wait > longest_pause:
            raise PausedPastDeadline(grant.wait)
        step = min(grant.wait, max_step)
        sleep(step)
        waited += step
