"""Rubrics: the model, loading (built-in, file, text), validation and the fingerprint."""

__all__: list[str] = []
