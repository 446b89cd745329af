"""Streaming aggregation of stored results into the run report.

:class:`Aggregator` takes results one at a time and keeps only counters and histograms
(scores are on a bounded scale with 2 decimals; latencies are kept to the millisecond), so
a million results aggregate in constant memory and with exact medians and percentiles.

Policies (each metric states its denominator):

* ``overall`` / ``dimensions`` stats (mean, median, std, min, max): over **graded** jobs only;
  a null is never a 0.  ``std`` is the population standard deviation.  Medians and
  percentiles interpolate linearly between order statistics (numpy's default).
* ``pass_rates[t]`` and ``pass_rate``: percent of **all** jobs of the run (graded + null), a
  null counting as not passed; ``coverage`` (graded / total) stands beside them.
* ``latency_ms``: grading latency of every job that reached the judge (graded or null).
* retrieval: ``accuracy``, hit rates and ``mrr`` over all questions (a missing needle is a
  miss and a reciprocal rank of 0); ``avg_llm_grade`` / ``avg_total_score`` over non-null
  grades (None when there are none); ``pass_rate_*`` over all questions, null = not passed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judgeq.figures.stats import Histogram, Stats, histogram, pct, quantile, wilson
from judgeq.grading.cascade import CascadeSpec
from judgeq.grading.result import Result
from judgeq.jobs.kind import ReportShape, Section
from judgeq.jobs.kinds import GROUP_SECTION_KEYS, KINDS
from judgeq.judges.prices import Price, Prices, shipped_prices
from judgeq.report.cascade import CascadeStats
from judgeq.report.validity import AgreementStats, CouncilStats, EstimateStats, InputPairing
from judgeq.settings import default_thresholds

__all__ = [
    "Aggregator",
    "Histogram",
    "Stats",
    "Summary",
    "cost_breakdown",
    "estimate_cost",
    "histogram",
    "lane_cost",
    "pair_counts",
    "pct",
    "price_for",
    "prices_taken",
    "quantile",
    "threshold_label",
]


def threshold_label(t: float) -> str:
    """``7`` -> ``"7.0"``, ``6.5`` -> ``"6.5"``, ``6.75`` -> ``"6.75"`` (never two labels alike)."""
    short = f"{t:.1f}"
    return short if float(short) == t else repr(float(t))


GROUP_SECTIONS = {name: kind.group_section for name, kind in KINDS.items() if kind.group_section is not None}
"""The kinds with a section in every group of results, and how each is made."""
_NOT_BY_MODEL = frozenset(name for name, kind in KINDS.items() if not kind.by_model)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


@dataclass(slots=True)
class Summary:
    """Everything reported for a group of jobs (the whole run, or one model)."""

    dimensions: tuple[str, ...]
    thresholds: tuple[float, ...]
    pass_fail: bool
    shape: ReportShape
    total: int = 0
    graded: int = 0
    null_by_reason: Counter[str] = field(default_factory=Counter)
    overall: Stats = field(default_factory=Stats)
    dims: dict[str, Stats] = field(default_factory=dict)
    passes: Counter[float] = field(default_factory=Counter)
    passed: int = 0
    flags: Counter[str] = field(default_factory=Counter)
    sections: dict[str, Section] = field(default_factory=dict)
    """Each kind's own section of this group (:attr:`JobKind.group_section`), by kind."""
    settled: int = 0
    """Jobs graded (failed) by a hard trajectory check, without a judge's score."""

    def add(self, r: Result) -> None:
        self.total += 1
        section = self.sections.get(r.kind)
        if section is None and r.kind in GROUP_SECTIONS:
            section = self.sections[r.kind] = GROUP_SECTIONS[r.kind](self.shape)
        if section is not None:
            section.add(r)
        for f in r.flags:
            self.flags[f] += 1
        if r.settled:  # failed by a rule of its kind (a hard check): a grade (fail), no judge's score
            self.graded += 1
            self.settled += 1
            return
        if r.status != "graded" or r.overall is None:
            self.null_by_reason[r.null_reason or "unknown"] += 1
            return
        self.graded += 1
        self.overall.raw[r.overall] += 1
        dims = self.dims
        for name, value in r.scores.items():
            stats = dims.get(name)
            if stats is None:
                stats = dims[name] = Stats()
            stats.raw[value] += 1  # Stats.add, inlined: this runs for every dimension of every result
        if r.passed:
            self.passed += 1
        for t in self.thresholds:
            if r.overall >= t:
                self.passes[t] += 1

    def to_dict(self) -> dict[str, Any]:
        null = sum(self.null_by_reason.values())
        out: dict[str, Any] = {
            "counts": {
                "total": self.total,
                "graded": self.graded,
                "null": null,
                "null_by_reason": dict(sorted(self.null_by_reason.items())),
                **({"settled_by_checks": self.settled} if self.settled else {}),
            },
            "coverage": pct(self.graded, self.total),
            "coverage_ci95": wilson(self.graded, self.total),
            "overall": self.overall.to_dict(),
            "dimensions": {d: self.dims.get(d, Stats()).to_dict() for d in self.dimensions},
            "pass_rate": pct(self.passed, self.total),
            "pass_rate_ci95": wilson(self.passed, self.total),
        }
        if not self.pass_fail:
            out["pass_rates"] = {threshold_label(t): pct(self.passes[t], self.total) for t in self.thresholds}
            out["pass_rates_ci95"] = {
                threshold_label(t): wilson(self.passes[t], self.total) for t in self.thresholds
            }
        out["flags"] = dict(sorted(self.flags.items()))
        for kind, section in self.sections.items():
            out[str(KINDS[kind].section)] = section.to_dict()
        return out


