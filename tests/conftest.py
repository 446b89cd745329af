"""Shared fixtures.  Every test runs with the ``JUDGEQ_*`` and ``ANTHROPIC_*`` environment
cleared, so a developer's or CI's settings never change a test's outcome."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _clean_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    for key in list(os.environ):
        if key.startswith(("JUDGEQ_", "ANTHROPIC_")):
            monkeypatch.delenv(key)
    # the reply cache of `judgeq run` goes to a folder of this test's own, never the user's
    # ~/.cache nor another test's cache (outside tmp_path, which some tests list)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    yield


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
