"""Credentials never appear in logs, exceptions or CLI output."""

from __future__ import annotations

import logging

import pytest

from model_release.errors import ModelReleaseError
from model_release.local.moto_process import ensure_bucket
from model_release.store import open_store, promote, verify_release
from model_release.store.cli import main as store_cli

from .support import CuttableProxy, make_release

pytestmark = pytest.mark.integration

KEY_ID = "AKIAMRTESTDISTINCTIVE7"
SECRET = "mr-secret-Zq9vXk2LmT8wRr4sDistinctive"


def test_no_credentials_in_logs_errors_or_cli_output(moto, tmp_path, monkeypatch, caplog, capsys):
    # credentials from the standard AWS chain (environment), endpoint from MODEL_RELEASE_S3_ENDPOINT_URL
    proxy = CuttableProxy(moto.port)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("MODEL_RELEASE_S3_ENDPOINT_URL", proxy.endpoint_url)
    ensure_bucket(moto.endpoint_url, "secrets-test")
    errors: list[str] = []
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="model_release")
    try:
        store = open_store("s3://secrets-test/p")
        rel = make_release(tmp_path / "r", small=3)
        promote(rel, "iris-1", store, "production")
        assert verify_release(store, "iris-1").ok
        for attempt in (
            lambda: promote(rel, "iris-2", open_store("s3://no-such-bucket-xyz/p"), "production"),
            lambda: promote(make_release(tmp_path / "b", small=1, seed="b"), "iris-b", store, "production",
                            expected_current="someone-else"),
        ):
            with pytest.raises(ModelReleaseError) as err:
                attempt()
            errors.append(str(err.value))
        proxy.go_away()
        with pytest.raises(ModelReleaseError) as err:
            promote(make_release(tmp_path / "c", small=1, seed="c"), "iris-c", store, "production")
        errors.append(str(err.value))
        assert store_cli(["verify", "--release", "iris-1", "--store", "s3://secrets-test/p"]) != 0
        assert store_cli(["releases", "--store", "s3://no-such-bucket-xyz/p"]) != 0
    finally:
        proxy.close()
    out = capsys.readouterr()
    assert len(errors) == 3 and "no-such-bucket-xyz" in errors[0] and "someone-else" in errors[1]
    assert "unreachable" in errors[2] or "failed" in errors[2]
    assert out.err.strip()
    logs = "\n".join(r.getMessage() for r in caplog.records) + "\n".join(str(r.args) for r in caplog.records)
    assert any(r.name.startswith("model_release") for r in caplog.records)
    for text in [logs, out.out, out.err, *errors]:
        assert SECRET not in text and KEY_ID not in text
