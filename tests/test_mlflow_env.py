"""The MLflow settings the product runs with: bounded requests, and tracking URIs checked without opening them."""

from __future__ import annotations

import os

import pytest

from model_release.errors import UserError
from model_release.mlflow_env import (
    RETRIES_ENV, TIMEOUT_ENV, check_request_limits, check_tracking_uri, quiet_mlflow_env, request_limits,
)


def test_valid_tracking_uris_pass_and_create_nothing(tmp_path) -> None:
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"")
    for uri in ("http://mlflow:5000", "https://mlflow.example.com/prefix", "http://u:p@10.0.0.1:5000",
                f"sqlite:///{db}", "postgresql://user:pw@db:5432/mlflow", "mysql+pymysql://u@db/m",
                "databricks", "databricks://profile", f"file://{tmp_path}", str(tmp_path)):
        assert check_tracking_uri(uri) == uri
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]


@pytest.mark.parametrize(("uri", "why"), [
    ("bogus://x", "has scheme 'bogus', which MLflow cannot open"),
    ("", "is empty"),
    ("   ", "is empty"),
    ("http://", "names no host"),
    ("http://h:0x50", "has an invalid port"),
    ("sqlite://relative.db", "names no database file"),
    ("sqlite:///:memory:", "names no database file"),
    ("http://h\n", "holds a control character"),
    (" http://h", "surrounding space"),
    ("/no/such/folder", "is neither a URI nor an existing folder"),
    ("file:///no/such/folder", "the folder '/no/such/folder' does not exist"),
])
def test_bad_tracking_uris_are_user_errors(uri: str, why: str) -> None:
    with pytest.raises(UserError) as err:
        check_tracking_uri(uri)
    assert why in str(err.value) and "\n" not in str(err.value)


def test_a_missing_sqlite_database_is_refused_not_created(tmp_path) -> None:
    with pytest.raises(UserError, match="does not exist; check the path"):
        check_tracking_uri(f"sqlite:///{tmp_path / 'typo.db'}")
    assert list(tmp_path.iterdir()) == []


def test_request_limits_default_are_bounded_and_can_be_set(monkeypatch) -> None:
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    monkeypatch.delenv(RETRIES_ENV, raising=False)
    quiet_mlflow_env()
    assert check_request_limits() == (8, 2)
    with request_limits(3, 0):
        assert check_request_limits() == (3, 0)
    assert (os.environ[TIMEOUT_ENV], os.environ[RETRIES_ENV]) == ("8", "2")
    monkeypatch.setenv(RETRIES_ENV, "99")
    with pytest.raises(UserError, match="MLFLOW_HTTP_REQUEST_MAX_RETRIES '99' is not valid; give whole retries from 0 to 10"):
        check_request_limits()
    with pytest.raises(UserError, match="--mlflow-timeout '1.5' is not valid"), request_limits("1.5", None):
        pass
