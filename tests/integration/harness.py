"""Real parts for integration tests: a redis-server, worker processes, the CLI, batches."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import redis

from judgeq.testing import faults

API_KEY = "sk-ant-test-SECRET-0123456789abcdef"
SUBMIT = ("--rubric", "quality", "--judge", "anthropic:claude-test")
"""The grading options every integration test submits with (the fake judge's model)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A private redis-server on a free port, with AOF persistence in a temp dir (``replicaof``:
    a replica of another server)."""

    def __init__(self, workdir: Path, *, password: str | None = None, replicaof: int | None = None) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (.ci/run installs it with apt-get)")
        self.dir = workdir
        self.password = password
        self.replicaof = replicaof
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--maxmemory-policy",
            "noeviction",
            "--logfile",
            str(self.dir / "redis.log"),
        ]
        if self.password:
            args += ["--requirepass", self.password]
        if self.replicaof is not None:
            args += ["--replicaof", "127.0.0.1", str(self.replicaof)]
        self.proc = subprocess.Popen(args)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, decode_responses=True)


class SentinelGroup:
    """A Redis master, one replica and three Sentinels (quorum 2) on loopback, master ``judgeq``."""

    MASTER = "judgeq"

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        (workdir / "master").mkdir()
        (workdir / "replica").mkdir()
        self.master = RedisServer(workdir / "master")
        self.replica = RedisServer(workdir / "replica", replicaof=self.master.port)
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ";".join(f"sentinel://127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"{hosts}/0?master_name={self.MASTER}"

    def start(self) -> None:
        self.master.start()
        self.replica.start()
        for port in self.sentinel_ports:
            conf = self.dir / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
                f"sentinel monitor {self.MASTER} 127.0.0.1 {self.master.port} 2\n"
                f"sentinel down-after-milliseconds {self.MASTER} 3000\n"
                f"sentinel failover-timeout {self.MASTER} 5000\n"
            )
            log = (self.dir / f"sentinel-{port}.log").open("ab")
            self.procs.append(
                subprocess.Popen(
                    ["redis-server", str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
                )
            )
        wait_for(self._ready, 30, "the Sentinels to see the master and its replica")

    def sentinel(self, port: int | None = None) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port or self.sentinel_ports[0], decode_responses=True)

    def _ready(self) -> bool:
        try:
            for port in self.sentinel_ports:
                info = self.sentinel(port).sentinel_master(self.MASTER)
                if info.get("num-slaves", 0) < 1 or info.get("num-other-sentinels", 0) < 2:
                    return False
            return True
        except redis.RedisError:
            return False

    def master_port(self) -> int:
        return int(self.sentinel().sentinel_get_master_addr_by_name(self.MASTER)[1])

    def lose_master(self) -> None:
        """Whichever server is the master now goes down for good: the Sentinels agree it is down
        (after 3 s) and promote the other. (Not SENTINEL FAILOVER: with the old master still up,
        clients connected to it would write there until it is reconfigured, and those writes
        would be lost.) A loaded machine may have made the Sentinels fail over once already:
        the server stopped is the master they name, not the one started as master."""
        old = self.master_port()
        (self.master if self.master.port == old else self.replica).stop()
        wait_for(lambda: self.master_port() != old, 90, "the failover")

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=10)
        self.procs = []
        self.replica.stop()
        self.master.stop()


RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
"""Debian's rabbitmq-server, run directly (the /usr/sbin wrapper switches to the rabbitmq user)."""


class RabbitServer:
    """A private RabbitMQ node on free ports with its data in a temp dir (guest/guest on
    loopback), beside any system node; started directly, stopped with SIGTERM."""

    def __init__(self, workdir: Path) -> None:
        if not Path(RABBITMQ_SERVER).exists():
            raise RuntimeError("rabbitmq-server is not installed (.ci/run installs it with apt-get)")
        self.dir = workdir
        self.port = free_port()
        self.node = f"judgeq{self.port}@localhost"
        self.proc: subprocess.Popen[bytes] | None = None
        (workdir / "enabled_plugins").write_text("[].\n")
        (workdir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = {self.port}\nloopback_users = none\n"
        )

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def env(self) -> dict[str, str]:
        d = str(self.dir)
        return {
            **os.environ,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_BASE": d,
            "RABBITMQ_MNESIA_BASE": f"{d}/mnesia",
            "RABBITMQ_LOG_BASE": f"{d}/log",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{d}/enabled_plugins",
            "RABBITMQ_CONFIG_FILE": f"{d}/rabbitmq",
            "RABBITMQ_PID_FILE": f"{d}/pid",
        }

    def start(self, timeout: float = 120) -> None:
        log = (self.dir / "server.out").open("ab")
        self.proc = subprocess.Popen(  # its own process group: the sh wrapper, the Erlang VM, epmd
            [RABBITMQ_SERVER], env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"rabbitmq-server did not start:\n{(self.dir / 'server.out').read_text()[-3000:]}"
                    ) from None
                time.sleep(0.2)
        self.wait_ready(deadline)

    def wait_ready(self, deadline: float) -> None:
        import kombu

        while True:
            try:
                with kombu.Connection(self.url, connect_timeout=2) as conn:
                    conn.connect()
                    return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM (a clean stop: durable queues and their messages are kept for a restart),
        then SIGKILL of the whole process group if it hangs (the wrapper's Erlang VM too)."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            # the VM may outlive the wrapper a moment: wait until its port is free again
            wait_for(lambda: not _listening(self.port), 60, "the RabbitMQ node to stop")
            self.proc = None

    def ctl(self, *args: str) -> str:
        """``rabbitmqctl`` against this node; its output."""
        out = subprocess.run(
            ["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", self.node, "-q", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    def reset(self) -> None:
        """Delete judgeq's queue (messages of earlier tests) between tests."""
        import kombu

        with kombu.Connection(self.url) as conn:
            channel = conn.channel()
            for queue in ("judgeq",):
                try:
                    channel.queue_delete(queue)
                except Exception:
                    channel = conn.channel()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def listen_addresses(port: int) -> set[str]:
    """The local addresses a TCP socket listens on at ``port`` on this machine (Linux's
    /proc/net/tcp and tcp6): ``{"127.0.0.1"}`` for loopback only, ``"0.0.0.0"`` or ``"::"`` for
    every interface."""
    import ipaddress

    found: set[str] = set()
    for name, size in (("tcp", 4), ("tcp6", 16)):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr_hex)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, size, 4))
            found.add(str(ipaddress.ip_address(raw)))
    return found


