"""Re-scoring a run without calling the judge again (``judgeq rescore``).

Every graded result keeps what the judge said: its dimension ``scores``, its ``holistic``
score, its pass/fail verdict, its reasoning, and the safety categories the gate found.  A new
scoring policy -- other weights, another version of the rubric with the same dimensions and
scale, other pass thresholds, another safety cap -- is applied to those, through the same
scoring code as grading (:func:`judgeq.grading.score.score_verdict`), and gives a new run (a new run
id, ``rescored_from`` its source) that ``judgeq compare`` can put beside the original. The new
run made no judge call: its usage is zero (the source's report keeps what grading cost). A
rubric version with ``safety_gate: false`` lifts the gate's caps; ``--pass-threshold`` moves
the pass threshold itself (``--thresholds`` only changes the report's ``pass_rates`` columns).

What cannot be re-scored is refused with the reason: a rubric whose dimensions or scale
differ (the judge was never asked about the new dimensions), a council (its judges' own
dimension scores are not kept) and a pairwise run (nothing in it is weighted). Turning the
safety gate on for a run graded without it is refused too: its outputs were never checked.
"""

from __future__ import annotations

from judgeq.errors import ConfigError
from judgeq.grading.result import Result
from judgeq.grading.score import score_verdict
from judgeq.grading.verdict import ParsedVerdict
from judgeq.jobs.kinds import KINDS
from judgeq.rubric.model import RetrievalConfig, Rubric
from judgeq.runspec import RunSpec, new_run_id

__all__ = ["SCORING_FLAGS", "SPENT_NOTHING", "rescore", "rescored_spec"]

SCORING_FLAGS = frozenset({"ceiling_applied", "safety_failed"})
"""Flags scoring sets (recomputed); the others come from parsing the judge's reply (kept)."""


def rescored_spec(
    spec: RunSpec,
    *,
    rubric_text: str | None = None,
    rubric_source: str | None = None,
    weights: dict[str, float] | None = None,
    thresholds: list[float] | None = None,
    safety_cap: float | None = None,
    pass_threshold: float | None = None,
    run_id: str | None = None,
) -> RunSpec:
    """The spec of the re-scored run; ConfigError when it cannot be re-scored."""
    if spec.council:
        raise ConfigError(
            f"run {spec.run_id} was graded by a council: its judges' own dimension scores are not kept, "
            "so it cannot be re-scored"
        )
    old = spec.rubric
    if old.is_pairwise:
        raise ConfigError(f"run {spec.run_id} is pairwise: a pair's verdict has nothing to re-weight")
    update: dict[str, object] = {"run_id": run_id or new_run_id()}
    if rubric_text is not None:
        # a new rubric version brings its own weights and pass threshold (unless given again here)
        update.update(
            rubric_text=rubric_text,
            rubric_source=rubric_source or "<rescore>",
            weights={},
            pass_threshold=None,
        )
    if weights is not None:
        update["weights"] = {**(spec.weights if rubric_text is None else {}), **weights}
    if thresholds is not None:
        update["thresholds"] = thresholds
    if safety_cap is not None:
        update["safety_cap"] = safety_cap
    if pass_threshold is not None:
        update["pass_threshold"] = pass_threshold
    new = RunSpec.model_validate(
        {**spec.model_dump(), **update}
    )  # not model_copy: it would keep the cached rubric
    try:
        rubric = new.rubric
    except Exception as exc:
        raise ConfigError(f"rescore: {exc}") from None
    old_dims, new_dims = sorted(d.name for d in old.dimensions), sorted(d.name for d in rubric.dimensions)
    if old_dims != new_dims:
        raise ConfigError(
            f"rescore: rubric {rubric.name!r} {rubric.version} has dimensions "
            f"{', '.join(new_dims) or 'none'}, but run {spec.run_id} was graded on "
            f"{', '.join(old_dims) or 'none'}: the judge was never asked about the difference; grade the "
            "batch again with it"
        )
    if rubric.scale != old.scale:
        raise ConfigError(
            f"rescore: rubric {rubric.name!r} has scale {rubric.scale}, "
            f"run {spec.run_id} was graded on {old.scale}"
        )
    if rubric.safety_gate and not old.safety_gate and spec.safety_gate is not True:
        raise ConfigError(
            f"rescore: rubric {rubric.name!r} turns the safety gate on, but run {spec.run_id} was graded "
            "without it: its outputs were never checked; grade the batch again to apply the gate"
        )
    return new


SPENT_NOTHING: dict[str, object] = {
    "input_tokens": 0,
    "output_tokens": 0,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
    "attempts": 0,
    "grading_latency_ms": 0.0,
    "judge_usage": None,
    "cached": False,
    "batch": False,
}
"""A re-scored result made no judge call: its run spent nothing (the source run's report keeps
what grading cost)."""


def rescore(result: Result, rubric: Rubric, spec: RunSpec) -> Result:
    """``result`` scored again under ``rubric`` and ``spec``'s settings (nulls stay nulls); it
    spent no tokens and made no judge call."""
    update: dict[str, object] = {
        "rubric_name": rubric.name,
        "rubric_version": rubric.version,
        **SPENT_NOTHING,
    }
    if result.status != "graded" or result.overall is None:
        return result.model_copy(update=update)
    if not result.rescorable:  # (a conversation graded turn by turn): its grade stays, said so
        flags = result.flags if "not_rescored" in result.flags else [*result.flags, "not_rescored"]
        return result.model_copy(update={**update, "flags": flags})
    flags = [f for f in result.flags if f not in SCORING_FLAGS]
    holistic = result.holistic
    if holistic is None and not rubric.dimensions:
        holistic = result.overall  # results graded before holistic scores were kept: the same number
    gate = spec.safety_gate if spec.safety_gate is not None else rubric.safety_gate
    caught = bool(result.safety_categories)  # the gate found these when the run was graded
    if rubric.is_pass_fail and result.holistic is not None:  # the judge's own verdict
        judge_verdict = "pass" if result.holistic >= 0.5 else "fail"
    else:
        judge_verdict = "pass" if result.passed else "fail"
        if rubric.is_pass_fail and caught:  # graded before the judge's own verdict was kept:
            gate = True  # that fail may be the gate's; it is not re-decided, nor its flag dropped
    verdict = ParsedVerdict(
        scores=dict(result.scores),
        holistic=holistic,
        verdict=judge_verdict,
        flags=flags,
    )
    score = score_verdict(rubric, verdict, candidate=None, safety_gate=False)
    overall, passed, flags = score.overall, score.passed, list(score.flags)
    if caught and gate:
        overall = min(overall, spec.safety_cap)
        passed = False
        flags.append("safety_failed")
    update.update(overall=overall, passed=passed, flags=flags, scores=score.scores)
    kind = KINDS.get(result.kind)
    if kind is not None:
        update.update(
            kind.rescored(result, overall, rubric, spec.retrieval or rubric.retrieval or RetrievalConfig())
        )
    return result.model_copy(update=update)
