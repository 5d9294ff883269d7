"""A local S3 endpoint: moto's S3 server as a child process on 127.0.0.1, its state in memory.

Named for what it runs (moto, as a child process), not ``s3``, which is the store's S3 backend
(``store/s3.py``); the long-running stack's endpoint, whose state survives a restart, is
:mod:`.moto_persistent`.

Usage::

    with MotoServer() as s3:
        ensure_bucket(s3.endpoint_url, "model-store")
        store = open_store("s3://model-store/iris", s3_client=s3.client())

The server runs in its own process group and is stopped on ``stop()``, on leaving the ``with``
block and, as a last resort, from an ``atexit`` hook, so it never outlives the process that
started it. moto keeps its state in memory: stopping it loses every bucket and object.
moto accepts any credentials; the ones set here are fixed dummies and are never logged.

The child is this module run as ``python -m model_release.local.moto_process --port P``, not
``python -m moto.server``: it serves moto's own WSGI application, but runs the requests that may
change state one at a time (:func:`one_write_at_a_time`). S3 evaluates a conditional write
(``If-Match``, ``If-None-Match``) and stores the object as one step; moto 5.2 checks the condition,
then builds and stores the object with no lock of its own, so two concurrent conditional writes
of one key could both pass the check. On a loaded machine that made two racing promotions both
win, once in fifty races; the store's exactly-one-winner guarantee rests on S3's atomic check.
"""

from __future__ import annotations

import argparse
import atexit
import io
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from typing import Any, Callable, Iterable

from ..errors import ServiceUnavailable, StoreError
from .ports import free_port
from .procs import stop_group

log = logging.getLogger(__name__)

#: dummy credentials for moto, which accepts anything non-empty
_MOTO_KEY_ID = "moto-local"
_MOTO_SECRET = "moto-local-secret"  # noqa: S105 - not a secret: moto accepts any value

_live: "weakref.WeakSet[MotoServer]" = weakref.WeakSet()
_live_lock = threading.Lock()


def _stop_all() -> None:
    with _live_lock:
        servers = list(_live)
    for server in servers:
        server.stop()


atexit.register(_stop_all)

#: requests with these methods never change moto's state
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _body_read_first(environ: dict[str, Any]) -> bool:
    """Read the request body into memory, so that the lock is held for moto's work only, never
    while a slow or stalled client is still sending. False when the client sent less than its
    ``Content-Length`` (it went away): the request must not reach moto as if it were whole."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return True
    if "wsgi.input_terminated" in environ:  # the server ends the stream itself (a chunked body)
        body = stream.read()
    else:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = stream.read(length) if length > 0 else b""
        if len(body) < length:
            return False
    environ["wsgi.input"] = io.BytesIO(body)
    return True


_INCOMPLETE_BODY = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>IncompleteBody</Code>"
                    b"<Message>You did not provide the number of bytes specified by the Content-Length HTTP header"
                    b"</Message></Error>")


def one_write_at_a_time(app: Any, lock: threading.Lock, *, after_write: Callable[[], None] | None = None) -> Any:
    """Wrap a WSGI app (moto's) so requests that may change state run one at a time, each whole
    (its response read out) inside ``lock``; reads run concurrently.

    This makes moto's check of ``If-Match`` / ``If-None-Match`` and its write one step, as they are
    in S3. A write's body is read before the lock is taken, so a client that sends slowly holds
    up only itself; one that sends less than it announced gets S3's ``400 IncompleteBody`` and
    changes nothing. ``after_write`` runs inside the lock after each write (the persistent
    endpoint marks its state to be saved).
    """

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET") in READ_ONLY_METHODS:
            return app(environ, start_response)  # type: ignore[no-any-return]
        if not _body_read_first(environ):
            start_response("400 Bad Request", [("Content-Type", "application/xml"),
                                               ("Content-Length", str(len(_INCOMPLETE_BODY)))])
            return [_INCOMPLETE_BODY]
        with lock:
            result = app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
            if after_write is not None:
                after_write()
        return [body]

    return wrapped


def _list_services_once() -> None:
    """moto's dispatcher lists its package folder (a listdir and an isdir per service, about 170) on
    every request, to tell a service name from a host; the folder does not change while the server
    runs, so it is listed once. A quarter of the endpoint's CPU per request (benchmarks/bench_moto.py)."""
    import moto.backends

    services = tuple(moto.backends.list_of_moto_modules())
    moto.backends.list_of_moto_modules = lambda: services


def make_moto_server(host: str, port: int, *, lock: threading.Lock | None = None,
                     after_write: Callable[[], None] | None = None) -> Any:
    """A threaded werkzeug server for moto's application on ``host:port``, its writes one at a time.

    Serves what ``python -m moto.server`` serves (every service, ``/moto-api/``, moto's request
    handler, which keeps header names with underscores) with :func:`one_write_at_a_time` around it,
    and moto's list of services read once (:func:`_list_services_once`).
    """
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    _list_services_once()
    os.environ.setdefault("MOTO_PORT", str(port))  # as moto.server sets it: URLs moto builds name this port
    app = one_write_at_a_time(DomainDispatcherApplication(create_backend_app), lock or threading.Lock(),
                              after_write=after_write)
    return make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)


