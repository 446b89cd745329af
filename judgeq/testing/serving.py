"""A stand-in run as its own process: serve until SIGTERM or SIGINT (``python -m
judgeq.testing.fake_anthropic``, ``... fake_gemini``): the one loop every stand-in's ``main``
ends in."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Protocol

__all__ = ["serve_until_signalled"]


class _Servable(Protocol):
    @property
    def base_url(self) -> str: ...

    def start(self, port: int = 0, host: str = "127.0.0.1") -> object: ...

    def stop(self) -> None: ...


def serve_until_signalled(fake: _Servable, port: int, host: str) -> int:
    """Start ``fake`` on ``host:port``, print ``READY <base_url>`` (what a parent process
    waits for), serve until SIGTERM or SIGINT, stop cleanly; 0."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    fake.start(port=port, host=host)
    print(f"READY {fake.base_url}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        fake.stop()
    return 0
