"""``python -m judgeq``."""

from judgeq.cli import main

main()