def steal_message(
    broker_url: str, redis_client: redis.Redis, queue: str = "judgeq.anthropic"
) -> dict[str, Any]:
    """Take one message off the queue for good (lost in transit): its headers and body (by
    default off the queue of the runs :data:`SUBMIT` makes, routed to the Anthropic workers)."""
    if broker_url.startswith("redis"):
        return json.loads(redis_client.lpop(queue))  # type: ignore[arg-type]
    import kombu

    with kombu.Connection(broker_url) as conn:
        deadline = time.monotonic() + 30
        while True:
            message = conn.default_channel.basic_get(queue, no_ack=True)
            if message is not None:
                return {"headers": message.headers, "body": message.body}
            if time.monotonic() > deadline:
                raise TimeoutError(f"no message in {queue}")
            time.sleep(0.05)


def worker_env(redis_url: str, api_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEQ_", "ANTHROPIC_"))}
    env.update(
        JUDGEQ_REDIS_URL=redis_url,
        ANTHROPIC_API_KEY=API_KEY,
        ANTHROPIC_BASE_URL=api_url,
        JUDGEQ_JUDGE_TIMEOUT="1.0",
        JUDGEQ_JUDGE_DEADLINE="5",
        JUDGEQ_VISIBILITY_TIMEOUT="8",
        JUDGEQ_TASK_RETRY_DELAY="0.2",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class Worker:
    """A real ``judgeq worker`` process."""

    def __init__(
        self,
        env: dict[str, str],
        logdir: Path,
        name: str,
        *,
        concurrency: int = 8,
        pool: str = "threads",
        loglevel: str = "INFO",
        argv: list[str] | None = None,
    ) -> None:
        self.env, self.name = env, name
        self.log = logdir / f"{name}.log"
        self.args = [
            sys.executable,
            "-m",
            "judgeq",
            "worker",
            "-c",
            str(concurrency),
            "--pool",
            pool,
            "-n",
            f"{name}@%h",
            "-l",
            loglevel,
        ]
        if argv is not None:  # another command line, e.g. plain `celery -A judgeq.workers worker`
            self.args = [sys.executable, "-m", *argv]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_offset = 0
        """Size of the log when the current process started: what it wrote comes after it."""

    def start(self, wait: bool = True) -> Worker:
        self.fh = self.log.open("ab")
        self.log_offset = self.log.stat().st_size
        self.proc = subprocess.Popen(
            self.args, env=self.env, stdout=self.fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        if wait:
            self.wait_ready()
        return self

    def output(self) -> str:
        """What the current process wrote to the log (a restarted worker appends to it)."""
        with self.log.open("rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "judgeq worker ready" in self.output():
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"worker {self.name} not ready:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group (no warm shutdown, no acks)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.proc = None


def judgeq_cli(
    *args: str, env: dict[str, str], timeout: float = 180, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeq", *args],
        env=env,
        capture_output=True,
        text=stdin is None,
        timeout=timeout,
        input=stdin,
    )


def write_batch(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path


def response_rows(
    n: int, *, prefix: str = "j", directive: dict[int, str] | None = None
) -> list[dict[str, Any]]:
    """Jobs j00000…: even ones from sys-b, odd ones from sys-a; ``directive``: fake-judge faults."""
    return faults.response_rows(n, directive, prefix=prefix, width=5, models=("sys-b", "sys-a"))


def strip_volatile(report: dict[str, Any]) -> dict[str, Any]:
    """A report without timings, ids and paths, nor the count of judge calls (a legitimate retry,
    e.g. after a timeout on a slow machine, adds one): what must match between equivalent runs.
    The token counts stay: they come from each job's one answering reply, not from its attempts."""
    out = json.loads(json.dumps(report))
    for key in ("run_id", "started_at", "finished_at", "wall_s", "latency_ms", "batch"):
        out.pop(key, None)
    out.get("usage", {}).pop("judge_calls", None)
    out.get("distributions", {}).pop("latency_ms", None)
    return out


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds; TimeoutError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def wait_for_log(worker: Worker, text: str, timeout: float = 30, *, count: int = 1) -> None:
    """Wait until the worker's current process has logged ``text`` (``count`` times)."""
    wait_for(lambda: worker.output().count(text) >= count, timeout, f"{text!r} in {worker.log}")
