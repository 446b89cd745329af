"""Issue 22 with real parts: Debian's ``prometheus`` server scrapes two real workers
(JUDGEQ_METRICS_PORT) and ``judgeq exporter`` during real runs against the Anthropic stand-in
with faults; through Prometheus's HTTP API, every query of the provisioned dashboard and the
figure of every alert rule return data, the alerts of a paused run near its cost cap are
raised, and the workers' counts agree with the run's report. The rule and scrape files pass
``promtool``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from judgeq.testing.fake_anthropic import FakeMessagesAPI

from .harness import (
    SUBMIT,
    RedisServer,
    Worker,
    free_port,
    judgeq_cli,
    listen_addresses,
    response_rows,
    wait_for,
    write_batch,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def need(tool: str) -> str:
    """A real component: missing, the test fails (never skips): .ci/run installs it."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: apt-get install prometheus (.ci/run does)")
    return path


def test_the_rules_and_the_scrape_config_pass_promtool() -> None:
    promtool = need("promtool")
    rules = subprocess.run(
        [promtool, "check", "rules", str(DEPLOY / "prometheus" / "alerts.yml")],
        capture_output=True,
        text=True,
    )
    assert rules.returncode == 0 and "SUCCESS: 7 rules found" in rules.stdout, rules.stdout + rules.stderr
    config = subprocess.run(
        [promtool, "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
        capture_output=True,
        text=True,
    )
    assert config.returncode == 0, config.stdout + config.stderr


def dashboard_queries() -> list[tuple[str, str]]:
    board = json.loads((DEPLOY / "grafana" / "dashboards" / "judgeq.json").read_text())
    out = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            out.append((f"{panel['title']} / {target['refId']}", target["expr"]))
    return out


def test_the_dashboard_is_well_formed() -> None:
    board = json.loads((DEPLOY / "grafana" / "dashboards" / "judgeq.json").read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) and board["uid"] == "judgeq-run"
    assert all(p["datasource"]["uid"] == "judgeq-prometheus" for p in board["panels"] if p["type"] != "row")
    provisioned = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    assert provisioned["datasources"][0]["uid"] == "judgeq-prometheus"
    titles = " ".join(p["title"].lower() for p in board["panels"])
    for needed in ("throughput", "429", "budget", "cost", "nulls", "latency", "queue", "eta", "workers"):
        assert needed in titles, needed
    assert len(dashboard_queries()) >= 20


class Prometheus:
    def __init__(
        self, workdir: Path, targets: dict[str, list[str]], slow: dict[str, dict[str, str]] | None = None
    ) -> None:
        """``slow``: per job, a longer ``scrape_interval``/``scrape_timeout`` than the global 1 s
        (a 1 s interval caps the timeout at 1 s, which a loaded CI machine's exporter misses on
        every scrape: measured there at 1.0 s, ``up`` 0 throughout; deploy/ scrapes every 15 s)."""
        self.port = free_port()
        slow = slow or {}
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(DEPLOY / "prometheus" / "alerts.yml")],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": hosts}], **slow.get(job, {})}
                for job, hosts in targets.items()
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = (workdir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [need("prometheus"), f"--config.file={workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for(self.ready, 60, "prometheus ready")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]["result"]  # type: ignore[no-any-return]

    def value(self, expr: str) -> float | None:
        found = self.query(expr)
        return float(found[0]["value"][1]) if found else None

    def scraped(self, expr: str, timeout: float = 60) -> float | None:
        """``expr``'s value once a scrape has it: a scrape that times out on a loaded machine
        (1 s here) makes its target's series stale until the next one answers."""
        wait_for(lambda: self.value(expr) is not None, timeout, f"{expr} scraped")
        return self.value(expr)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def monitored(
    tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker]
) -> Iterator[tuple[Prometheus, dict[str, str]]]:
    ports = [free_port(), free_port(), free_port()]
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {"claude-test": {"input": 3.0, "output": 15.0}, "claude-test-b": {"input": 3.0, "output": 15.0}}
        )
    )
    run_env = {**env, "JUDGEQ_PRICES": str(prices)}
    start_worker("w1", env={"JUDGEQ_METRICS_PORT": str(ports[0])})
    start_worker("w2", env={"JUDGEQ_METRICS_PORT": str(ports[1])})
    exporter_log = (tmp_path / "exporter.log").open("wb")
    exporter = subprocess.Popen(
        [sys.executable, "-m", "judgeq", "exporter", "--port", str(ports[2]), "--grace", "600"],
        env=env, stdout=exporter_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    prom: Prometheus | None = None
    try:  # (a set-up that fails, e.g. without prometheus, leaves no exporter behind)
        prom = Prometheus(
            tmp_path,
            {
                "judgeq-workers": [f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"],
                "judgeq-exporter": [f"127.0.0.1:{ports[2]}"],
            },
            slow={"judgeq-exporter": {"scrape_interval": "5s", "scrape_timeout": "5s"}},
        )
        for port in ports:  # the workers' metrics and the exporter: loopback unless told
            wait_for(lambda port=port: bool(listen_addresses(port)), 60, f"a listener on {port}")
            assert listen_addresses(port) == {"127.0.0.1"}, port
        yield prom, run_env
    finally:
        if prom is not None:
            prom.stop()
        exporter.terminate()
        exporter.wait(timeout=15)


def test_prometheus_sees_every_dashboard_query_and_alert_during_real_runs(
    tmp_path: Path,
    monitored: tuple[Prometheus, dict[str, str]],
    fake_api: FakeMessagesAPI,
    redis_server: RedisServer,
) -> None:
    prom, env = monitored
    # run A: to the end, with faults: a 500 each time, garbage, two 429s answered on retry
    n = 40
    rows = response_rows(n, directive={3: "500", 7: "garbage", 11: "429*1", 13: "429*1", 17: "500"})
    a = judgeq_cli(
        "submit", str(write_batch(tmp_path / "a.jsonl", rows)), *SUBMIT, "--run-id", "a", "--rpm", "6000",
        "--wait", "--out", str(tmp_path / "out"), env=env,
    )  # fmt: skip
    assert a.returncode == 0, a.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "a" / "report.json").read_text())
    # run B: another model, a cost cap it reaches: paused, spend near the cap
    b = judgeq_cli(
        "submit", str(write_batch(tmp_path / "b.jsonl", response_rows(60))), "--rubric", "quality",
        "--judge", "anthropic:claude-test-b", "--run-id", "b", "--max-cost", "0.02", env=env,
    )  # fmt: skip
    assert b.returncode == 0, b.stderr[-3000:]
    r = redis_server.client()
    wait_for(lambda: r.hget("judgeq:run:{b}:state", "state") == "paused", 120, "run b paused by its cap")
    # run C: on a queue no worker consumes: no progress
    c = judgeq_cli(
        "submit", str(write_batch(tmp_path / "c.jsonl", response_rows(5))), *SUBMIT, "--run-id", "c",
        env={**env, "JUDGEQ_QUEUE": "nobody"},
    )  # fmt: skip
    assert c.returncode == 0, c.stderr[-3000:]

    judge_a = '{judge="anthropic:claude-test"}'
    wait_for(
        lambda: prom.value(f"sum(judgeq_jobs_stored_total{judge_a})") == n, 120, "the workers' counts scraped"
    )
    wait_for(lambda: prom.value('judgeq_run_paused{run="b"}') == 1, 90, "run b's pause scraped")
    wait_for(lambda: prom.value('judgeq_run_info{run="c"}') == 1, 90, "run c scraped")
    time.sleep(11)  # a few more scrapes: rates over the window have two samples or more

    # the workers' figures agree with run A's report
    calls = prom.value('sum(judgeq_judge_calls_total{model="claude-test"})')
    assert calls == report["usage"]["judge_calls"], (calls, report["usage"])
    nulls = {
        x["metric"]["reason"]: float(x["value"][1])
        for x in prom.query(
            'sum by (reason) (judgeq_jobs_stored_total{judge="anthropic:claude-test",status="null"})'
        )
    }
    assert nulls == report["counts"]["null_by_reason"] == {"api_error": 2, "parse_error": 1}
    assert prom.value('sum(judgeq_judge_calls_total{model="claude-test",outcome="rate_limited"})') == 2
    assert prom.scraped('judgeq_run_jobs_graded{run="a"}') == report["counts"]["graded"]
    assert prom.scraped('judgeq_run_jobs_done{run="a"}') == n
    assert (
        prom.value('sum(judgeq_judge_tokens_total{model="claude-test",kind="output"})')
        == report["usage"]["output_tokens"]
    )
    assert prom.value('count(up{job="judgeq-workers"} == 1)') == 2

    # every query of the dashboard returns data
    empty = []
    for where, expr in dashboard_queries():
        concrete = expr.replace("$__rate_interval", "1m").replace("$run", ".*")
        if not prom.query(concrete):
            empty.append(f"{where}: {concrete}")
    assert empty == [], "dashboard queries without data:\n" + "\n".join(empty)

    # every alert's figure returns data; a paused run near its cap raises its two alerts
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"][0]["rules"]
    figures = []
    for rule in rules:
        base = re.sub(r"\s*(>|<|==|>=|<=)\s*[0-9.]+\s*$", "", rule["expr"].strip())
        assert base != rule["expr"].strip(), f"{rule['alert']}: not '<figure> <comparison> <threshold>'"
        if not prom.query(base):
            figures.append(f"{rule['alert']}: {base}")
    assert figures == [], "alert figures without data:\n" + "\n".join(figures)
    wait_for(
        lambda: (
            {x["metric"]["alertname"] for x in prom.query('ALERTS{run="b"}')}
            >= {"JudgeqRunPaused", "JudgeqSpendNearCap"}
        ),
        60,
        "the paused run's alerts",
    )
    cost = prom.scraped('judgeq_run_cost_usd{run="b"}')
    assert cost is not None and cost > 0.8 * 0.02
    assert "sk-ant" not in json.dumps(prom.query('{__name__=~"judgeq_.+"}'))


