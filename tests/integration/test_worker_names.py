"""Workers on one machine (issue 20, point 3): each names itself (``judgeq-PID@HOST``), the
banner says the pool and judge calls it really has, and ``celery -A judgeq.workers worker``
starts the same pool as ``judgeq worker``. Real worker processes."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from .harness import RedisServer, Worker, wait_for

pytestmark = pytest.mark.integration


def test_two_workers_on_one_machine_are_two_nodes_with_the_same_pool(
    redis_server: RedisServer, start_worker: Callable[..., Worker]
) -> None:
    ours = start_worker("w1", argv=["judgeq", "worker"], env={"JUDGEQ_CONCURRENCY": "24"})
    plain = start_worker(
        "w2", argv=["celery", "-A", "judgeq.workers", "worker"], env={"JUDGEQ_CONCURRENCY": "24"}
    )
    assert ours.proc is not None and plain.proc is not None
    names = {ours.proc.pid: ours, plain.proc.pid: plain}
    for pid, w in names.items():
        wait_for(lambda w=w, pid=pid: re.search(rf"judgeq-{pid}@\S+ v\d", w.output()), 60, "its node name")
        out = w.output()
        # the banner: what the worker does, not Celery's message slots ("concurrency: 6 (thread)")
        assert (
            "concurrency: 24 judge calls at once (threads pool; Celery's concurrency: 6 (thread) message "
            "slots of up to 8 jobs)"
        ) in out
        assert ":**@" not in out  # no password shown where the URL has none
    client = redis_server.client()
    wait_for(lambda: len(client.keys("judgeq:worker:judgeq:*")) == 2, 60, "two heartbeats")
    heartbeats = sorted(str(k).rsplit(":", 1)[1] for k in client.keys("judgeq:worker:judgeq:*"))
    assert heartbeats == sorted(f"judgeq-{pid}@" + heartbeats[0].split("@")[1] for pid in names)


def test_a_node_name_given_is_kept(start_worker: Callable[..., Worker]) -> None:
    w = start_worker("w1")  # the harness passes -n w1@%h
    assert re.search(r"w1@\S+ v\d", w.output())  # in the banner
