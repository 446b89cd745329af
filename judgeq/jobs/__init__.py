"""The jobs file (one JSONL line per job): its job kinds and the streaming reader that validates it."""

__all__: list[str] = []
