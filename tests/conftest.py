"""Shared fixtures.  Every test runs with the ``JUDGEQ_*`` and ``ANTHROPIC_*`` environment
cleared, so a developer's or CI's settings never change a test's outcome."""

from __future__ import annotations

import contextlib
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


def _children(pid: int) -> dict[int, str]:
    """The live (not zombie) child processes of ``pid``, with their command lines (Linux /proc)."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) != pid or fields[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
        found[int(entry.name)] = cmd
    return found


@pytest.fixture(scope="session", autouse=True)
def _no_process_left_behind() -> Iterator[None]:
    """The suite leaves no process behind (a server a test started and never stopped outlives
    the run: a `judgeq exporter` did): at the end of each test process, a child still alive
    after 15 s fails the run, named, and is killed."""
    yield
    if not Path("/proc").is_dir():
        return
    import signal
    import time

    deadline = time.monotonic() + 15
    left = _children(os.getpid())
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _children(os.getpid())
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "processes left behind by the tests: " + "; ".join(f"{p}: {c}" for p, c in left.items())


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


SLOW_FILES = {
    "test_scale_benchmark.py",
    "test_llmbar_benchmark.py",
    "test_jury_benchmark.py",
    "test_html_report.py",
    "test_report_pages.py",
}
"""Files outside tests/integration that are slow as a whole: benchmarks run as tests, and the
report in a real browser."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every integration test, and the files in :data:`SLOW_FILES`, are ``slow`` (``pytest -m
    "not slow"`` is the fast loop). Tests on a RabbitMQ node share one xdist worker (``--dist
    loadgroup``), so the suite starts one node, not one per worker."""
    for item in items:
        path = Path(str(item.fspath))
        if "integration" in path.parts or path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if path.name == "test_rabbitmq.py" or "rabbitmq" in params.values():
            item.add_marker(pytest.mark.xdist_group("rabbitmq"))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores. Integration tests spend most of their time
    waiting on worker processes, Redis and the stand-in judge: on 2 cores the suite took 570 s
    with 2 workers and 486 s with 3."""
    return (os.cpu_count() or 1) + 1
