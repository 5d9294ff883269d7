"""The images' Dockerfiles, checked where no Docker engine runs: what they build on and copy is what the
project claims and builds, and compose and Kubernetes name the images they make."""

from __future__ import annotations

import json
import re
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.conftest import PROJECT

from .conftest import Dist

pytestmark = [pytest.mark.package, pytest.mark.integration]

DOCKER = PROJECT / "infra" / "docker"
AIRFLOW_IMAGE, GPU_IMAGE = DOCKER / "airflow.Dockerfile", DOCKER / "worker-gpu.Dockerfile"


def build_args(path: Path) -> dict[str, str]:
    """Each ``ARG NAME=DEFAULT`` of a Dockerfile, its default expanded with the ARGs before it."""
    args: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = re.fullmatch(r"ARG (\w+)=(\S+)", line.strip())
        if m and m[1] not in args:
            args[m[1]] = expand(m[2], args)
    return args


def expand(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], text)


def instruction(path: Path, name: str) -> list[str]:
    """Each instruction ``name`` of a Dockerfile, continuation lines joined, the ARGs expanded."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    return [expand(line.split(None, 1)[1], build_args(path)) for line in text.splitlines() if line.startswith(name + " ")]


def wheel_requirement(dist: Dist, name: str) -> Requirement:
    with zipfile.ZipFile(dist.wheel) as whl:
        meta = whl.read(next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    reqs = [Requirement(line.split(":", 1)[1]) for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    return next(r for r in reqs if r.name == name and r.marker is None)


def locked(name: str) -> str:
    return next(line.split("==")[1] for line in (PROJECT / "requirements.lock").read_text().splitlines()
                if line.startswith(f"{name}=="))


def test_the_airflow_image_builds_on_an_official_airflow_the_ranges_claim_and_copies_the_wheel_the_build_makes(dist: Dist) -> None:
    args = build_args(AIRFLOW_IMAGE)
    (base,) = instruction(AIRFLOW_IMAGE, "FROM")
    assert base == f"apache/airflow:{args['AIRFLOW_VERSION']}-python{args['PYTHON_VERSION']}"
    assert args["AIRFLOW_VERSION"] in wheel_requirement(dist, "apache-airflow").specifier, args["AIRFLOW_VERSION"]
    assert args["AIRFLOW_VERSION"] == locked("apache-airflow")  # it installs with the lock as constraints
    requires_python = SpecifierSet(tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["requires-python"])
    assert f"{args['PYTHON_VERSION']}.0" in requires_python
    assert args["MODEL_RELEASE_WHEEL"] == dist.wheel.name
    (copy,) = instruction(AIRFLOW_IMAGE, "COPY")
    assert f"dist/{dist.wheel.name}" in copy.split() and "requirements.lock" in copy.split()
    extras = set(args["MODEL_RELEASE_EXTRAS"].split(","))
    assert extras and not extras & {"local", "test"}, "the image holds no mock service and no test tool"
    ignore = (PROJECT / ".dockerignore").read_text().split()
    assert ignore[ignore.index("*") + 1:] == ["!dist/*.whl", "!requirements.lock"]  # what COPY takes gets through


def test_the_gpu_worker_builds_on_the_airflow_image_with_the_canarys_tensorrt(dist: Dist) -> None:
    args = build_args(GPU_IMAGE)
    assert args["MODEL_RELEASE_WHEEL"] == dist.wheel.name
    assert args["AIRFLOW_VERSION"] == build_args(AIRFLOW_IMAGE)["AIRFLOW_VERSION"]
    compose = yaml.safe_load((PROJECT / "infra" / "compose" / "docker-compose.yaml").read_text())
    airflow_image = compose["x-airflow"]["image"]
    assert airflow_image.endswith(f":-{args['BASE_IMAGE']}}}"), (airflow_image, args["BASE_IMAGE"])
    canary = json.loads(compose["x-airflow"]["environment"]["AIRFLOW_CONN_TRITON_CANARY"])
    assert canary["extra"]["tensorrt"] == args["TENSORRT_VERSION"], "plans built with another TensorRT are refused"
    (run,) = instruction(GPU_IMAGE, "RUN")
    assert f"/opt/model-release/{dist.wheel.name}[torch,boost]" in run and f"tensorrt-cu12=={args['TENSORRT_VERSION']}" in run


def test_compose_and_kubernetes_name_the_images_the_dockerfiles_make() -> None:
    version = build_args(AIRFLOW_IMAGE)["AIRFLOW_VERSION"]
    tag = f"{version}-model-release"
    compose = yaml.safe_load((PROJECT / "infra" / "compose" / "docker-compose.yaml").read_text())
    assert compose["x-airflow"]["image"] == f"${{MODEL_RELEASE_IMAGE:-model-release/airflow:{tag}}}"
    assert compose["services"]["airflow-worker-gpu"]["image"] == f"${{MODEL_RELEASE_GPU_IMAGE:-model-release/airflow-gpu:{tag}}}"
    values = yaml.safe_load((PROJECT / "infra" / "k8s" / "values-airflow.yaml").read_text())
    assert (values["defaultAirflowRepository"], values["defaultAirflowTag"], values["airflowVersion"]) == (
        "model-release/airflow", tag, version)
    worker = yaml.safe_load((PROJECT / "infra" / "k8s" / "gpu-worker.yaml").read_text())
    assert worker["spec"]["template"]["spec"]["containers"][0]["image"] == f"model-release/airflow-gpu:{tag}"
    for dockerfile, image in ((AIRFLOW_IMAGE, "model-release/airflow"), (GPU_IMAGE, "model-release/airflow-gpu")):
        assert f"-f infra/docker/{dockerfile.name} -t {image}:{tag} ." in dockerfile.read_text()