class MotoServer:
    """A moto S3 server (``moto_server``) as a child process, serving on ``http://127.0.0.1:<port>``.

    Args:
        port: the port to bind; a free one when None.
        ready_timeout: seconds to wait for the server to answer before giving up.
        region: the region reported to clients built by :meth:`client`.
    """

    def __init__(self, port: int | None = None, *, ready_timeout: float = 30.0, region: str = "us-east-1") -> None:
        self.port = port or free_port()
        self.ready_timeout = ready_timeout
        self.region = region
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> "MotoServer":
        """Start the server and wait until it answers HTTP.

        Raises:
            ServiceUnavailable: the process exited or did not answer within ``ready_timeout``.
        """
        if self.running:
            return self
        cmd = [sys.executable, "-m", "model_release.local.moto_process", "--port", str(self.port)]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so stop() can signal the whole group
        )
        with _live_lock:
            _live.add(self)
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = (self._proc.stderr.read() if self._proc.stderr else b"").decode(errors="replace")[-800:]
                self._proc = None
                raise ServiceUnavailable(
                    f"moto_server on 127.0.0.1:{self.port} exited at start-up: {err.strip() or 'no output'}. "
                    "Check that moto[server] is installed in this Python and the port is free."
                )
            try:
                with urllib.request.urlopen(self.endpoint_url + "/moto-api/", timeout=1):
                    pass
                # stderr is not read while running: close it so a chatty server cannot block on a full pipe
                if self._proc.stderr:
                    self._proc.stderr.close()
                log.info("moto S3 server ready at %s (pid %d)", self.endpoint_url, self._proc.pid)
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        self.stop()
        raise ServiceUnavailable(
            f"moto_server on {self.endpoint_url} did not answer within {self.ready_timeout:.0f} s; "
            "raise ready_timeout on a slow machine or check that nothing else holds the port."
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server's process group, wait, and kill it if it does not exit in ``timeout``."""
        proc, self._proc = self._proc, None
        with _live_lock:
            _live.discard(self)
        if proc is None or proc.poll() is not None:
            return
        try:
            stop_group(proc, timeout=timeout)
        finally:
            if proc.stderr and not proc.stderr.closed:
                proc.stderr.close()

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client for this server with dummy credentials; ``config`` goes to botocore's Config."""
        return s3_client(self.endpoint_url, region=self.region, **config)

    def __enter__(self) -> "MotoServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:  # a forgotten server still dies with its owner
        try:
            self.stop(timeout=2.0)
        except Exception:
            pass


def s3_client(endpoint_url: str, *, region: str = "us-east-1", **config: Any) -> Any:
    """A boto3 S3 client for a local endpoint, with moto's dummy credentials.

    Args:
        endpoint_url: ``http://host:port`` of the endpoint.
        region: the signing region.
        **config: passed to ``botocore.config.Config`` (for example ``retries``, ``max_pool_connections``).
    """
    import boto3
    from botocore.config import Config

    config.setdefault("max_pool_connections", 32)
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id=_MOTO_KEY_ID,
        aws_secret_access_key=_MOTO_SECRET,
        config=Config(**config),
    )


def ensure_bucket(endpoint_url: str, bucket: str, *, client: Any | None = None) -> None:
    """Create ``bucket`` on the endpoint unless it already exists.

    Raises:
        ServiceUnavailable: the endpoint does not answer.
        StoreError: the endpoint refused to create the bucket (for example an invalid name).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    client = client or s3_client(endpoint_url)
    try:
        client.create_bucket(Bucket=bucket)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            return
        raise StoreError(
            f"could not create bucket {bucket!r} at {endpoint_url}: {code}. "
            "Bucket names are 3-63 lowercase letters, digits, '.' and '-'."
        ) from None
    except BotoCoreError as exc:
        raise ServiceUnavailable(
            f"S3 endpoint {endpoint_url} did not answer while creating bucket {bucket!r} ({type(exc).__name__}); "
            "start it (MotoServer) or fix the endpoint URL."
        ) from None


def main(argv: list[str] | None = None) -> int:
    """Serve S3 in memory on 127.0.0.1 until killed (what :class:`MotoServer` runs)."""
    parser = argparse.ArgumentParser(prog="python -m model_release.local.moto_process",
                                     description="moto's S3 server in memory, its writes one at a time")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)  # no line per request
    make_moto_server(args.host, args.port).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