def price_for(model: str, prices: Prices | None = None) -> Price | None:
    """The price of ``model`` in ``prices`` (default: the shipped file): its own entry or its
    alias's, never a prefix's (:mod:`judgeq.judges.prices`)."""
    return (prices or shipped_prices()).lookup(model)


def prices_taken(prices: Prices | None = None) -> str:
    """Where and when the prices were taken (default: the date of ``judgeq/data/prices.json``)."""
    return (prices or shipped_prices()).taken


def cost_breakdown(
    model: str,
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
    *,
    batch: bool = False,
    prices: Prices | None = None,
) -> dict[str, float] | None:
    """USD per part of a usage (:meth:`judgeq.judges.prices.Prices.cost`): ``input``, ``output``,
    ``cache_read``, ``cache_write``, ``batch_discount`` (negative, when ``batch``) and their
    ``total``. None: no price for the model (``prices``, default: the shipped file)."""
    table = prices or shipped_prices()
    return table.cost(model, input_tokens, output_tokens, cache_read, cache_write, batch=batch)


def estimate_cost(
    model: str,
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
    *,
    prices: Prices | None = None,
) -> float | None:
    """The total of :func:`cost_breakdown` for the live lane; None: no price."""
    parts = cost_breakdown(model, input_tokens, output_tokens, cache_read, cache_write, prices=prices)
    return None if parts is None else parts["total"]


def lane_cost(
    model: str, live: list[int], batch: list[int], prices: Prices | None = None
) -> dict[str, float] | None:
    """:func:`cost_breakdown` of the tokens spent in the live lane plus those spent in the
    Message Batches lane (discounted), part by part; None: no price for the model."""
    a = cost_breakdown(model, *live, prices=prices)
    b = cost_breakdown(model, *batch, batch=True, prices=prices)
    if a is None or b is None:
        return None
    return {k: round(a[k] + b[k], 6) for k in a}


def pair_counts(hist: Mapping[float, int]) -> list[int]:
    """Pairs lost, tied and won by output A (councils' means rounded to the nearest)."""
    counts = [0, 0, 0]
    for value, n in hist.items():
        counts[0 if value < 0.25 else 1 if value <= 0.75 else 2] += n
    return counts


