"""The pure core imports no Celery, Redis or SDK; the public API stays complete."""

from __future__ import annotations

import subprocess
import sys

import judgeq

FORBIDDEN = ("celery", "kombu", "redis", "anthropic", "httpx2", "flower")


def test_core_imports_no_edge_libraries() -> None:
    code = (
        "import sys, judgeq, judgeq._grading, judgeq._verdict, judgeq._scoring;"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}];"
        "print(','.join(sorted(bad)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_all_is_sorted_and_complete() -> None:
    # order: ruff's RUF022 (isort style); here: no duplicates, nothing missing, nothing extra
    assert len(judgeq.__all__) == len(set(judgeq.__all__))
    public = {
        name
        for name, value in vars(judgeq).items()
        if not name.startswith("_") and not isinstance(value, type(judgeq))
    }
    assert public == set(judgeq.__all__)
