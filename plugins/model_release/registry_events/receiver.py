"""The webhook receiver: one decision per MLflow delivery, one log line, and an Airflow Asset event.

Answers (MLflow retries 429 and 5xx, never 4xx)::

    202  accepted: an Asset event was posted for every spec that names model@alias
    200  ignored: an event of another kind (alias deleted, a new version), or an alias no spec waits on
    400  not an MLflow event          401  missing or bad signature, timestamp outside the window
    404  no spec names this model     409  a delivery id seen before (a replay)
    413  a body over MAX_BODY bytes   503  Airflow did not take the event (MLflow retries it)

The secret is never logged or echoed; a log line names the delivery id, the model, the alias,
the version and the decision. The server binds 127.0.0.1 only.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from ..safe_text import echo
from .routes import Route, match
from .signature import DEFAULT_TOLERANCE_S, Delivery, ReplayGuard, WebhookRefused, verify_delivery

log = logging.getLogger(__name__)

#: the largest body the receiver reads (an MLflow event is a few hundred bytes)
MAX_BODY = 64 << 10
#: the event that moves a release: an alias set on a model version
ALIAS_CREATED = ("model_version_alias", "created")
HOST = "127.0.0.1"
PATH = "/webhook"


class AssetEvents(Protocol):
    """Where accepted events go: Airflow's REST API in production, a list in unit tests."""

    def post(self, route: Route, extra: dict[str, Any]) -> None: ...


class Receiver:
    """Verify, de-duplicate and route one delivery.

    Args:
        secret: the webhook's shared secret (the one MLflow signs with).
        routes: returns the current routes (re-read per delivery, so a new spec needs no restart).
        events: where an accepted event is posted.
        tolerance_s: the timestamp window, either side of now.
        clock: Unix seconds now.
    """

    def __init__(self, secret: str, routes: Callable[[], list[Route]], events: AssetEvents, *,
                 tolerance_s: float = DEFAULT_TOLERANCE_S, clock: Callable[[], float] = time.time) -> None:
        if not secret:
            raise ValueError("the webhook secret is empty; set MODEL_RELEASE_WEBHOOK_SECRET to the secret of MLflow's webhook")
        self._secret = secret
        self.routes = routes
        self.events = events
        self.tolerance_s = tolerance_s
        self.clock = clock
        self.replays = ReplayGuard(tolerance_s)

    def handle(self, headers: Any, body: bytes) -> tuple[int, str]:
        """The HTTP status and the one-line answer for a delivery (also logged, once)."""
        now = self.clock()
        try:
            delivery = verify_delivery(self._secret, headers, body, now=now, tolerance_s=self.tolerance_s)
            self.replays.hold(delivery.delivery_id, now)
        except WebhookRefused as exc:
            return self._answer(exc.status, f"refused: {exc}")
        try:
            status, message = self._route(delivery)
        except Exception as exc:  # noqa: BLE001 - any failure to pass it on is MLflow's cue to retry
            self.replays.release(delivery.delivery_id)
            return self._answer(503, f"delivery {delivery.delivery_id}: not passed to Airflow ({type(exc).__name__}: {exc}); "
                                     "MLflow retries it")
        if status >= 500:
            self.replays.release(delivery.delivery_id)
        return self._answer(status, message)

    def _route(self, d: Delivery) -> tuple[int, str]:
        model, alias, version = (str(d.data.get(k, "")) for k in ("name", "alias", "version"))
        what = f"delivery {d.delivery_id}: {d.entity}.{d.action} {echo(model)}@{echo(alias)} -> v{echo(version)}"
        if (d.entity, d.action) != ALIAS_CREATED:
            return 200, f"ignored: {what} (only {'.'.join(ALIAS_CREATED)} starts a release)"
        routes, named = match(self.routes(), model, alias)
        if not named:
            return 404, f"refused: {what}: no spec in releases/ names model {echo(model)}"
        if not routes:
            return 200, f"ignored: {what}: no spec waits on alias {echo(alias)} of this model"
        extra = {"source": "mlflow-webhook", "delivery_id": d.delivery_id, "model": model, "alias": alias,
                 "version": version}
        for route in routes:
            self.events.post(route, extra)
        return 202, f"accepted: {what}: Asset event for {', '.join(r.spec_name for r in routes)}"

    def _answer(self, status: int, message: str) -> tuple[int, str]:
        (log.info if status < 400 else log.warning)("webhook %d %s", status, message)
        return status, message


class AirflowAssetEvents:
    """Post Asset events through Airflow 3's REST API (``POST /api/v2/assets/events``).

    Args:
        api: returns a client with ``get(path)`` and ``post(path, body)`` (a fresh login each time is
            fine: events are rare, and a token never goes stale in a long-running receiver).
    """

    def __init__(self, api: Callable[[], Any]) -> None:
        self.api = api
        self._ids: dict[str, int] = {}

    def post(self, route: Route, extra: dict[str, Any]) -> None:
        client = self.api()
        body = {"asset_id": self._asset_id(client, route), "extra": extra}
        client.post("/api/v2/assets/events", body)

    def _asset_id(self, client: Any, route: Route) -> int:
        uri = route.asset_uri
        if uri not in self._ids:
            found = client.get(f"/api/v2/assets?limit=100&uri_pattern={urllib.parse.quote(uri, safe='')}")
            ids = [a["id"] for a in found.get("assets", []) if a.get("uri") == uri]
            if not ids:
                raise LookupError(f"Airflow has no Asset {uri}: DAG model_release__{route.spec_name} is not parsed yet "
                                  f"(or {route.spec_path} has no schedule DAG); it is, once the dag-processor read it")
            self._ids[uri] = int(ids[0])
        return self._ids[uri]


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?", 1)[0] != PATH:
            return self._send(404, f"no such path; MLflow's webhook URL ends in {PATH}")
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            return self._send(411, "a Content-Length header is required")
        if int(length) > MAX_BODY:
            return self._send(413, f"body of {length} bytes is over the {MAX_BODY} byte limit")
        status, message = self.server.receiver.handle(self.headers, self.rfile.read(int(length)))
        self._send(status, message)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, "ok") if self.path == "/health" else self._send(404, "no such path")

    def _send(self, status: int, text: str) -> None:
        data = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the receiver logs its own line
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, receiver: Receiver) -> None:
        super().__init__((HOST, port), _Handler)
        self.receiver = receiver


def serve(receiver: Receiver, port: int = 0) -> ThreadingHTTPServer:
    """Serve ``receiver`` on 127.0.0.1:``port`` (0: a free one) in a background thread; ``shutdown()`` stops it."""
    server = _Server(port, receiver)
    threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True).start()
    return server
