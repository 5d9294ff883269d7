"""infra/compose and infra/k8s, validated against the real schemas, plus what the schemas cannot say.

Where the schemas come from (no copy lives in this repository):

- the compose specification's JSON schema: vendored by the ``check-jsonschema`` package
  (``check_jsonschema/builtin_schemas/vendor/compose-spec.json``, from compose-spec/compose-spec);
- the Kubernetes OpenAPI schemas, as JSON schemas per kind and version: the ``kubernetes-validate``
  package (its ``kubernetes_validate/kubernetes-json-schema``, generated from Kubernetes' OpenAPI
  document), Kubernetes 1.31 here, strict (unknown fields refused).

Both are test dependencies (pyproject's ``test`` extra). The official Airflow chart's
``values.schema.json`` is not in any package registry reachable here (the chart lives in the
apache/airflow repository, 650 KB): the values are checked against the Kubernetes schemas for the
Kubernetes objects they embed, and against the chart's documented keys in use below.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import PROJECT

INFRA = PROJECT / "infra"
K8S_VERSION = "1.31.0"
#: how a secret may appear in these files: a reference (Secret name, /run/secrets, *_CMD), never a value
SECRETISH = re.compile(r"(password|secret|token|fernet|key)[\"']?\s*[:=]\s*[\"']?(?!\s*$)([A-Za-z0-9+/=_\-]{12,})", re.I)


def _compose_schema() -> dict:
    path = resources.files("check_jsonschema") / "builtin_schemas" / "vendor" / "compose-spec.json"
    return json.loads(path.read_text())


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    compose = _documents(INFRA / "compose" / "docker-compose.yaml")[0]
    jsonschema.validate(compose, _compose_schema())  # raises with the path of the first violation


def test_the_compose_schema_check_can_fail() -> None:
    compose = _documents(INFRA / "compose" / "docker-compose.yaml")[0]
    compose["services"]["redis"]["restart"] = ["always"]  # a list where the spec wants a string
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(compose, _compose_schema())


def test_compose_has_the_production_shape() -> None:
    services = _documents(INFRA / "compose" / "docker-compose.yaml")[0]["services"]
    for name in ("postgres", "redis", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor",
                 "airflow-triggerer", "airflow-worker", "airflow-worker-gpu", "mlflow", "triton-canary"):
        assert name in services, name
    gpu = services["airflow-worker-gpu"]
    assert "--queues" in gpu["command"] and gpu["command"][gpu["command"].index("--queues") + 1] == "gpu"
    assert gpu["runtime"] == "nvidia" and gpu["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert "--model-control-mode=explicit" in services["triton-canary"]["command"]
    assert any(a.startswith("--model-repository=s3://") for a in services["triton-canary"]["command"])
    assert "s3://" in " ".join(services["mlflow"]["command"]) and "mlflow_db_url" in services["mlflow"]["secrets"]


def _k8s_validate(doc: dict) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("name", ["gpu-worker.yaml", "mlflow.yaml", "triton-canary.yaml", "triton-serving.yaml"])
def test_kubernetes_manifests_are_valid_against_the_openapi_schemas(name: str) -> None:
    docs = _documents(INFRA / "k8s" / name)
    assert docs
    for doc in docs:
        _k8s_validate(doc)


def test_the_kubernetes_check_can_fail() -> None:
    import kubernetes_validate

    doc = _documents(INFRA / "k8s" / "gpu-worker.yaml")[0]
    doc["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        _k8s_validate(doc)
    doc = _documents(INFRA / "k8s" / "gpu-worker.yaml")[0]
    doc["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1  # no such field (strict)
    with pytest.raises(kubernetes_validate.ValidationError):
        _k8s_validate(doc)


def test_gpu_pods_ask_for_an_nvidia_gpu() -> None:
    for name in ("gpu-worker.yaml", "triton-canary.yaml"):
        pod = _documents(INFRA / "k8s" / name)[0]["spec"]["template"]["spec"]
        limits = pod["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "1", name
    worker = _documents(INFRA / "k8s" / "gpu-worker.yaml")[0]["spec"]["template"]["spec"]["containers"][0]
    assert worker["args"][worker["args"].index("--queues") + 1] == "gpu"


def test_helm_values_embed_valid_kubernetes_objects_and_name_secrets_only() -> None:
    values = _documents(INFRA / "k8s" / "values-airflow.yaml")[0]
    assert values["executor"] == "CeleryExecutor" and values["airflowVersion"] == "3.3.2"
    # the chart's documented keys for Secrets by name
    for key in ("fernetKeySecretName", "jwtSecretName"):
        assert isinstance(values[key], str)
    assert set(values["data"]) == {"metadataSecretName", "brokerUrlSecretName"}
    # the Kubernetes objects the chart passes through: validated as such
    schema_of = _k8s_definition
    jsonschema.validate(values["workers"]["resources"], schema_of("io.k8s.api.core.v1.ResourceRequirements"))
    for env in values["env"]:
        jsonschema.validate(env, schema_of("io.k8s.api.core.v1.EnvVar"))


def _k8s_definition(name: str) -> dict:
    """A schema that is one definition of the Kubernetes OpenAPI schemas (as kubernetes-validate ships
    them, strict: unknown fields refused), with every definition it refers to, directly or through
    others. Only those: ``jsonschema.validate`` checks the whole schema against the metaschema on each
    call, which took seconds with all of Kubernetes' definitions in it."""
    defs = _k8s_definitions()
    needed: dict[str, dict] = {}
    todo = [name]
    while todo:
        current = todo.pop()
        if current not in needed:
            needed[current] = defs[current]
            todo += _REF.findall(json.dumps(defs[current]))
    return json.loads(json.dumps({"$ref": f"#/$defs/{name}", "$defs": needed}))


