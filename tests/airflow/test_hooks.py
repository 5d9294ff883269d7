"""Hooks resolve connections the way Airflow users configure them, and never echo credentials."""

from __future__ import annotations

import json

import pytest

from model_release.errors import ServiceUnavailable

# model_release.airflow.hooks imports Airflow (seconds): each test imports it, so collecting this file
# on every pytest-xdist worker does not.


def test_mlflow_tracking_uri_from_connection_extra(monkeypatch) -> None:
    from model_release.airflow.hooks import MlflowHook

    monkeypatch.setenv("AIRFLOW_CONN_MLFLOW_TEST", json.dumps({"conn_type": "http", "extra": {"tracking_uri": "sqlite:////tmp/x.db"}}))
    assert MlflowHook("mlflow_test").tracking_uri() == "sqlite:////tmp/x.db"


def test_mlflow_tracking_uri_from_connection_host(monkeypatch) -> None:
    from model_release.airflow.hooks import MlflowHook

    monkeypatch.setenv("AIRFLOW_CONN_MLFLOW_HOST", json.dumps({"conn_type": "http", "host": "mlflow.internal", "port": 5000}))
    assert MlflowHook("mlflow_host").tracking_uri() == "http://mlflow.internal:5000"


def test_mlflow_without_connection_or_env_says_what_to_set(monkeypatch) -> None:
    from model_release.airflow.hooks import MlflowHook

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(ServiceUnavailable, match="mlflow_missing.*MLFLOW_TRACKING_URI"):
        MlflowHook("mlflow_missing").tracking_uri()


def test_triton_canary_endpoint_or_embedded(monkeypatch) -> None:
    from model_release.airflow.hooks import TritonCanaryHook

    assert TritonCanaryHook("triton_absent").endpoint() is None
    monkeypatch.setenv("AIRFLOW_CONN_TRITON_REMOTE", json.dumps({"conn_type": "http", "host": "canary.internal", "port": 8000}))
    assert TritonCanaryHook("triton_remote").endpoint() == "canary.internal:8000"


@pytest.mark.integration
def test_store_hook_uses_the_connections_endpoint_and_credentials(monkeypatch, tmp_path) -> None:
    from model_release.airflow.hooks import ModelStoreHook
    from model_release.local.moto_process import MotoServer, ensure_bucket

    secret = "s3cr3t-never-logged-7f3a"
    with MotoServer() as moto:
        ensure_bucket(moto.endpoint_url, "hook-bucket")
        monkeypatch.setenv("AIRFLOW_CONN_STORE_TEST", json.dumps(
            {"conn_type": "aws", "login": "key-id", "password": secret,
             "extra": {"endpoint_url": moto.endpoint_url, "region_name": "us-east-1"}}))
        store = ModelStoreHook("store_test").open_store("s3://hook-bucket/models")
        assert secret not in repr(store)
        client = moto.client()
        client.put_object(Bucket="hook-bucket", Key="models/probe", Body=b"x")
        # the hook's client reaches the same endpoint: it sees what was written over HTTP
        assert store_client(store).get_object(Bucket="hook-bucket", Key="models/probe")["Body"].read() == b"x"


def store_client(store):
    for attr in ("client", "_client", "s3"):
        if hasattr(store, attr):
            return getattr(store, attr)
    backend = getattr(store, "backend", None)
    return store_client(backend) if backend is not None else pytest.fail("the S3 store exposes no client")


def test_user_errors_fail_the_task_without_retry_and_infra_errors_retry() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from model_release.airflow.tasks import no_retry_on_user_error
    from model_release.errors import ServiceUnavailable, SpecError

    @no_retry_on_user_error
    def bad_spec() -> None:
        raise SpecError("release spec 'x' is invalid: name: ...")

    @no_retry_on_user_error
    def server_down() -> None:
        raise ServiceUnavailable("S3 endpoint did not answer")

    with pytest.raises(AirflowFailException, match=r"\[spec\] release spec 'x' is invalid"):
        bad_spec()
    with pytest.raises(ServiceUnavailable):
        server_down()


def test_a_connection_that_cannot_be_read_is_an_outage_not_an_absent_connection(monkeypatch) -> None:
    """Only "not defined" means absent; a failing secrets backend must not silently fall back to the
    embedded Triton or to $MLFLOW_TRACKING_URI."""
    from airflow.sdk import BaseHook

    from model_release.airflow.hooks import MlflowHook, TritonCanaryHook

    def broken(conn_id: str):  # noqa: ANN202
        raise RuntimeError("vault at https://user:hunter2@vault.internal timed out")

    monkeypatch.setattr(BaseHook, "get_connection", staticmethod(broken))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////tmp/should-not-be-used.db")
    for call in (lambda: TritonCanaryHook("triton_canary").endpoint(), lambda: MlflowHook("mlflow_default").tracking_uri()):
        with pytest.raises(ServiceUnavailable) as caught:
            call()
        assert "could not be read (RuntimeError)" in str(caught.value)
        assert "hunter2" not in str(caught.value) and caught.value.__cause__ is None
