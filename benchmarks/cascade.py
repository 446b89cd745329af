"""A judge cascade's guarantee, by replay of LLMBar's published judge outputs (issue 32, point 4:
the statistics only; no judge is called and judgeq's pipeline does not run cascades yet).

    python benchmarks/cascade.py [FOLDER] [--splits 1000] [--alpha 0.2] [--delta 0.1]

FOLDER defaults to ``../shared/data/external/llmbar`` (absent: says so, exits 0). For each item
of the LLMBar subsets with six published strategies (Natural, Adversarial/*), each evaluator's
verdict is the majority of its outputs over the strategies Vanilla, Vanilla_NoRules, CoT, Swap,
Swap_CoT and Metrics_Reference in both presentation orders (12 answers: the paper's "simulated
annotators"), and its confidence the share of those answers that agree with it; with
``--confidence swap`` (or ``both``, the default, to measure one against the other) the answers
are one strategy's in both orders: agreement under position swap. The cascade
LLaMA-2 -> ChatGPT -> GPT-4 is fitted on a random half of a subset
(:func:`judgeq.figures.selective.fit_cascade`: fixed-sequence testing, risk ``alpha`` with
probability ``1 - delta``) and applied to the other half, ``--splits`` times. Printed per subset
and cascade: how often the held-out agreement of the kept verdicts reached ``1 - alpha`` (the
guarantee: in at least ``1 - delta`` of splits, up to the held-out half's own sampling noise),
the coverage, the agreement, and the cost against GPT-4 grading every item (a stated price
table: 2023 list prices per million input tokens, every judge reading the same prompts; an
escalated item pays every judge it reached), beside GPT-4 alone (all items, its majority).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llmbar import DEFAULT_FOLDER

from judgeq.figures.selective import apply_cascade, fit_cascade

STRATEGIES = ("Vanilla", "Vanilla_NoRules", "CoT", "Swap", "Swap_CoT", "Metrics_Reference")
PRICE = {"LLaMA2": 0.9, "PaLM2": 0.5, "ChatGPT": 1.5, "GPT-4": 30.0}
"""USD per million input tokens, 2023 list prices: LLaMA-2-70B on Together, PaLM 2 text-bison,
gpt-3.5-turbo-0613, gpt-4-0613 (8k). Every judge reads the same prompt, so the ratios are the
cost ratios."""
CASCADES = (("LLaMA2", "ChatGPT", "GPT-4"), ("ChatGPT", "GPT-4"), ("PaLM2", "GPT-4"))


ESTIMATORS = {"annotators": STRATEGIES, "swap": ("Vanilla_NoRules",)}
"""Confidence estimators, by the published outputs they read: simulated annotators (six
strategies in both orders: 12 answers) and agreement under position swap (one strategy in both
orders: 1.0 when the two agree, 0.5 when they do not)."""


def load(
    folder: Path, strategies: tuple[str, ...] = STRATEGIES
) -> dict[str, dict[int, dict[str, tuple[int, float]]]]:
    """{subset: {item: {evaluator: (verdict 1|2, confidence)}}} and the labels in ``_label``:
    the verdict is the majority of the answers under ``strategies`` (both orders), the
    confidence its share."""
    answers: dict[tuple[str, int, str], list[int]] = defaultdict(list)
    labels: dict[tuple[str, int], int] = {}
    for path in sorted((folder / "evaluators").glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["strategy"] in strategies and r["evaluator"] in PRICE:
                    labels[(r["subset"], r["index"])] = int(r["label"])
                    if r["winner"] is not None:
                        answers[(r["subset"], r["index"], r["evaluator"])].append(int(r["winner"]))
    out: dict[str, dict[int, dict[str, tuple[int, float]]]] = defaultdict(lambda: defaultdict(dict))
    for (subset, index, evaluator), said in answers.items():
        if len(said) < max(1, 2 * len(strategies) - 2):  # a subset without them (Processed/*)
            continue
        (verdict, n), *_ = Counter(said).most_common(1)
        out[subset][index][evaluator] = (verdict, n / len(said))
    for subset, items in out.items():
        for index in list(items):
            items[index]["_label"] = (labels[(subset, index)], 1.0)
    return out


def measure(
    items: dict[int, dict[str, tuple[int, float]]],
    cascade: tuple[str, ...],
    splits: int,
    alpha: float,
    delta: float,
    rng: random.Random,
) -> dict[str, float]:
    usable = [i for i, v in items.items() if all(j in v for j in cascade)]
    held = coverage = agreement = cost = 0.0
    for _ in range(splits):
        rng.shuffle(usable)
        half = len(usable) // 2
        calib, test = usable[:half], usable[half:]
        label = {i: items[i]["_label"][0] for i in usable}
        fitted = fit_cascade(
            [[items[i][j][1] for i in calib] for j in cascade],
            [[items[i][j][0] == label[i] for i in calib] for j in cascade],
            alpha,
            delta,
        )
        kept = right = 0
        paid = 0.0
        for i in test:
            stage = apply_cascade(fitted, [items[i][j][1] for j in cascade])
            reached = len(cascade) if stage is None else stage + 1
            paid += sum(PRICE[j] for j in cascade[:reached])
            if stage is not None:
                kept += 1
                right += items[i][cascade[stage]][0] == label[i]
        held += kept == 0 or right / kept >= 1 - alpha
        coverage += kept / len(test)
        agreement += right / kept if kept else 1.0
        cost += paid / (PRICE["GPT-4"] * len(test))
    return {
        "items": len(usable),
        "held": held / splits,
        "coverage": coverage / splits,
        "agreement": agreement / splits,
        "cost": cost / splits,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_FOLDER))
    parser.add_argument("--splits", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.2)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument(
        "--confidence", choices=[*ESTIMATORS, "both"], default="both", help="the confidence estimator"
    )
    args = parser.parse_args(argv)
    folder = Path(args.folder).resolve()
    if not (folder / "evaluators").is_dir():
        print(f"cascade: {folder} (with its evaluators/) is absent; nothing to measure (skipped).")
        return 0
    estimators = list(ESTIMATORS) if args.confidence == "both" else [args.confidence]
    loaded = {name: load(folder, ESTIMATORS[name]) for name in estimators}
    data = loaded[estimators[0]]
    rng = random.Random(0)
    print(
        f"cascade replay on LLMBar: target agreement {1 - args.alpha:.2f} with probability "
        f"{1 - args.delta:.2f}, {args.splits} random calibration/test halves per subset"
    )
    head = f"{'subset':<28} {'judges':<26} {'confidence':<11} {'items':>5} {'held':>6} {'coverage':>9}"
    print(head + f" {'agreement':>10} {'cost':>6}")
    for subset in sorted(data):
        items = data[subset]
        gpt4 = [i for i, v in items.items() if "GPT-4" in v]
        alone = sum(items[i]["GPT-4"][0] == items[i]["_label"][0] for i in gpt4) / len(gpt4)
        row = f"{subset:<28} {'GPT-4 alone':<26} {'':<11} {len(gpt4):>5} {'':>6} {100.0:>8.1f}%"
        print(row + f" {100 * alone:>9.1f}% {1.0:>5.2f}x")
        for cascade in CASCADES:
            for name in estimators:
                if subset not in loaded[name]:
                    continue
                m = measure(loaded[name][subset], cascade, args.splits, args.alpha, args.delta, rng)
                print(
                    f"{'':<28} {' -> '.join(cascade):<26} {name:<11} {int(m['items']):>5} "
                    f"{100 * m['held']:>5.1f}% {100 * m['coverage']:>8.1f}% {100 * m['agreement']:>9.1f}% "
                    f"{m['cost']:>5.2f}x"
                )
    print(
        "held: share of splits whose kept verdicts agreed with the labels at least at the target on the "
        "held-out half (the guarantee is on the population; a held-out half of ~50 items adds its own "
        "noise); coverage: share of held-out items not abstained; cost: against GPT-4 grading every "
        "held-out item."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
