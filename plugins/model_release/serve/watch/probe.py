"""Traffic-side error signals: what Triton's own counters cannot see.

Triton counts a python step that returns an error response (``pb_utils.InferenceResponse(error=...)``)
as a **success** (server#7713): a failing BLS step leaves ``nv_inference_request_failure`` at 0.
The watch therefore also counts errors seen from the traffic side, in one of two shapes, each a
callable ``(server, release) -> ProbeResult`` called once per server and interval:

- :class:`HttpProbe`: requests the watch sends itself, a bounded number per server and interval
  (each with a timeout) to the release's entry model at its exact version, from request bodies the
  user names (``serve.watch.probe.rows``: production-like inputs). An HTTP error answer is an error.
- a callable of the user's own (``own_requests=False`` in its results): errors that the user's
  clients or load balancer saw; its requests are user traffic, not extra.

A third, :attr:`model_release.spec.serve.WatchSpec.error_signal`, is a counter in the servers' own metrics endpoint
that a python step increments (Triton's custom metrics API); :mod:`.figures` reads it.
"""

from __future__ import annotations

import json
import http.client
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...errors import SpecError
from ...spec.serve import WatchSpec
from .figures import ProbeResult, Release
from .metrics import WatchedServer

#: ``post(url, body, timeout) -> (status, text)``; raises OSError when the server cannot be reached
Post = Callable[[str, bytes, float], tuple[int, str]]


def _urllib_post(url: str, body: bytes, timeout: float) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the fleet's own server
            return response.status, response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:  # Triton's error answers: 400 with {"error": "..."}
        return exc.code, exc.read().decode("utf-8", errors="replace")


def load_probe_bodies(path: Path) -> list[dict[str, Any]]:
    """Probe request bodies from a JSON file: a list of Triton HTTP/REST bodies (``{"inputs": [...]}``).

    Raises:
        SpecError: the file is missing, not JSON, or not a non-empty list of bodies with ``inputs``.
    """
    try:
        bodies = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SpecError(
            f"serve.watch.probe.rows: cannot read {str(path)!r} as JSON ({exc}); give a JSON file holding a list of "
            'Triton request bodies such as [{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", '
            '"data": [...]}]}]',
            stage="watch",
        ) from None
    if not isinstance(bodies, list) or not bodies or not all(isinstance(b, dict) and "inputs" in b for b in bodies):
        raise SpecError(
            f"serve.watch.probe.rows: {str(path)!r} is not a non-empty list of request bodies each with \"inputs\"; "
            "write one Triton HTTP/REST request body per production-like input",
            stage="watch",
        )
    return bodies


def probe_from_spec(watch: WatchSpec, resolve_path: Callable[[str], Path]) -> "HttpProbe | None":
    """The probe ``serve.watch.probe`` asks for (None when it names no ``rows``).

    Args:
        watch: ``serve.watch``.
        resolve_path: the release spec's path resolution (``ReleaseSpec.resolve_path``: relative to the spec).

    Raises:
        SpecError: the rows file cannot be read as request bodies.
    """
    if watch.probe.rows is None:
        return None
    bodies = load_probe_bodies(resolve_path(watch.probe.rows))
    return HttpProbe(bodies, requests=watch.probe.requests, timeout_s=watch.probe.timeout_s)


class HttpProbe:
    """Sends ``requests`` probe requests to a server's entry model version each time it is called.

    Args:
        bodies: request bodies in Triton's HTTP/REST form, sent in turn (one per request).
        requests: how many per server and interval (bounded: at most 64).
        timeout_s: each request's timeout.
        post: how a request is sent (urllib by default; a fake in unit tests).
    """

    def __init__(self, bodies: Sequence[dict[str, Any]], *, requests: int = 4, timeout_s: float = 5.0,
                 post: Post = _urllib_post) -> None:
        if not bodies:
            raise ValueError("HttpProbe needs at least one request body")
        if not 1 <= requests <= 64:
            raise ValueError(f"requests {requests} is not valid; valid: 1 to 64 per server and interval")
        self._bodies = [json.dumps(b).encode() for b in bodies]
        self.requests, self.timeout_s, self._post, self._next = requests, timeout_s, post, 0

    def __call__(self, server: WatchedServer, release: Release) -> ProbeResult:
        """Send this interval's probes to ``server``; count the error answers and keep the first message."""
        if server.http_url is None:
            return ProbeResult()
        url = f"http://{server.http_url}/v2/models/{release.entry}/versions/{release.version}/infer"
        errors, first = 0, None
        for _ in range(self.requests):
            body = self._bodies[self._next % len(self._bodies)]
            self._next += 1
            try:
                status, text = self._post(url, body, self.timeout_s)
            except (OSError, http.client.HTTPException) as exc:
                status, text = 0, f"unreachable ({exc})"
            if status != 200:
                errors += 1
                first = first or _error_text(status, text)
        return ProbeResult(sent=self.requests, errors=errors, first_error=first)


def _error_text(status: int, text: str) -> str:
    try:
        message = json.loads(text).get("error", text)
    except (ValueError, AttributeError):
        message = text
    return f"HTTP {status}: {str(message)[:300]}" if status else str(message)[:300]
