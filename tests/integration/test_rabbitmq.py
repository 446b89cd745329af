"""What makes RabbitMQ a broker to trust, checked on a real node: judgeq's queue is a durable
quorum queue, the producer's channel is in confirm mode, tasks acknowledge late, and a job
retried with a countdown (RabbitMQ's delayed delivery through the topic exchange) comes back.
The fault suite itself runs on both brokers in test_faults.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from judgeq.settings import load_settings
from judgeq.workers.celery_app import GRADE_TASK, create_app

from .harness import RabbitServer, Worker

pytestmark = pytest.mark.integration


@pytest.fixture
def rabbit(rabbit_server: RabbitServer) -> RabbitServer:
    if rabbit_server.proc is None:
        rabbit_server.start()
    rabbit_server.reset()
    return rabbit_server


def test_queues_are_quorum_publishes_confirmed_acks_late(
    rabbit: RabbitServer, redis_url: str, start_worker: Callable[..., Worker]
) -> None:
    start_worker("w1", env={"JUDGEQ_BROKER_URL": rabbit.url})  # a worker declares its queue
    queues = {
        line.split("\t")[0]: line.split("\t")[1:]
        for line in rabbit.ctl("list_queues", "name", "type", "durable").splitlines()
    }
    assert queues["judgeq"] == ["quorum", "true"], queues
    app = create_app(load_settings(broker_url=rabbit.url, redis_url=redis_url))
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost
    assert app.tasks[GRADE_TASK].acks_late
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=3)
        assert conn.transport_options["confirm_publish"] is True
        assert conn.connection.confirm_publish is True  # py-amqp: each publish waits for its ack


def test_every_routed_queues_depth_is_asked_over_one_connection(rabbit: RabbitServer, redis_url: str) -> None:
    """The exporter asks a few hundred queues each scrape, over one connection: RabbitMQ closes
    the channel on each passive declare of a queue never declared, and the next is asked on a
    new one (none is counted, none raises)."""
    from judgeq.workers.broker import queue_depth, queues_depth

    app = create_app(load_settings(broker_url=rabbit.url, redis_url=redis_url))
    with app.connection_for_write() as conn:
        conn.default_channel.queue_declare("judgeq.depth-probe", durable=True, auto_delete=False)
        producer = conn.Producer()
        producer.publish({"n": 1}, routing_key="judgeq.depth-probe")
        producer.publish({"n": 2}, routing_key="judgeq.depth-probe")
    names = ["judgeq.never-a", "judgeq.depth-probe", "judgeq.never-b", "judgeq.never-c"]
    assert queue_depth(app, "judgeq.depth-probe") == 2
    assert queues_depth(app, names) == 2
