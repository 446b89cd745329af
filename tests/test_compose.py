"""docker-compose.yml, checked without a Docker engine: it parses, every judgeq/celery command
is real (run locally with --help), workers scale, env names match the settings object."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from judgeq.settings import Settings

ROOT = Path(__file__).parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
_DEFAULT = re.compile(r"\$\{([A-Z0-9_]+)(?::?-([^}]*)|:\?[^}]*)?\}")


def expand(value: str) -> str:
    """Compose interpolation with defaults (``${X:-d}`` -> d); required ones get a dummy."""
    return _DEFAULT.sub(lambda m: m.group(2) if m.group(2) is not None else "dummy", value)


def test_services_are_declared() -> None:
    assert set(SERVICES) == {
        "redis",
        "rabbitmq",
        "worker",
        "flower",
        "producer",
        "exporter",
        "prometheus",
        "grafana",
    }


def test_redis_is_durable_and_protected() -> None:
    redis = SERVICES["redis"]
    cmd = redis["command"]
    assert "--appendonly yes" in cmd and "--maxmemory-policy noeviction" in cmd
    assert "requirepass" in cmd and "$$REDIS_PASSWORD" in cmd
    assert "REDIS_PASSWORD" in redis["environment"]
    assert "healthcheck" in redis and "ping" in " ".join(redis["healthcheck"]["test"])
    assert any(v.endswith(":/data") for v in redis["volumes"])


def test_workers_scale() -> None:
    worker = SERVICES["worker"]
    assert "ports" not in worker and "container_name" not in worker
    assert worker["stop_signal"] == "SIGTERM" and "stop_grace_period" in worker
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
    check = " ".join(worker["healthcheck"]["test"])
    assert (
        "python" not in check
        and "celery" not in check
        and "judgeq" not in check.replace("judgeq-worker.alive", "")
    )
    assert worker["environment"]["JUDGEQ_HEALTH_FILE"] in check


def test_every_published_port_is_on_loopback_unless_told() -> None:
    # (issue 29: Flower was published on every interface while the rest defaulted to loopback)
    published = [(name, p) for name, svc in SERVICES.items() for p in svc.get("ports", [])]
    assert len(published) >= 5
    for name, port in published:
        assert re.fullmatch(r"\$\{[A-Z]+_BIND:-127\.0\.0\.1\}:.+:\d+", port), (name, port)
    # inside their containers they listen on the compose network (judgeq's default is loopback)
    assert all(
        SERVICES[s]["environment"]["JUDGEQ_LISTEN_ADDRESS"] == "0.0.0.0"
        for s in ("worker", "flower", "exporter")
    )
    assert "--address" not in SERVICES["flower"]["command"]


def test_flower_has_auth_and_port() -> None:
    flower = SERVICES["flower"]
    assert any(p.endswith(":5555") for p in flower["ports"])
    env = flower["environment"]
    assert ":?" in env["JUDGEQ_FLOWER_USER"] and ":?" in env["JUDGEQ_FLOWER_PASSWORD"]
    assert flower["depends_on"]["redis"]["condition"] == "service_healthy"


def test_rabbitmq_profile() -> None:
    rabbit = SERVICES["rabbitmq"]
    assert rabbit["profiles"] == ["rabbitmq"]
    assert ":?" in rabbit["environment"]["RABBITMQ_DEFAULT_PASS"], "no default password"
    assert any(v.endswith(":/var/lib/rabbitmq") for v in rabbit["volumes"]), "durable queues need a volume"
    assert "ping" in " ".join(rabbit["healthcheck"]["test"])
    assert all(p.startswith("${RABBITMQ_BIND:-127.0.0.1}") for p in rabbit["ports"]), "loopback by default"
    dep = SERVICES["worker"]["depends_on"]["rabbitmq"]
    assert dep["required"] is False and dep["condition"] == "service_healthy", (
        "Redis-only set-ups still start"
    )
    env = COMPOSE["x-judgeq-env"]
    assert env["JUDGEQ_BROKER_URL"] == "${JUDGEQ_BROKER_URL:-}", "empty: Redis stays the broker"
    header = (ROOT / "docker-compose.yml").read_text().split("name: judgeq")[0]
    assert "--profile rabbitmq up" in header and "amqp://judgeq:" in header and "@rabbitmq:5672//" in header


def test_an_empty_broker_url_means_redis() -> None:
    settings = Settings(redis_url="redis://r:6379/0", broker_url="")
    assert settings.effective_broker_url == "redis://r:6379/0"


def test_producer_profile_and_mounts() -> None:
    producer = SERVICES["producer"]
    assert producer["profiles"] == ["producer"]
    assert "./results:/app/results" in producer["volumes"]
    assert any(v.startswith("./data:/data") for v in producer["volumes"])
    assert COMPOSE["x-judgeq-env"]["JUDGEQ_RESULTS_DIR"] == "/app/results"


def test_workers_archive_into_the_shared_results_folder() -> None:
    # JUDGEQ_ARCHIVE reaches the workers, and where they archive is the folder the producer
    # reads (not the container's own disk, gone with it); they see the batches under the same
    # path the producer submitted them from, for the archived report's texts
    worker = SERVICES["worker"]
    assert expand(worker["environment"]["JUDGEQ_ARCHIVE"]) == "false"
    assert worker["environment"]["JUDGEQ_RESULTS_DIR"] == "/app/results"
    assert "./results:/app/results" in worker["volumes"] and "./data:/data:ro" in worker["volumes"]


@pytest.mark.parametrize("name", ["worker", "flower", "producer"])
def test_commands_are_real(name: str) -> None:
    cmd = [expand(part) for part in SERVICES[name]["command"]]
    assert cmd[0] in ("judgeq", "celery")
    args = [a for a in cmd[1:] if a != "--help"]
    # the subcommand with its options, asked for help: parses the options, starts nothing
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "JUDGEQ_FLOWER_NO_AUTH": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout


def test_env_names_match_settings() -> None:
    fields = {f"JUDGEQ_{name.upper()}" for name in Settings.model_fields}
    names: set[str] = set()
    for svc in SERVICES.values():
        names |= {k for k in (svc.get("environment") or {}) if k.startswith("JUDGEQ_")}
    names |= set(re.findall(r"\$\{(JUDGEQ_[A-Z_]+)", (ROOT / "docker-compose.yml").read_text()))
    unknown = {n for n in names if n not in fields and not n.startswith("JUDGEQ_WEIGHT_")}
    assert not unknown, unknown


def test_readme_scaling_matches_compose() -> None:
    readme = (ROOT / "README.md").read_text() + (ROOT / "docs" / "scaling.md").read_text()
    assert "docker compose up -d --scale worker=" in readme
    assert "docker compose run --rm producer judgeq submit /data/" in readme
    assert "5555" in readme and "./results" in readme


def test_dockerfile_installs_the_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for path in ("judgeq", "workers", "producer", "rubrics"):
        assert f"COPY {path} ./{path}" in dockerfile
    assert "pip install ." in dockerfile and "USER judgeq" in dockerfile


def test_monitoring_profile_scrapes_workers_exporter_and_flower() -> None:
    """Issue 22: Prometheus, Grafana and the exporter under the `monitoring` profile; the
    scrape config reaches each service on the port it listens on; the files it mounts exist."""
    for name in ("exporter", "prometheus", "grafana"):
        assert SERVICES[name]["profiles"] == ["monitoring"], name
    assert SERVICES["worker"]["environment"]["JUDGEQ_METRICS_PORT"] == "9100"
    assert "--port" in SERVICES["exporter"]["command"] and "9808" in SERVICES["exporter"]["command"]
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    assert jobs["judgeq-workers"]["dns_sd_configs"][0] == {
        "names": ["worker"],
        "type": "A",
        "port": 9100,
        "refresh_interval": "15s",
    }
    assert jobs["judgeq-exporter"]["static_configs"][0]["targets"] == ["exporter:9808"]
    assert jobs["flower"]["static_configs"][0]["targets"] == ["flower:5555"]
    assert jobs["flower"]["basic_auth"]["password_file"] == "/tmp/flower_password"
    command = " ".join(SERVICES["prometheus"]["command"])
    assert "/tmp/flower_password" in command and "__FLOWER_USER__" in command
    assert "JUDGEQ_FLOWER_PASSWORD" not in (ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text()
    for volume in SERVICES["prometheus"]["volumes"] + SERVICES["grafana"]["volumes"]:
        source = volume.split(":")[0]
        if source.startswith("./"):
            assert (ROOT / source).exists(), volume
    assert "GF_SECURITY_ADMIN_PASSWORD" in SERVICES["grafana"]["environment"]
    assert all(
        p.startswith("${") and "127.0.0.1" in p
        for p in SERVICES["grafana"]["ports"] + SERVICES["prometheus"]["ports"]
    )
