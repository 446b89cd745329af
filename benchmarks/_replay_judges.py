"""Judges that answer with LLMBar's published verdicts (``python:`` judges for benchmarks/jury.py).

Each factory (``gpt4``, ``chatgpt``, ``palm2``, ``llama2``) returns a judge answering a pair
request, in whichever order judgeq shows it, with the verdict that evaluator published for that
item in that presentation order (strategy ``Vanilla_NoRules``: the one run published for every
subset), as the pairwise rubric's JSON; a verdict the authors could not parse is answered as
prose (a ``parse_error``, as the published run had it). The verdicts are read from
``$JUDGEQ_REPLAY_DIR`` (LLMBar's ``evaluators/*.jsonl`` beside its ``dataset.json`` files).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import JudgeReply
from judgeq.testing.mock_messages import verdict_for_schema

STRATEGY = "Vanilla_NoRules"


def _key(instruction: str, shown_first: str, shown_second: str) -> str:
    return hashlib.sha256(json.dumps([instruction, shown_first, shown_second]).encode()).hexdigest()


@cache
def _published() -> dict[tuple[str, str], str | None]:
    """{(evaluator, key of the item as shown): "A" | "B" | None}."""
    folder = Path(os.environ["JUDGEQ_REPLAY_DIR"])
    items: dict[tuple[str, int], dict[str, Any]] = {}
    for path in folder.rglob("dataset.json"):
        rel = path.parent.relative_to(folder).as_posix()
        subset = (rel if rel.startswith("Processed/") else f"LLMBar/{rel}").replace("LLMEval2", "LLMEval^2")
        for i, row in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            items[(subset, i)] = row
    out: dict[tuple[str, str], str | None] = {}
    for path in (folder / "evaluators").glob("*.jsonl"):
        with path.open(encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["strategy"] != STRATEGY:
                    continue
                row = items[(r["subset"], r["index"])]
                first, second = (
                    (row["output_2"], row["output_1"]) if r["swap"] else (row["output_1"], row["output_2"])
                )
                said = None if r["winner"] is None else "A" if r["winner"] == r["first"] else "B"
                out[(r["evaluator"], _key(row["input"], first, second))] = said
    return out


class ReplayJudge:
    provider = "python"

    def __init__(self, evaluator: str) -> None:
        self.model = evaluator

    def complete(self, request: JudgeRequest, *, timeout: float) -> JudgeReply:
        f = request.fields
        said = _published().get((self.model, _key(f["input"], f["output_a"], f["output_b"])), "missing")
        if said == "missing":
            raise KeyError(f"{self.model} published no verdict for this item")
        if said is None:
            return JudgeReply(text="Both outputs have merits.", input_tokens=1, output_tokens=1)
        text = json.dumps(verdict_for_schema(request.output_schema, said))
        return JudgeReply(text=text, input_tokens=1, output_tokens=1, model=self.model)


def gpt4() -> ReplayJudge:
    return ReplayJudge("GPT-4")


def chatgpt() -> ReplayJudge:
    return ReplayJudge("ChatGPT")


def palm2() -> ReplayJudge:
    return ReplayJudge("PaLM2")


def llama2() -> ReplayJudge:
    return ReplayJudge("LLaMA2")
