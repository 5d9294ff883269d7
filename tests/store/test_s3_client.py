"""The S3 client the store opens: the credential chain read on every call, botocore's parsed data kept once per process."""

from __future__ import annotations

from model_release.store.s3 import default_client


def test_each_client_reads_the_credential_chain_again_and_all_share_one_data_loader(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("MODEL_RELEASE_S3_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first-secret")
    first = default_client()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "rotated-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "rotated-secret")
    monkeypatch.setenv("MODEL_RELEASE_S3_ENDPOINT_URL", "http://127.0.0.1:10")
    second = default_client()

    # a key rotated (or an endpoint changed) between two clients is seen by the second: no session is reused
    assert first._request_signer._credentials.access_key == "first-key-id"
    assert second._request_signer._credentials.access_key == "rotated-key-id"
    assert (first.meta.endpoint_url, second.meta.endpoint_url) == ("http://127.0.0.1:9", "http://127.0.0.1:10")
    # what is shared is botocore's loader, which holds the parsed S3 model: the JSON is read once per process
    assert first._loader is second._loader
