"""one_write_at_a_time: the local S3 endpoints check a conditional write and store it as one step.

The app under the wrapper here is a stand-in with moto 5.2's shape: it checks ``If-Match``, then
(after a window in which another request can run) stores the object. Without the wrapper two
writers holding the same ETag both pass the check; the first test shows the stand-in really has
that race, so the tests after it can fail.
"""

from __future__ import annotations

import hashlib
import io
import threading
from typing import Any, Callable

import pytest

from model_release.local.moto_process import one_write_at_a_time

WINDOW = 0.05  # seconds between the check and the write: both writers meet inside it


class CheckThenWrite:
    """One object, an ETag, a GET and a conditional PUT that checks, pauses, then writes."""

    def __init__(self) -> None:
        self.body = b"0"
        self.closed = 0
        self.hold_writes = threading.Event()
        self.hold_writes.set()  # writes pass unless a test clears this
        self.in_write = threading.Event()

    @property
    def etag(self) -> str:
        return hashlib.md5(self.body).hexdigest()  # noqa: S324 - an ETag, as S3 spells it

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        method = environ["REQUEST_METHOD"]
        if method == "GET":
            start_response("200 OK", [("ETag", self.etag)])
            return [self.body]
        if environ.get("HTTP_IF_MATCH") not in (None, self.etag):
            start_response("412 Precondition Failed", [])
            return [b"PreconditionFailed"]
        self.in_write.set()
        self.hold_writes.wait(10)
        threading.Event().wait(WINDOW)  # moto builds the new key here; another request may run
        self.body = environ["wsgi.input"].read()
        start_response("200 OK", [("ETag", self.etag)])
        return Closing([b"ok"], self)


class Closing(list):
    """A response iterable with ``close()``, as WSGI servers must call it."""

    def __init__(self, items: list[bytes], app: CheckThenWrite) -> None:
        super().__init__(items)
        self.app = app

    def close(self) -> None:
        self.app.closed += 1