class Aggregator:
    """Fold results into a report, streaming."""

    def __init__(
        self,
        *,
        dimensions: Iterable[str] = (),
        thresholds: Iterable[float] = default_thresholds(),
        pass_fail: bool = False,
        hit_k: Iterable[int] = (1, 3, 5, 10),
        scale: str = "1-10",
        lo: int = 1,
        hi: int = 10,
        threshold: float | None = None,
        judges: Sequence[str] = (),
        council_mode: str = "mean",
        swap: bool = True,
        lane: str = "live",
        prices: Prices | None = None,
        cascade: CascadeSpec | None = None,
    ) -> None:
        shape = ReportShape(
            hit_k=tuple(sorted(set(hit_k))),
            lo=lo,
            hi=hi,
            pairwise=scale == "pairwise",
            judges=max(1, len(judges)),
            swap=swap,
        )
        self._args = (tuple(dimensions), tuple(sorted(set(thresholds), reverse=True)), pass_fail, shape)
        self.run = Summary(*self._args)
        self.by_model: dict[str, Summary] = {}
        self.latency: Counter[float] = Counter()
        self.spent = {"live": [0, 0, 0, 0], "batch": [0, 0, 0, 0]}
        """Tokens spent per lane: input, output, cache read, cache write."""
        self.batch_jobs = 0
        self.attempts = 0
        self.cache_hits = 0
        self.saved: list[int] = [0, 0, 0, 0]  # tokens a cached reply spared: in, out, cache read, write
        self.saved_by: dict[str, list[int]] = {}
        """The same per judge model (a council's judges price differently; "": the run's judge)."""
        self.lane = lane
        """The run's lane: a cached reply spared a call priced at that lane's rate."""
        self.prices = prices or shipped_prices()
        """The run's prices (:meth:`judgeq.RunSpec.price_book`)."""
        self.lo, self.hi = lo, hi
        mode = "pairwise" if scale == "pairwise" else "pass-fail" if pass_fail else "numeric"
        self.agreement = AgreementStats(mode, lo, hi, threshold)
        self.estimates = (
            EstimateStats(threshold, numeric=mode == "numeric", lo=lo, hi=hi) if mode != "pairwise" else None
        )
        self.pairwise = scale == "pairwise"
        self.judges = list(judges)
        self.swap = swap
        self.council = (
            CouncilStats(self.judges, "ordinal" if mode == "numeric" else "nominal", council_mode)
            if len(self.judges) > 1 and cascade is None
            else None
        )
        self.cascade = (
            CascadeStats(cascade, self.judges, threshold, scale == "pairwise")
            if cascade is not None
            else None
        )
        self.pairing = InputPairing()
        self.sections: dict[str, Section] = {}
        """Each kind's own section of the run (:attr:`JobKind.run_section`), by kind."""
        for name, kind in KINDS.items():
            section = kind.run_section(shape) if kind.run_section is not None else None
            if section is not None:
                self.sections[name] = section
        self.judge_spent: dict[str, list[int]] = {}
        """A council's tokens per judge model (for its cost): input, output, cache read, write,
        per lane (live 0-3, batch 4-7)."""

    def add(self, r: Result) -> None:
        self.run.add(r)
        self.agreement.add(r)
        by_model = r.kind not in _NOT_BY_MODEL
        if self.estimates is not None:
            self.estimates.add(r, by_model=by_model)
        if by_model:
            self.pairing.add(r)
        section = self.sections.get(r.kind)
        if section is not None:
            section.add(r)
        if self.council is not None:
            self.council.add(r)
        if self.cascade is not None:
            self.cascade.add(r)
        if r.judge_usage and not r.cached:
            for model, used in r.judge_usage.items():
                row = self.judge_spent.setdefault(model, [0] * 8)
                off = 4 if r.batch else 0
                for i, n in enumerate(used[:4]):
                    row[off + i] += n
        if r.model is not None and by_model:
            group = self.by_model.get(r.model)
            if group is None:
                group = self.by_model[r.model] = Summary(*self._args)
            group.add(r)
        if r.attempts:
            self.latency[round(r.grading_latency_ms)] += 1
        self.attempts += r.attempts
        tokens = (r.input_tokens, r.output_tokens, r.cache_read_input_tokens, r.cache_creation_input_tokens)
        if r.cached:  # spent by an earlier run: counted as saved, not as spent
            # a hit is a judge call the cache answered: a council's job made one per judge, a
            # pair judged in both orders two, a conversation graded turn by turn one per turn
            judges = max(len(self.judges), len(r.judge_usage or ()), 1)
            self.cache_hits += judges * max(r.units(judges), 1)
            self.saved = [a + b for a, b in zip(self.saved, tokens, strict=True)]
            for model, used in (r.judge_usage or {"": list(tokens)}).items():  # "": the run's judge
                row = self.saved_by.setdefault(model, [0, 0, 0, 0])
                for i, n in enumerate(used[:4]):
                    row[i] += n
            return
        if r.batch:
            self.batch_jobs += 1
        lane = self.spent["batch" if r.batch else "live"]
        for i, n in enumerate(tokens):
            lane[i] += n

    def _cost(self, judge_model: str) -> dict[str, float] | None:
        """:func:`lane_cost` of the run; a council's is the sum of its judges' (None when any
        judge has no price)."""
        if not self.judge_spent:
            return lane_cost(judge_model, self.spent["live"], self.spent["batch"], self.prices)
        total: dict[str, float] = {}
        for model, row in self.judge_spent.items():
            part = lane_cost(model, row[:4], row[4:], self.prices)
            if part is None:
                return None
            for k, v in part.items():
                total[k] = round(total.get(k, 0.0) + v, 6)
        return total

    def _saved_usd(self, judge_model: str) -> float | None:
        """What the reply cache's hits would have cost in the run's lane (None: a model has
        no price)."""
        total = 0.0
        for model, row in self.saved_by.items():
            parts = cost_breakdown(model or judge_model, *row, batch=self.lane == "batch", prices=self.prices)
            if parts is None:
                return None
            total += parts["total"]
        return round(total, 6)

    def report(self, *, judge_model: str) -> dict[str, Any]:
        """The aggregate part of ``report.json``."""
        run = self.run.to_dict()
        total = [a + b for a, b in zip(self.spent["live"], self.spent["batch"], strict=True)]
        cost = self._cost(judge_model)
        out: dict[str, Any] = {
            "counts": run.pop("counts"),
            **run,
            "latency_ms": {
                "p50": _r(quantile(self.latency, 0.5), 1),
                "p95": _r(quantile(self.latency, 0.95), 1),
                "max": max(self.latency) if self.latency else None,
            },
            "distributions": {
                "overall": histogram(self.run.overall.hist, self.lo, self.hi)
                if not self.pairwise
                else {"edges": [-0.25, 0.25, 0.75, 1.25], "counts": pair_counts(self.run.overall.hist)},
                "latency_ms": histogram(self.latency, 0, max(self.latency) if self.latency else 0),
            },
            "usage": {
                "input_tokens": total[0],
                "output_tokens": total[1],
                "cache_read_input_tokens": total[2],
                "cache_creation_input_tokens": total[3],
                "judge_calls": self.attempts,
                "estimated_cost_usd": None if cost is None else cost["total"],
                "cost_usd": cost,
                "batch_api": {
                    "jobs": self.batch_jobs,
                    "input_tokens": self.spent["batch"][0],
                    "output_tokens": self.spent["batch"][1],
                    "discount_usd": None if cost is None else cost["batch_discount"],
                },
                "prices_taken": self.prices.taken,
                "reply_cache": {
                    "hits": self.cache_hits,
                    "saved_input_tokens": self.saved[0],
                    "saved_output_tokens": self.saved[1],
                    "saved_usd": self._saved_usd(judge_model),
                },
            },
        }
        if self.by_model:
            out["by_model"] = {}
            nested: dict[str, dict[str, Any]] = {}  # each model's own kind sections, by section
            for model in sorted(self.by_model):
                summary = self.by_model[model].to_dict()
                for key in GROUP_SECTION_KEYS:
                    if key in summary:
                        nested.setdefault(key, {})[model] = summary[key]
                out["by_model"][model] = summary
            for key, by_model in nested.items():  # also under the run's section, by model
                if key in out:
                    out[key]["by_model"] = by_model
        paired = self.pairing.to_list()
        if paired:
            out["by_model_paired"] = paired
        for kind, section in self.sections.items():
            body = section.to_dict()
            if body is not None:
                out[str(KINDS[kind].section)] = body
        agreement = self.agreement.to_dict()
        if agreement is not None:
            estimates = self.estimates.to_dict() if self.estimates is not None else None
            if estimates is not None:
                agreement["estimates"] = estimates
            out["agreement"] = agreement
        if self.cascade is not None:
            out["cascade"] = self.cascade.to_dict(None if cost is None else cost["total"])
        if self.council is not None:
            out["council"] = self.council.to_dict()
        if self.council is not None or self.cascade is not None:
            # every judge of the council, what it spent and what the reply cache spared it (a
            # council answered from the cache alone had no by_judge at all)
            models = sorted((set(self.judge_spent) | set(self.saved_by)) - {""})
            if models:
                none = [0] * 8
                out["usage"]["by_judge"] = {
                    model: {
                        "input_tokens": (row := self.judge_spent.get(model, none))[0] + row[4],
                        "output_tokens": row[1] + row[5],
                        "cost_usd": (lane_cost(model, row[:4], row[4:], self.prices) or {}).get("total"),
                        "saved_input_tokens": self.saved_by.get(model, none)[0],
                        "saved_output_tokens": self.saved_by.get(model, none)[1],
                    }
                    for model in models
                }
        return out


def served_list(counters: Mapping[str, float]) -> list[dict[str, Any]]:
    """Answered calls by provenance, most first, from a run's live counters (``served:...``):
    ``provider``, ``endpoint`` (host, no credential), ``model`` (as the server named it),
    ``response_format``, ``calls`` (None: not known)."""
    served = {k.removeprefix("served:"): int(v) for k, v in counters.items() if k.startswith("served:")}
    out = []
    for text, calls in sorted(served.items(), key=lambda kv: (-kv[1], kv[0])):
        parts = (text.split(" ") + ["-"] * 4)[:4]
        provider, endpoint, model, fmt = (None if p == "-" else p for p in parts)
        out.append(
            {
                "provider": provider,
                "endpoint": endpoint,
                "model": model,
                "response_format": fmt,
                "calls": calls,
            }
        )
    return out
