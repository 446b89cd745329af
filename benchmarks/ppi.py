"""Prediction-powered estimates from few human labels, by simulation on LLMBar's labelled pairs and
its published judge outputs (issue 32, point 6; the report gives the same figures: agreement.estimates).

    python benchmarks/ppi.py [FOLDER] [--resamples 1000] [--labels 40]

FOLDER defaults to ``../shared/data/external/llmbar`` (absent: says so, exits 0). The figure
estimated is a pass rate: the share of a subset's pairs whose first output people prefer. Each
resample labels ``--labels`` random items (people's label known) and leaves the rest to the
judge (its majority verdict over the published strategies and orders, as benchmarks/cascade.py
reads them). Printed per subset and judge: the coverage of the nominal 95% interval of the
PPI++ estimate (:func:`judgeq.figures.ppi.ppi_mean`) and of the human-only one, their mean
widths, and the effective gain in labels ((human width / PPI width)^2); beside them, the
judge-only figure and whether its interval holds the truth at all (it is biased where the judge
errs one way). The truth is the subset's label share over every item.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cascade import load
from llmbar import DEFAULT_FOLDER

from judgeq.figures.ppi import human_only, judge_only, ppi_mean

JUDGES = ("GPT-4", "ChatGPT", "PaLM2", "LLaMA2")


def simulate(
    pairs: list[tuple[int, int]], labels: int, resamples: int, rng: random.Random
) -> dict[str, float]:
    """``pairs``: (people's 1|0, the judge's 1|0) per item."""
    truth = sum(y for y, _ in pairs) / len(pairs)
    covered = human_covered = width = human_width = 0.0
    for _ in range(resamples):
        order = rng.sample(pairs, len(pairs))
        labelled, rest = order[:labels], order[labels:]
        y = [a for a, _ in labelled]
        est = ppi_mean(y, [b for _, b in labelled], [b for _, b in rest])
        human = human_only(y)
        covered += est.lo <= truth <= est.hi
        human_covered += human.lo <= truth <= human.hi
        width += est.width
        human_width += human.width
    judged = judge_only([b for _, b in pairs])
    return {
        "items": len(pairs),
        "truth": truth,
        "coverage": covered / resamples,
        "human_coverage": human_covered / resamples,
        "width": width / resamples,
        "human_width": human_width / resamples,
        "judge": judged.value,
        "judge_holds": float(judged.lo <= truth <= judged.hi),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_FOLDER))
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--labels", type=int, default=40)
    args = parser.parse_args(argv)
    folder = Path(args.folder).resolve()
    if not (folder / "evaluators").is_dir():
        print(f"ppi: {folder} (with its evaluators/) is absent; nothing to measure (skipped).")
        return 0
    data = load(folder)
    rng = random.Random(0)
    print(
        f"PPI++ on LLMBar: the share of pairs people decide for the first output, from {args.labels} "
        f"labels and the judge on the rest; nominal 95% intervals, {args.resamples} resamples"
    )
    print(
        f"{'subset':<28} {'judge':<8} {'items':>5} {'truth':>6} {'judge says':>10} {'PPI cover':>9} "
        f"{'human cover':>11} {'PPI width':>9} {'human width':>11} {'gain':>5}"
    )
    subsets = dict(data)
    subsets["LLMBar (all five)"] = {
        (name, i): v for name, items in data.items() if name.startswith("LLMBar/") for i, v in items.items()
    }
    for subset in sorted(subsets):
        items = subsets[subset]
        for judge in JUDGES:
            pairs = [(int(v["_label"][0] == 1), int(v[judge][0] == 1)) for v in items.values() if judge in v]
            if len(pairs) <= args.labels + 1:
                continue
            m = simulate(pairs, args.labels, args.resamples, rng)
            said = f"{100 * m['judge']:.1f}%" + ("" if m["judge_holds"] else " *")
            print(
                f"{subset:<28} {judge:<8} {int(m['items']):>5} {100 * m['truth']:>5.1f}% {said:>10} "
                f"{100 * m['coverage']:>8.1f}% {100 * m['human_coverage']:>10.1f}% "
                f"{100 * m['width']:>8.1f}pt {100 * m['human_width']:>10.1f}pt "
                f"{(m['human_width'] / m['width']) ** 2:>4.2f}x"
            )
    print(
        "cover: share of resamples whose interval held the truth; width: the interval's mean width in "
        "points; gain: (human width / PPI width)^2, the labels the human-only figure would need for "
        "PPI's width, as a multiple; *: the judge-only interval misses the truth."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
