"""The local moto S3 server: start, answer, stop, never left behind."""

from __future__ import annotations

import socket

import pytest

from model_release.errors import ServiceUnavailable, StoreError
from model_release.local.ports import free_port
from model_release.local.moto_process import MotoServer, ensure_bucket

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


@pytest.mark.parametrize("ending", ["raise RuntimeError('boom')", "import sys; sys.exit(3)"])
def test_moto_server_dies_with_its_owner_even_on_error(ending):
    import os
    import subprocess
    import sys
    import time

    code = (
        "from model_release.local.moto_process import MotoServer\n"
        "s = MotoServer().start()\n"
        "print(s._proc.pid, flush=True)\n"
        f"{ending}\n"
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert child.returncode != 0
    pid = int(child.stdout.split()[0])
    deadline = time.monotonic() + 10
    alive = True
    while alive and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                alive = f.read().split(")")[-1].split()[0] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        if alive:
            time.sleep(0.1)
    assert not alive, f"moto_server pid {pid} outlived the process that started it"


@pytest.mark.parametrize("condition", ["IfMatch", "IfNoneMatch"])
def test_concurrent_conditional_writes_of_one_key_have_one_winner(condition):
    """Eight writers, the same condition, twenty rounds: S3 lets exactly one through each round
    (tests/local/test_moto_writes.py shows the check-then-write race this endpoint closes)."""
    import threading

    from botocore.exceptions import ClientError

    with MotoServer() as server:
        ensure_bucket(server.endpoint_url, "race-test")
        clients = [server.client() for _ in range(8)]
        for rnd in range(20):
            key = f"k-{rnd}" if condition == "IfNoneMatch" else "pointer"
            if condition == "IfMatch":
                cond = clients[0].put_object(Bucket="race-test", Key=key, Body=f"base-{rnd}".encode())["ETag"]
            else:
                cond = "*"
            barrier = threading.Barrier(len(clients))
            won: list[int] = []
            refused: list[str] = []

            def write(i: int) -> None:
                barrier.wait()
                try:
                    clients[i].put_object(Bucket="race-test", Key=key, Body=f"{rnd}-{i}".encode(), **{condition: cond})
                    won.append(i)
                except ClientError as exc:
                    refused.append(exc.response["Error"]["Code"])

            threads = [threading.Thread(target=write, args=(i,)) for i in range(len(clients))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert len(won) == 1 and refused == ["PreconditionFailed"] * 7, (rnd, won, refused)
            body = clients[0].get_object(Bucket="race-test", Key=key)["Body"].read()
            assert body == f"{rnd}-{won[0]}".encode()
