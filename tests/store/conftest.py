"""Fixtures for the model store tests: one moto S3 server per session, a store per backend."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from model_release.local.moto_process import MotoServer, ensure_bucket, s3_client
from model_release.store import ModelStore, open_store


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


def fast_client(endpoint_url: str) -> Any:
    """A client that gives up quickly when the endpoint goes away (tests cut it on purpose)."""
    return s3_client(endpoint_url, retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=2, read_timeout=10)


class StoreKit:
    """A store under test, plus a direct view of it that no test outage reaches."""

    def __init__(self, kind: str, uri: str, make: Any, endpoint_url: str | None = None) -> None:
        self.kind = kind
        self.uri = uri
        self._make = make
        self.endpoint_url = endpoint_url

    def store(self, endpoint_url: str | None = None) -> ModelStore:
        return self._make(endpoint_url)

    @property
    def direct(self) -> ModelStore:
        return self._make(None)


# the s3 kit starts a moto server: integration, so `make test-fast` (no service) leaves it to `make test`
@pytest.fixture(params=[pytest.param("s3", marks=pytest.mark.integration), "file"])
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    if request.param == "s3":
        server: MotoServer = request.getfixturevalue("moto")
        bucket = f"store-{uuid.uuid4().hex[:12]}"
        ensure_bucket(server.endpoint_url, bucket)
        uri = f"s3://{bucket}/team/iris"
        return StoreKit("s3", uri, lambda ep: open_store(uri, s3_client=fast_client(ep or server.endpoint_url)),
                        server.endpoint_url)
    uri = (tmp_path / "store").as_uri()
    return StoreKit("file", uri, lambda ep: open_store(uri))


@pytest.fixture(autouse=True)
def _no_registry_from_an_earlier_test(monkeypatch) -> None:
    """The store's commands follow $MLFLOW_TRACKING_URI (the CLI grammar's default), and mlflow.set_tracking_uri in an
    earlier test of the same worker exports it: a store test reaches MLflow only when it says so itself."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
