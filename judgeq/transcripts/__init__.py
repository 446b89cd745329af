"""What an agent's conversation is, with no judgeq import: its messages and tool calls read and
normalised (``messages.py``), deterministic checks of what it did (``checks.py``) and its
transcript rendered for a judge (``render.py``)."""

__all__: list[str] = []
