"""Steady production-like traffic to a local fleet, bounded in count and time, on the loopback only.

The watch judges a wave only on user traffic (its own probes do not count), so a local fleet needs
some while a release is rolled out. :class:`TrafficLoop` sends it: one thread per server, one
request every ``pause_s`` to the entry model (unpinned, as a client does), rows taken in turn from
``rows``; it stops by itself after ``max_requests`` requests in all or ``max_s`` seconds, whichever
comes first, and at the end of its ``with`` block. It refuses any server not on 127.0.0.1/localhost.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..serve.fleet import Fleet, Server

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


@dataclass
class ServerTraffic:
    """What one server answered: successes, error answers (status or unreachable), the first error."""

    answered: int = 0
    failed: int = 0
    first_error: str | None = None


@dataclass
class TrafficLoop:
    """Requests to every server of ``fleet``'s entry model ``model`` until stopped or a bound is reached.

    Args:
        fleet: the servers (each must be on the loopback).
        model: the entry model every request goes to.
        bodies: Triton HTTP/REST request bodies (``{"inputs": [...]}``), sent in turn.
        max_requests: at most this many requests in all (all threads together).
        max_s: at most this many seconds from the start.
        pause_s: the pause after each request of a thread (keeps a 2-core machine usable).
    """

    fleet: Fleet
    model: str
    bodies: Sequence[dict[str, Any]]
    max_requests: int = 50_000
    max_s: float = 900.0
    pause_s: float = 0.02
    timeout_s: float = 10.0
    by_server: dict[str, ServerTraffic] = field(default_factory=dict)

    def __post_init__(self) -> None:
        off = [s.url for s in self.fleet.servers if s.url.rsplit(":", 1)[0] not in LOOPBACK]
        if off:
            raise ValueError(f"the traffic loop sends to the loopback only; servers {off} are not on 127.0.0.1")
        if not self.bodies or self.max_requests < 1 or self.max_s <= 0:
            raise ValueError("the traffic loop needs request bodies, max_requests >= 1 and max_s > 0")
        self._payloads = [json.dumps(b).encode() for b in self.bodies]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sent = 0
        self._deadline = time.monotonic() + self.max_s
        self._threads = [threading.Thread(target=self._run, args=(s,), daemon=True, name=f"traffic-{s.name}")
                         for s in self.fleet.servers]
        self.by_server = {s.name: ServerTraffic() for s in self.fleet.servers}

    def __enter__(self) -> "TrafficLoop":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def started(self) -> bool:
        return self._threads[0].ident is not None if self._threads else False

    def start(self) -> "TrafficLoop":
        """Start sending (once; ``max_s`` counts from here)."""
        if not self.started:
            self._deadline = time.monotonic() + self.max_s
            for t in self._threads:
                t.start()
        return self

    def stop(self) -> None:
        """Stop every thread (each ends after its request in flight, at most ``timeout_s``)."""
        self._stop.set()
        for t in self._threads:
            if t.ident is not None:
                t.join(timeout=self.timeout_s + 5)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(t.answered + t.failed for t in self.by_server.values())

    def _take(self) -> int | None:
        """The next request's number, or None once a bound is reached."""
        with self._lock:
            if self._stop.is_set() or self._sent >= self.max_requests or time.monotonic() >= self._deadline:
                return None
            self._sent += 1
            return self._sent

    def _run(self, server: Server) -> None:
        host, port = server.url.rsplit(":", 1)
        conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=self.timeout_s)
        path = f"/v2/models/{self.model}/infer"
        try:
            while (n := self._take()) is not None:
                status, text = _post(conn, path, self._payloads[n % len(self._payloads)])
                self._count(server.name, status, text)
                self._stop.wait(self.pause_s)
        finally:
            conn.close()

    def _count(self, server: str, status: int, text: str) -> None:
        with self._lock:
            seen = self.by_server[server]
            if status == 200:
                seen.answered += 1
                return
            seen.failed += 1
            if seen.first_error is None:
                seen.first_error = f"HTTP {status}: {text[:200]}" if status else text[:200]


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, str]:
    """One request on a kept-alive connection; (0, why) when the server could not be reached."""
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        conn.close()  # reconnects on the next request
        return 0, f"unreachable ({exc})"
