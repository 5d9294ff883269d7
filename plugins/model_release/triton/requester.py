"""Requests to a served model prepared once and sent as raw bytes over a kept-open socket, as perf_analyzer sends them.

:func:`request_batches` cuts up to a few distinct requests of ``batch_rows`` rows out of a golden
set (cycled when the set is small); :class:`TritonRequester` builds each one's whole HTTP/1.1
message once (request line, headers and the KServe v2 binary body ``tritonclient.http`` would
send) and sends it over one kept-open TCP connection: per request one ``sendall`` of ready bytes
and, for a small answer, one ``recv_into`` a reused buffer. :class:`Requester` is the small
interface a load generator drives (a fake in unit tests).

Why not ``tritonclient.http`` or geventhttpclient per request: on a 2-core canary the client's CPU is
taken from Triton. Measured against the local Triton (iris ensemble, 16 rows, 4 in flight), the
geventhttpclient client spent about 200 us of CPU per request, perf_analyzer about 125 us, this one
about 55 us (``benchmarks/bench_canary.py`` prints each beside the figures).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from urllib.parse import quote

import numpy as np

from ..model.dtypes import numpy_from_triton

#: the receive buffer: a small answer arrives in one read; a larger one is read through it
BUFFER_BYTES = 1 << 16


class Requester:
    """One connection that sends one request at a time (the real one: :class:`TritonRequester`)."""

    def send(self, batch: int) -> int:
        """Send request number ``batch`` (cycled over the prepared ones) and wait for its answer.

        Returns:
            The rows the request carried, so that the rows counted are the rows sent.
        """
        ...

    def close(self) -> None: ...


class HttpAnswerError(RuntimeError):
    """The server answered a request with a status other than 200 (its message quoted)."""


class TritonRequester(Requester):
    """Requests prebuilt once (whole HTTP messages) over one kept-open connection, used by one thread.

    Sending is one ``sendall`` and reading the answer's head and body through a reused buffer; the
    body is read and dropped (only an error's first bytes are kept for its message). A status other
    than 200 is an :class:`HttpAnswerError` carrying Triton's message. A kept-open connection the
    server closed while idle is opened again once, and the request sent again.

    Args:
        url: ``host:port`` of Triton's HTTP endpoint.
        model: the model to call.
        inputs: input name -> Triton datatype (golden arrays are cast to it).
        outputs: the outputs to ask for (binary data).
        batches: the prepared requests' rows (:func:`request_batches`); every one has the same row count.
        timeout_s: seconds to connect, and to wait for each read or write.
    """

    def __init__(self, url: str, model: str, inputs: Mapping[str, str], outputs: list[str],
                 batches: list[dict[str, np.ndarray]], timeout_s: float) -> None:
        host, _, port = url.rpartition(":")
        self._address = (host.strip("[]"), int(port))
        self._timeout = timeout_s
        counts = {len(next(iter(b.values()))) for b in batches}
        if len(counts) != 1:
            raise ValueError(f"the prepared requests carry different row counts {sorted(counts)}; they must be equal")
        self.rows = counts.pop()
        path = f"/v2/models/{quote(model)}/infer"
        self._messages = [_message(url, path, *_body(inputs, outputs, batch)) for batch in batches]
        self._reader = _Reader(bytearray(BUFFER_BYTES))
        self._sock: socket.socket | None = None
        self._used = False

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self._address, timeout=self._timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock, self._used = sock, False
        return sock

    def send(self, batch: int) -> int:
        message = self._messages[batch % len(self._messages)]
        try:
            status, error = self._exchange(message)
        except _Stale:
            status, error = self._exchange(message)  # once more, on a new connection
        if status != 200:
            raise HttpAnswerError(f"HTTP {status}: {error.decode(errors='replace')}")
        return self.rows

    def _exchange(self, message: bytes) -> tuple[int, bytes]:
        """Send one request and read its answer: (status, the first bytes of an error's body)."""
        sock = self._sock or self._connect()
        reused, reader = self._used, self._reader.on(sock)
        try:
            sock.sendall(message)
            reader.fill()
            if reader.whole_ok():
                self._used = True
                return 200, b""
            status, error, keep = _answer(reader)
        except OSError as exc:
            self.close()
            if reused and not reader.received and isinstance(exc, _Closed | ConnectionResetError | BrokenPipeError):
                raise _Stale from None  # the server dropped the idle connection before this request
            raise
        self._used = True
        if not keep:
            self.close()
        return status, error

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None


class _Stale(Exception):
    """A kept-open connection the server had closed: nothing of the request was answered."""


class _Closed(ConnectionError):
    """The server closed the connection before a whole answer arrived."""


#: an error's body is kept up to this many bytes for its message
ERROR_BYTES = 300


def _answer(reader: "_Reader") -> tuple[int, bytes, bool]:
    """One answer read: (status, the first bytes of an error's body, whether the connection stays open)."""
    head = bytes(reader.line(b"\r\n\r\n"))
    if head[:5] != b"HTTP/" or not head[9:12].isdigit():
        raise ConnectionError(f"the server answered something other than HTTP/1.x: {head[:80]!r}")
    status = int(head[9:12])
    keep = 0 if status == 200 else ERROR_BYTES
    fields = head.lower() + b"\r\n"
    open_after = b"\r\nconnection: close\r\n" not in fields
    length = _field(fields, b"content-length")
    if length is not None:
        return status, reader.skip(int(length), keep=keep), open_after
    if _field(fields, b"transfer-encoding") == b"chunked":
        return status, reader.chunked(keep=keep), open_after
    return status, reader.to_end(keep=keep), False  # the body runs to the end of the connection


def _field(fields: bytes, name: bytes) -> bytes | None:
    """A header's value in a lower-cased head (None when absent)."""
    at = fields.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    at += len(name) + 3
    return fields[at:fields.find(b"\r\n", at)].strip()


class _Reader:
    """Answers read through one reused buffer: a head, then a body read and dropped."""

    def __init__(self, buffer: bytearray) -> None:
        self.buffer, self.view = buffer, memoryview(buffer)
        self.sock: socket.socket | None = None
        self.start = self.end = 0  # unread bytes: buffer[start:end]
        self.received = 0

    def on(self, sock: socket.socket) -> "_Reader":
        """Ready for the next answer on ``sock`` (nothing of it read yet)."""
        self.sock, self.start, self.end, self.received = sock, 0, 0, 0
        return self

    def whole_ok(self) -> bool:
        """Whether what was read is exactly one whole answer ``200`` with its Content-Length (Triton's usual answer).

        The common case, checked without parsing the head: anything else is read by :func:`_answer`.
        """
        buffer, end = self.buffer, self.end
        if end < 16 or not buffer.startswith(b"HTTP/1.1 200 "):
            return False
        head = buffer.find(b"\r\n\r\n", 0, end)
        at = buffer.find(b"\r\nContent-Length: ", 0, head)
        if head < 0 or at < 0 or buffer.find(b"\r\nConnection: close", 0, head) >= 0:
            return False
        at += 18
        return head + 4 + int(buffer[at:buffer.find(b"\r\n", at, head + 2)]) == end

    def fill(self) -> None:
        if self.start == self.end:
            self.start = self.end = 0
        elif self.end == len(self.buffer):  # move the unread bytes to the front to make room
            size = self.end - self.start
            if size == len(self.buffer):
                raise ConnectionError(f"an answer's head or chunk line is longer than {len(self.buffer)} bytes")
            self.buffer[:size] = self.buffer[self.start:self.end]
            self.start, self.end = 0, size
        n = self.sock.recv_into(self.view[self.end:])
        if n == 0:
            raise _Closed("the server closed the connection before its whole answer arrived")
        self.end += n
        self.received += n

    def line(self, until: bytes = b"\r\n") -> bytearray:
        """The bytes up to ``until`` (consumed with it)."""
        while (at := self.buffer.find(until, self.start, self.end)) < 0:
            self.fill()
        out = self.buffer[self.start:at]
        self.start = at + len(until)
        return out

    def skip(self, count: int, *, keep: int) -> bytes:
        """Drop ``count`` body bytes; return the first ``keep`` of them."""
        kept = b""
        while count > 0:
            if self.start == self.end:
                self.fill()
            take = min(count, self.end - self.start)
            if len(kept) < keep:
                kept += bytes(self.buffer[self.start:self.start + min(take, keep - len(kept))])
            self.start += take
            count -= take
        return kept

    def chunked(self, *, keep: int) -> bytes:
        """Drop a chunked body (RFC 9112 7.1); return its first ``keep`` bytes."""
        kept = b""
        while (size := int(bytes(self.line()).split(b";")[0], 16)) > 0:
            kept += self.skip(size, keep=keep - len(kept))
            self.line()
        while self.line():  # trailer fields, up to the empty line
            pass
        return kept

    def to_end(self, *, keep: int) -> bytes:
        """Drop a body that ends where the connection does; return its first ``keep`` bytes."""
        kept = b""
        try:
            while True:
                kept += self.skip(max(self.end - self.start, 1), keep=keep - len(kept))
        except _Closed:
            return kept


def _body(inputs: Mapping[str, str], outputs: list[str], batch: Mapping[str, np.ndarray]) -> tuple[bytes, int | None]:
    """The KServe v2 binary body of one request, built by ``tritonclient.http`` once."""
    import tritonclient.http as http

    tensors = []
    for name, datatype in inputs.items():
        array = batch[name]
        array = array.astype(object) if datatype == "BYTES" else array.astype(numpy_from_triton(datatype), copy=False)
        tensor = http.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array, binary_data=True)
        tensors.append(tensor)
    wanted = [http.InferRequestedOutput(o, binary_data=True) for o in outputs]
    body, json_size = http.InferenceServerClient.generate_request_body(tensors, outputs=wanted)
    return (body if isinstance(body, bytes) else body.encode()), json_size


def _message(host: str, path: str, body: bytes, json_size: int | None) -> bytes:
    """The whole HTTP/1.1 request: head and body in one buffer, sent with one call."""
    head = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/octet-stream",
            f"Content-Length: {len(body)}"]
    if json_size is not None:
        head.append(f"Inference-Header-Content-Length: {json_size}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


def request_batches(golden: Mapping[str, np.ndarray], batch_rows: int, *, at_most: int = 32) -> list[dict[str, np.ndarray]]:
    """Up to ``at_most`` distinct requests of ``batch_rows`` golden rows, cycled when the set is small."""
    rows = len(next(iter(golden.values())))
    batches = []
    for i in range(at_most):
        start = (i * batch_rows) % rows
        index = (np.arange(batch_rows) + start) % rows
        batches.append({k: np.ascontiguousarray(v[index]) for k, v in golden.items()})
        if (i + 1) * batch_rows >= rows and rows >= batch_rows:
            break
    return batches
