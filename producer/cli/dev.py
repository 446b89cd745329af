"""``judgeq dev fake-judge``: the stand-in Anthropic judge server, to try the real path (the
Anthropic judge, workers, Flower, the batch lane) offline, with no key and no money."""

from __future__ import annotations

import click

__all__ = ["dev", "fake_judge"]


@click.group()
def dev() -> None:
    """Tools for trying judgeq and developing on it."""


@dev.command("fake-judge")
@click.option("--port", type=int, default=8765, show_default=True, help="Port on 127.0.0.1 (0: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--latency", type=float, default=0.2, show_default=True, help="Seconds per judge call.")
@click.option("--rpm", type=int, default=None, help="Requests a minute it serves (429 beyond).")
@click.option("--api-key", default="fake-key", show_default=True, help="The key it accepts.")
def fake_judge(port: int, host: str, latency: float, rpm: int | None, api_key: str) -> None:
    """Serve a stand-in Anthropic Messages API (judgeq.testing's FakeMessagesAPI) until Ctrl-C.

    It answers every model with a verdict in the rubric's format (a job's text can script
    faults: [[fake:429]], [[fake:garbage]], [[fake:score=3]], ...). Point judgeq at it with the
    two variables it prints."""
    import threading

    from judgeq.testing import FakeMessagesAPI

    fake = FakeMessagesAPI(latency=latency, api_key=api_key, rpm=rpm).start(port=port, host=host)
    click.echo(f"judgeq: a stand-in Anthropic judge listens on {fake.base_url} (Ctrl-C stops it)")
    click.echo("judgeq: in the shells of the workers and of submit:")
    click.echo(f"  export ANTHROPIC_BASE_URL={fake.base_url} ANTHROPIC_API_KEY={api_key}")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()