_REF = re.compile(r'"#/\$defs/([^"]+)"')


@functools.cache
def _k8s_definitions() -> dict[str, dict]:
    """Every definition of kubernetes-validate's strict schemas, references made local (read once)."""
    import kubernetes_validate

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{K8S_VERSION}-local-strict"
    text = (base / "_definitions.json").read_text().replace('"/api/_definitions.json#/$defs/', '"#/$defs/')
    return json.loads(text)["$defs"]


@pytest.mark.parametrize("path", sorted((INFRA / "compose").glob("*.yaml")) + sorted((INFRA / "k8s").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_no_secret_value_is_written_in_the_infra_files(path: Path) -> None:
    references = re.compile(r"(SecretName|secretKeyRef|secretName|secretKey|/run/secrets|_CMD|_FILE|environment:|secrets:)")
    found = [line.strip() for line in path.read_text().splitlines()
             if SECRETISH.search(line) and not references.search(line)]
    assert found == [], f"{path.name} holds what looks like a secret value: {found}"


def test_the_secret_check_can_fail() -> None:
    assert SECRETISH.search('    AIRFLOW__CORE__FERNET_KEY: "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA="')


def test_the_helm_values_check_can_fail() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"requests": {"cpu": "2"}, "limit": {"memory": "1Gi"}},
                            _k8s_definition("io.k8s.api.core.v1.ResourceRequirements"))


def test_each_serving_triton_has_its_own_volume_and_an_agent_and_no_worker_mounts_one() -> None:
    services = _documents(INFRA / "compose" / "docker-compose.yaml")[0]["services"]
    for name in ("airflow-worker", "airflow-worker-gpu"):
        assert not any("serving" in str(v) for v in services[name].get("volumes", [])), name
    for i in (1, 2):
        triton, agent = services[f"triton-serve-{i}"], services[f"agent-serve-{i}"]
        assert triton["volumes"] == [f"serving-{i}:/models"] and f"serving-{i}:/models" in agent["volumes"]
        assert agent["entrypoint"] == ["model-release", "serve-agent"]
        args = agent["command"]
        assert args[args.index("--triton-grpc") + 1] == f"triton-serve-{i}:8001" and "8090/ready" in str(agent["healthcheck"])
    env = services["airflow-worker"]["environment"]
    assert not any(k.startswith(("AIRFLOW_CONN_TRITON_SERVE", "AIRFLOW_VAR_MODEL_RELEASE_FLEET")) for k in env)

    docs = _documents(INFRA / "k8s" / "triton-serving.yaml")
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"]  # no shared (ReadWriteMany) volume
    stateful = next(d for d in docs if d["kind"] == "StatefulSet")
    [claim] = stateful["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    containers = {c["name"]: c for c in stateful["spec"]["template"]["spec"]["containers"]}
    assert containers["agent"]["readinessProbe"]["httpGet"]["path"] == "/ready"  # the pod's readiness: its agent's
    assert containers["triton"]["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert "readinessProbe" not in containers["triton"]
    assert containers["agent"]["command"] == ["model-release", "serve-agent"]
    workers = _documents(INFRA / "k8s" / "values-airflow.yaml")[0]["workers"]
    assert "extraVolumes" not in workers and "extraVolumeMounts" not in workers
