"""Testing a pipeline built on judgeq offline, as httpx ships ``MockTransport``: a stand-in
Anthropic Messages API on loopback that the real ``anthropic`` SDK (and so every judgeq judge,
worker and CLI command) talks to, with latency, rate limits (with or without headers) and
scripted faults. judgeq's own tests and benchmarks run against it; so can a user's CI.

::

    import os
    import judgeq
    from judgeq.testing import FakeMessagesAPI

    with FakeMessagesAPI(latency=0.01) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        os.environ["ANTHROPIC_API_KEY"] = fake.api_key
        report = judgeq.grade(rows, rubric="quality", judge="anthropic:claude-haiku-4-5")

A job whose text holds ``[[fake:429]]``, ``[[fake:500*2]]``, ``[[fake:garbage]]``,
``[[fake:slow]]``, ``[[fake:score=3]]``... is answered with that fault (the full list:
:mod:`judgeq.testing.fake_anthropic`); ``python -m judgeq.testing.fake_anthropic --port 0``
runs it as a separate process (for workers on other machines or containers).
"""

import typing as _typing

if _typing.TYPE_CHECKING:
    from judgeq.testing.fake_anthropic import FakeMessagesAPI

__all__ = ["FakeMessagesAPI"]


def __getattr__(name: str) -> _typing.Any:
    # imported on first use, so `python -m judgeq.testing.fake_anthropic` runs the module once
    if name == "FakeMessagesAPI":
        from judgeq.testing.fake_anthropic import FakeMessagesAPI

        return FakeMessagesAPI
    raise AttributeError(f"module 'judgeq.testing' has no attribute {name!r}")
