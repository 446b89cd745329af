"""``python -m judgeq``."""

from judgeq.producer.cli import main

main()