def request(app: Any, method: str, *, body: bytes = b"", if_match: str | None = None) -> tuple[str, bytes]:
    status: list[str] = []
    environ = {"REQUEST_METHOD": method, "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
    if if_match is not None:
        environ["HTTP_IF_MATCH"] = if_match
    out = b"".join(app(environ, lambda s, headers: status.append(s)))
    return status[0], out


def race(app: Any, writers: int) -> list[str]:
    """``writers`` threads PUT different bodies, all with the ETag read before; their statuses."""
    etag = app.etag
    barrier = threading.Barrier(writers)
    statuses: list[str] = []

    def put(i: int) -> None:
        barrier.wait()
        statuses.append(request(app, "PUT", body=f"writer-{i}".encode(), if_match=etag)[0])

    threads = [threading.Thread(target=put, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return sorted(statuses)


class Wrapped:
    def __init__(self, inner: CheckThenWrite, **kw: Any) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.app = one_write_at_a_time(inner, self.lock, **kw)

    @property
    def etag(self) -> str:
        return self.inner.etag

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self.app(environ, start_response)


def test_without_the_wrapper_the_stand_in_lets_two_writers_win():
    assert race(CheckThenWrite(), 2) == ["200 OK", "200 OK"]


def test_wrapped_exactly_one_of_four_conditional_writers_wins():
    app = Wrapped(CheckThenWrite())
    assert race(app, 4) == ["200 OK"] + ["412 Precondition Failed"] * 3
    assert app.inner.body.startswith(b"writer-")


def test_reads_are_not_held_behind_a_write():
    inner = CheckThenWrite()
    inner.hold_writes.clear()
    app = Wrapped(inner)
    writer = threading.Thread(target=request, args=(app, "PUT"), kwargs={"body": b"new"})
    writer.start()
    assert inner.in_write.wait(10)
    assert app.lock.locked()  # the write holds the lock ...
    got: list[tuple[str, bytes]] = []
    reader = threading.Thread(target=lambda: got.append(request(app, "GET")))
    reader.start()
    reader.join(5)
    assert got == [("200 OK", b"0")]  # ... and a read still answers, with the old object
    inner.hold_writes.set()
    writer.join(10)
    assert inner.body == b"new" and not app.lock.locked()


def test_after_write_runs_for_writes_only_and_responses_are_closed():
    writes: list[bool] = []
    app = Wrapped(CheckThenWrite(), after_write=lambda: writes.append(app.lock.locked()))
    request(app, "GET")
    request(app, "HEAD")
    assert writes == []
    assert request(app, "PUT", body=b"a") == ("200 OK", b"ok")
    assert request(app, "DELETE", body=b"b") == ("200 OK", b"ok")
    assert writes == [True, True]  # inside the lock, once per request that may change state
    assert app.inner.closed == 2


def test_a_write_that_raises_releases_the_lock():
    calls: list[str] = []

    def broken(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        calls.append(environ["REQUEST_METHOD"])
        if len(calls) == 1:
            raise RuntimeError("moto failed")
        start_response("200 OK", [])
        return [b"ok"]

    lock = threading.Lock()
    app = one_write_at_a_time(broken, lock)
    with pytest.raises(RuntimeError, match="moto failed"):
        request(app, "PUT")
    assert not lock.locked()
    assert request(app, "PUT") == ("200 OK", b"ok")


class TrickleBody(io.RawIOBase):
    """A request body that sends its first bytes, then waits for ``go`` before sending the rest."""

    def __init__(self, data: bytes, go: threading.Event) -> None:
        self.data, self.go, self.sent = data, go, 0
        self.waiting = threading.Event()

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        if self.sent >= len(self.data):
            return 0
        if self.sent > 0:
            self.waiting.set()
            self.go.wait(10)
        n = 1 if self.sent == 0 else min(len(buf), len(self.data) - self.sent)
        buf[:n] = self.data[self.sent:self.sent + n]
        self.sent += n
        return n


def test_a_client_still_sending_its_body_holds_up_only_itself():
    inner = CheckThenWrite()
    app = Wrapped(inner)
    go = threading.Event()
    slow_body = TrickleBody(b"slow-body", go)
    statuses: list[str] = []

    def slow_put() -> None:
        environ = {"REQUEST_METHOD": "PUT", "wsgi.input": io.BufferedReader(slow_body), "CONTENT_LENGTH": "9"}
        statuses.append(b"".join(app(environ, lambda s, h: statuses.append(s))).decode())

    slow = threading.Thread(target=slow_put)
    slow.start()
    assert slow_body.waiting.wait(10)
    assert not app.lock.locked()  # the lock is not held while the body is still on its way ...
    assert request(app, "PUT", body=b"quick") == ("200 OK", b"ok")  # ... so another write goes through
    assert inner.body == b"quick"
    go.set()
    slow.join(10)
    assert statuses == ["200 OK", "ok"] and inner.body == b"slow-body"  # the slow one arrives whole, later


def test_a_body_shorter_than_its_content_length_never_reaches_moto():
    inner = CheckThenWrite()
    app = Wrapped(inner)
    status: list[str] = []
    environ = {"REQUEST_METHOD": "PUT", "wsgi.input": io.BytesIO(b"only-part"), "CONTENT_LENGTH": "100"}
    out = b"".join(app(environ, lambda s, h: status.append(s)))
    assert status == ["400 Bad Request"] and b"<Code>IncompleteBody</Code>" in out
    assert inner.body == b"0" and not app.lock.locked()


def test_a_chunked_body_the_server_ends_is_read_to_its_end():
    inner = CheckThenWrite()
    app = Wrapped(inner)
    environ = {"REQUEST_METHOD": "PUT", "wsgi.input": io.BytesIO(b"chunked-body"), "wsgi.input_terminated": True}
    assert b"".join(app(environ, lambda s, h: None)) == b"ok"
    assert inner.body == b"chunked-body"
