"""One job's grading: the judge request rendered, the verdict parsed, scored (weights, ceiling,
safety gate), the result built (retrieval fields too)."""

__all__: list[str] = []
