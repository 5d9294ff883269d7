"""The local moto S3 server: start, answer, stop, never left behind."""

from __future__ import annotations

import socket

import pytest

from model_release.errors import ServiceUnavailable, StoreError
from model_release.local.ports import free_port
from model_release.local.s3 import MotoServer, ensure_bucket

pytestmark = pytest.mark.integration


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_moto_server_starts_answers_and_stops():
    with MotoServer() as server:
        pid = server._proc.pid
        ensure_bucket(server.endpoint_url, "local-s3-test")
        assert [b["Name"] for b in server.client().list_buckets()["Buckets"]] == ["local-s3-test"]
        with pytest.raises(StoreError, match="Bucket names"):
            ensure_bucket(server.endpoint_url, "b")
    assert not server.running
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)


def test_port_taken_gives_a_clear_error():
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        server = MotoServer(blocker.getsockname()[1], ready_timeout=10)
        with pytest.raises(ServiceUnavailable, match="moto_server"):
            server.start()
        assert not server.running


def test_unreachable_endpoint_is_service_unavailable():
    with pytest.raises(ServiceUnavailable, match="did not answer"):
        ensure_bucket(f"http://127.0.0.1:{free_port()}", "nobody-home")
