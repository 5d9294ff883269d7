"""One embedded stack (MLflow on SQLite, the moto S3 server, an Airflow SQLite DB) for the end-to-end tests."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from model_release.local.stack import EmbeddedStack

from ..not_about_latency import LOAD

SPEC = Path(__file__).resolve().parents[2] / "releases" / "iris.yaml"

#: Canary settings for the end-to-end tests that are about something other than latency: the load
#: phase of tests/not_about_latency.py (brief, with ratio limits no noise can trip; why, there), no
#: tuning, and one request in flight (concurrency 1, iris.yaml keeps 4): the phase is closed-loop for a
#: fixed time, so with 4 in flight it takes both cores of a 2-core machine, CPU the other test workers
#: wait for; one in flight measured about 0.8 s of CPU less a passing release (of about 5), the same
#: gates decided.
NOT_ABOUT_LATENCY: dict[str, Any] = {"canary.tune.enabled": False, "canary.load.concurrency": 1,
                                     **{f"canary.load.{key}": value for key, value in LOAD.items()}}


def write_spec(stack: EmbeddedStack, path: Path, *, model: str, prefix: str, settings: dict[str, Any]) -> Path:
    """iris.yaml for a model and store prefix of its own, with ``settings`` (dotted keys, as NOT_ABOUT_LATENCY)
    applied, written to ``path`` for a process that reads the spec itself (the CLI); returns ``path``."""
    data = yaml.safe_load(SPEC.read_text())
    data["model"]["name"] = model
    data["golden"]["path"] = str(SPEC.parent / data["golden"]["path"])
    data["promote"]["store"] = f"s3://{stack.bucket}/{prefix}"
    for dotted, value in settings.items():
        section = data
        *parents, key = dotted.split(".")
        for part in parents:
            section = section.setdefault(part, {})
        section[key] = value
    path.write_text(yaml.safe_dump(data))
    return path


def cli_env(stack: EmbeddedStack, workspace: Path) -> dict[str, str]:
    """The environment of a ``model-release`` CLI process on this stack (S3 keys and endpoint, its workspace, INFO logs)."""
    from model_release.local.moto_process import _MOTO_KEY_ID, _MOTO_SECRET

    env = stack.env()
    env.pop("MODEL_RELEASE_DEBUG_LOGGERS", None)
    env.update(MODEL_RELEASE_S3_ENDPOINT_URL=stack.endpoint_url, MODEL_RELEASE_WORKSPACE=str(workspace), PYTHONUNBUFFERED="1",
               MODEL_RELEASE_LOG_LEVEL="INFO", AWS_DEFAULT_REGION="us-east-1", AWS_ACCESS_KEY_ID=_MOTO_KEY_ID,
               AWS_SECRET_ACCESS_KEY=_MOTO_SECRET)
    env.pop("NO_COLOR", None)
    return env


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStack]:
    with EmbeddedStack(tmp_path_factory.mktemp("stack")) as s:
        yield s


class StoreView:
    """Reads the S3 model store the way an auditor would: over HTTP, object by object."""

    def __init__(self, stack: EmbeddedStack, prefix: str) -> None:
        self.client = stack.s3_client()
        self.bucket = stack.bucket
        self.prefix = prefix.strip("/")

    def get(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None

    def json(self, key: str) -> Any:
        data = self.get(key)
        return None if data is None else json.loads(data)

    def keys(self, under: str = "") -> list[str]:
        keys = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/{under}"):
            keys += [o["Key"][len(self.prefix) + 1 :] for o in page.get("Contents", [])]
        return keys

    def sha256(self, key: str) -> str:
        data = self.get(key)
        assert data is not None, f"{key} is missing from the store"
        return hashlib.sha256(data).hexdigest()
