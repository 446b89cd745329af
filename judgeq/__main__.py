"""``python -m judgeq``."""

from judgeq.producer.cli import entry

entry()
