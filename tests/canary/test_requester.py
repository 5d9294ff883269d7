"""The load generator's HTTP client (triton/requester.py) against a scripted HTTP server on a loopback socket.

Triton answers with a Content-Length in one piece; these tests hold the client to HTTP/1.1 for what a
proxy or another server may do instead: an answer split over many reads, a chunked body, an error
status, ``Connection: close``, a kept-open connection the server dropped while it was idle, and an
answer cut short. The request itself must be what ``tritonclient.http`` would send.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable

import numpy as np
import pytest

from model_release.triton.requester import HttpAnswerError, TritonRequester, request_batches

OK = b'{"model_name":"m","outputs":[]}'


def _ok(body: bytes = OK, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body


class Server:
    """A loopback HTTP server that reads each request whole and answers it as ``answer(n, conn)`` scripts.

    Records every request (head and body) and how many connections it accepted.
    """

    def __init__(self, answer: Callable[[int, socket.socket], None]) -> None:
        self.answer, self.requests, self.connections = answer, [], 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                data = b""
                while True:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if b"\r\n\r\n" not in data:
                        break
                    head, _, data = data.partition(b"\r\n\r\n")
                    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
                    while len(data) < length:
                        data += conn.recv(65536)
                    self.requests.append((head, data[:length]))
                    data = data[length:]
                    try:
                        self.answer(len(self.requests), conn)
                    except _Hang:
                        break

    def close(self) -> None:
        self.listener.close()


class _Hang(Exception):
    """The scripted server closes this connection now."""


def _requester(url: str, rows: int = 4) -> TritonRequester:
    golden = {"x": np.arange(40, dtype=np.float32).reshape(10, 4)}
    return TritonRequester(url, "m", {"x": "FP32"}, ["y"], request_batches(golden, rows), timeout_s=5)


@pytest.fixture
def serve():  # noqa: ANN201
    servers: list[Server] = []

    def start(answer: Callable[[int, socket.socket], None]) -> Server:
        servers.append(Server(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_the_request_is_tritonclients_binary_body_and_the_rows_sent_are_returned(serve) -> None:
    server = serve(lambda n, conn: conn.sendall(_ok()))
    requester = _requester(server.url, rows=4)
    assert [requester.send(i) for i in range(3)] == [4, 4, 4]
    requester.close()
    assert server.connections == 1  # one kept-open connection for every request
    head, body = server.requests[0]
    assert head.startswith(b"POST /v2/models/m/infer HTTP/1.1\r\n")
    json_size = int(next(line.split(b": ")[1] for line in head.split(b"\r\n") if line.startswith(b"Inference-Header-Content-Length")))
    header = json.loads(body[:json_size])
    assert header["inputs"] == [{"name": "x", "shape": [4, 4], "datatype": "FP32", "parameters": {"binary_data_size": 64}}]
    assert header["outputs"] == [{"name": "y", "parameters": {"binary_data": True}}]
    assert np.frombuffer(body[json_size:], np.float32).tolist() == list(range(16))  # the golden rows, raw
    assert server.requests[1][1][json_size:] != body[json_size:]  # the next request: the next rows


def test_an_answer_in_many_pieces_and_a_chunked_one_are_read_whole(serve) -> None:
    big = b"x" * 200_000  # more than the client's buffer

    def answer(n: int, conn: socket.socket) -> None:
        if n == 1:
            for i in range(0, len(whole := _ok(big)), 7_000):
                conn.sendall(whole[i:i + 7_000])
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n"
                         b"6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")

    server = serve(answer)
    requester = _requester(server.url)
    assert requester.send(0) == 4 and requester.send(1) == 4 and requester.send(2) == 4  # the third after a chunked one
    requester.close()
    assert server.connections == 1


def test_an_error_status_carries_the_servers_message(serve) -> None:
    message = b'{"error":"inference request batch-size must be <= 8 for \'m\'"}'
    server = serve(lambda n, conn: conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(message) + message))
    requester = _requester(server.url)
    with pytest.raises(HttpAnswerError, match=r"^HTTP 400: \{\"error\":\"inference request batch-size must be <= 8"):
        requester.send(0)
    requester.close()


def test_connection_close_opens_a_new_connection_for_the_next_request(serve) -> None:
    def answer(n: int, conn: socket.socket) -> None:
        conn.sendall(_ok(extra=b"Connection: close\r\n"))
        raise _Hang

    server = serve(answer)
    requester = _requester(server.url)
    assert requester.send(0) == 4 and requester.send(1) == 4
    requester.close()
    assert server.connections == 2 and len(server.requests) == 2


def test_a_kept_open_connection_dropped_while_idle_is_opened_again_once(serve) -> None:
    def answer(n: int, conn: socket.socket) -> None:
        conn.sendall(_ok())
        if n == 1:
            raise _Hang  # the server drops the idle connection without saying so

    server = serve(answer)
    requester = _requester(server.url)
    assert requester.send(0) == 4
    assert requester.send(1) == 4  # sent again on a new connection, answered
    requester.close()
    assert server.connections == 2 and len(server.requests) == 2


def test_an_answer_cut_short_on_a_new_connection_is_an_error_not_a_retry(serve) -> None:
    def answer(n: int, conn: socket.socket) -> None:
        conn.sendall(_ok()[:30])
        raise _Hang

    server = serve(answer)
    requester = _requester(server.url)
    with pytest.raises(ConnectionError, match="closed the connection before its whole answer arrived"):
        requester.send(0)
    requester.close()
    assert len(server.requests) == 1  # sent once


def test_requests_of_different_row_counts_are_refused() -> None:
    batches = [{"x": np.zeros((4, 4), np.float32)}, {"x": np.zeros((3, 4), np.float32)}]
    with pytest.raises(ValueError, match=r"different row counts \[3, 4\]"):
        TritonRequester("127.0.0.1:1", "m", {"x": "FP32"}, ["y"], batches, timeout_s=1)
