"""A run's spec and the stages every transport runs for a message, top to bottom."""

__all__: list[str] = []
