"""Issue 22.4: the Kubernetes manifests of deploy/kubernetes, validated offline (no cluster): the
core kinds against Kubernetes' own OpenAPI schemas (the kubernetes-validate package, strict: an
unknown field fails), KEDA's kinds against a schema of the fields KEDA's ScaledObject and
TriggerAuthentication documents (keda.sh/docs, v2), and the references between the files."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from judgeq.pipeline.messages import worker_queues
from judgeq.settings import Settings

ROOT = Path(__file__).parent.parent
K8S = ROOT / "deploy" / "kubernetes"
VERSION = "1.31.0"

DOCS: list[tuple[str, dict[str, Any]]] = [
    (path.name, doc)
    for path in sorted(K8S.glob("*.yaml"))
    for doc in yaml.safe_load_all(path.read_text())
    if doc
]
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication"}

_STR = {"type": "string"}
_INT_STRING = {"type": "string", "pattern": "^[0-9]+$"}
_NAME = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": _NAME,
        "namespace": _NAME,
        "labels": {"type": "object"},
        "annotations": {"type": "object"},
    },
    "additionalProperties": False,
}
_TRIGGERS = {
    "redis": {
        "type": "object",
        "required": ["listName", "listLength"],
        "properties": {
            "address": _STR,
            "addressFromEnv": _STR,
            "host": _STR,
            "hostFromEnv": _STR,
            "port": _STR,
            "portFromEnv": _STR,
            "usernameFromEnv": _STR,
            "passwordFromEnv": _STR,
            "listName": _STR,
            "listLength": _INT_STRING,
            "activationListLength": _INT_STRING,
            "enableTLS": _STR,
            "unsafeSsl": _STR,
            "databaseIndex": _INT_STRING,
        },
        "additionalProperties": False,
        "anyOf": [
            {"required": ["address"]},
            {"required": ["addressFromEnv"]},
            {"required": ["host", "port"]},
            {"required": ["hostFromEnv", "portFromEnv"]},
        ],
    },
    "rabbitmq": {
        "type": "object",
        "required": ["queueName", "mode", "value"],
        "properties": {
            "host": _STR,
            "hostFromEnv": _STR,
            "protocol": {"enum": ["auto", "amqp", "http"]},
            "queueName": _STR,
            "mode": {"enum": ["QueueLength", "MessageRate"]},
            "value": _INT_STRING,
            "activationValue": _INT_STRING,
            "vhostName": _STR,
            "useRegex": _STR,
        },
        "additionalProperties": False,
    },
}
KEDA_SCHEMA = {
    "ScaledObject": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "keda.sh/v1alpha1"},
            "kind": {"const": "ScaledObject"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "required": ["scaleTargetRef", "triggers"],
                "properties": {
                    "scaleTargetRef": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": _NAME,
                            "kind": _STR,
                            "apiVersion": _STR,
                            "envSourceContainerName": _STR,
                        },
                        "additionalProperties": False,
                    },
                    "minReplicaCount": {"type": "integer", "minimum": 0},
                    "maxReplicaCount": {"type": "integer", "minimum": 1},
                    "idleReplicaCount": {"type": "integer", "minimum": 0},
                    "pollingInterval": {"type": "integer", "minimum": 1},
                    "cooldownPeriod": {"type": "integer", "minimum": 0},
                    "triggers": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["type", "metadata"],
                            "properties": {
                                "type": {"enum": sorted(_TRIGGERS)},
                                "name": _STR,
                                "metadata": {"type": "object"},
                                "authenticationRef": {
                                    "type": "object",
                                    "required": ["name"],
                                    "properties": {
                                        "name": _NAME,
                                        "kind": {
                                            "enum": ["TriggerAuthentication", "ClusterTriggerAuthentication"]
                                        },
                                    },
                                    "additionalProperties": False,
                                },
                            },
                            "additionalProperties": False,
                            "allOf": [
                                {
                                    "if": {"properties": {"type": {"const": kind}}},
                                    "then": {"properties": {"metadata": schema}},
                                }
                                for kind, schema in _TRIGGERS.items()
                            ],
                        },
                    },
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    },
    "TriggerAuthentication": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "keda.sh/v1alpha1"},
            "kind": {"const": "TriggerAuthentication"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "properties": {
                    "secretTargetRef": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["parameter", "name", "key"],
                            "properties": {"parameter": _STR, "name": _NAME, "key": _STR},
                            "additionalProperties": False,
                        },
                    },
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    },
}


def of_kind(kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(f, d) for f, d in DOCS if d["kind"] == kind]


def deployment(name: str) -> dict[str, Any]:
    (found,) = [d for _, d in of_kind("Deployment") if d["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize(
    ("where", "doc"), [d for d in DOCS if d[1]["kind"] not in KEDA_KINDS | {"Kustomization"}]
)
def test_core_kinds_are_valid_kubernetes(where: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, VERSION, strict=True)


@pytest.mark.parametrize(("where", "doc"), [d for d in DOCS if d[1]["kind"] in KEDA_KINDS])
def test_keda_kinds_match_kedas_schema(where: str, doc: dict[str, Any]) -> None:
    jsonschema.validate(doc, KEDA_SCHEMA[doc["kind"]])


def test_the_schema_check_would_catch_a_mistake() -> None:
    (_, scaled) = of_kind("ScaledObject")[0]
    wrong = yaml.safe_load(yaml.safe_dump(scaled))
    wrong["spec"]["triggers"][0]["metadata"]["listLenght"] = "8"  # a typo KEDA would ignore
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, KEDA_SCHEMA["ScaledObject"])
    bad = yaml.safe_load(yaml.safe_dump(deployment("judgeq-worker")))
    bad["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)


def test_kustomization_lists_files_that_exist() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert all((K8S / name).exists() for name in kustomization["resources"])
    assert (
        "keda-redis.yaml" in kustomization["resources"]
        and "producer-job.yaml" not in kustomization["resources"]
    )
    # every file its comments name exists too (issue 29: it named a scaledobject.yaml)
    for path in sorted(K8S.glob("*.yaml")):
        for named in re.findall(r"\b[\w-]+\.yaml\b", path.read_text()):
            assert (K8S / named).exists(), (path.name, named)


def test_keda_scales_the_worker_deployment_on_the_judgeq_queue() -> None:
    config = next(d for _, d in of_kind("ConfigMap") if d["metadata"]["name"] == "judgeq-config")["data"]
    worker = deployment("judgeq-worker")
    for where, scaled in of_kind("ScaledObject"):
        assert scaled["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"], where
        queues = [
            t["metadata"].get("listName") or t["metadata"].get("queueName")
            for t in scaled["spec"]["triggers"]
        ]
        # the base queue and the routed queue of every set of the providers the workers have keys for
        keys = {e["name"] for e in worker["spec"]["template"]["spec"]["containers"][0]["env"]}
        providers = [
            p for p, k in (("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")) if k in keys
        ]
        assert queues == worker_queues(config["JUDGEQ_QUEUE"], providers), where
        for trigger in scaled["spec"]["triggers"]:
            auth = trigger["authenticationRef"]["name"]
            assert any(d["metadata"]["name"] == auth for _, d in of_kind("TriggerAuthentication")), where
    redis = next(d for f, d in of_kind("ScaledObject") if f == "keda-redis.yaml")["spec"]["triggers"][0][
        "metadata"
    ]
    assert redis["addressFromEnv"] in config  # KEDA reads it from the target's environment
    # the documented bound: 4,000 RPM, 16 calls at once, 4 s a call
    rpm, calls, seconds = 4000, int(config["JUDGEQ_CONCURRENCY"]), 4.0
    bound = math.ceil(rpm / (60 * calls / seconds))
    assert all(d["spec"]["maxReplicaCount"] == bound for _, d in of_kind("ScaledObject"))


def test_workers_are_alive_by_their_health_file_and_scraped_on_the_metrics_port() -> None:
    config = next(d for _, d in of_kind("ConfigMap"))["data"]
    pod = deployment("judgeq-worker")["spec"]["template"]
    container = pod["spec"]["containers"][0]
    probe = " ".join(container["livenessProbe"]["exec"]["command"])
    assert config["JUDGEQ_HEALTH_FILE"] in probe and "python" not in probe and "-mmin -1" in probe
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == config["JUDGEQ_METRICS_PORT"]
    assert {p["containerPort"] for p in container["ports"]} == {int(config["JUDGEQ_METRICS_PORT"])}
    assert pod["spec"]["terminationGracePeriodSeconds"] > int(config["JUDGEQ_JUDGE_DEADLINE"])


def test_secrets_only_by_reference_and_settings_names_are_real() -> None:
    known = {f"JUDGEQ_{name.upper()}" for name in Settings.model_fields}
    text = "\n".join(p.read_text() for p in K8S.glob("*.yaml"))
    assert not re.search(r"sk-(ant|proj)-[A-Za-z0-9]", text.split("kubectl")[0])
    for where, doc in DOCS:
        for container in _containers(doc):
            for var in container.get("env", []):
                secret = re.search(r"KEY|PASSWORD|REDIS_URL|BROKER_URL|USER", var["name"])
                assert not secret or "valueFrom" in var, f"{where}: {var['name']} given as a literal"
                assert not var["name"].startswith("JUDGEQ_") or var["name"] in known, var["name"]
    config = next(d for _, d in of_kind("ConfigMap"))["data"]
    assert all(name in known for name in config if name.startswith("JUDGEQ_"))


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    return list(pod.get("containers", []))


@pytest.mark.parametrize("command", sorted({tuple(c["command"]) for _, d in DOCS for c in _containers(d)}))
def test_every_command_is_real(command: tuple[str, ...]) -> None:
    assert command[0] == "judgeq"
    words = [w for w in command[1:] if not w.startswith("-") and not w.startswith("/")][:1]
    proc = subprocess.run(
        [sys.executable, "-m", "judgeq", *words, "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    for flag in (w for w in command if w.startswith("--")):
        assert flag in proc.stdout, f"{' '.join(command)}: {flag} is not an option"