def test_a_prefork_worker_serves_the_sum_of_its_children(
    tmp_path: Path, env: dict[str, str], start_worker: Callable[..., Worker], fake_api: FakeMessagesAPI
) -> None:
    """prometheus_client's multiprocess mode: the prefork children count in files, the parent
    serves their sum; judgeq worker makes the directory when PROMETHEUS_MULTIPROC_DIR is unset."""
    port = free_port()
    start_worker(
        "forked", pool="prefork", concurrency=16, env={"JUDGEQ_METRICS_PORT": str(port)}
    )  # 2 children
    n = 24
    rows = response_rows(n, directive={2: "500", 5: "garbage"})
    proc = judgeq_cli(
        "submit", str(write_batch(tmp_path / "f.jsonl", rows)), *SUBMIT, "--run-id", "forked", "--wait",
        "--out", str(tmp_path / "out"), env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "forked" / "report.json").read_text())

    def stored() -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            m = re.match(r'judgeq_jobs_stored_total\{.*reason="([^"]*)".*\} ([0-9.e+]+)$', line)
            if m:
                out[m.group(1) or "graded"] = out.get(m.group(1) or "graded", 0.0) + float(m.group(2))
        return out

    counts = stored()
    assert sum(counts.values()) == n, counts
    assert counts == {"graded": report["counts"]["graded"], **report["counts"]["null_by_reason"]}
