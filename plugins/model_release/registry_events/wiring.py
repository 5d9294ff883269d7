"""Wiring the receiver: the webhook registered in MLflow, the MLflow server's settings, the process.

MLflow 3.17 refuses, by default, a webhook URL that is not https or that points at a private
address (its SSRF guard checks at registration and again at connect time): a receiver on the
same machine needs ``MLFLOW_WEBHOOK_ALLOWED_SCHEMES=http,https`` and
``MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS=true`` on the MLflow *server*. The server encrypts each
webhook's secret with ``MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY``; without one it draws a key per
process, and after a restart it can no longer sign: keep one key for the server's lifetime.
"""

from __future__ import annotations

import logging
import secrets
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ServiceUnavailable
from .receiver import PATH, AirflowAssetEvents, Receiver, serve
from .routes import routes_from_specs

log = logging.getLogger(__name__)

#: the name of the webhook ``register_webhook`` keeps in MLflow
WEBHOOK_NAME = "model-release"
#: the events the receiver acts on
EVENTS = ["model_version_alias.created"]
#: where the receiver process reads its secret (never from the command line: ``ps`` shows that)
SECRET_ENV = "MODEL_RELEASE_WEBHOOK_SECRET"


def new_secret() -> str:
    """A fresh shared secret for a webhook."""
    return secrets.token_urlsafe(32)


def server_env(encryption_key: str, *, cache_ttl_s: int = 5) -> dict[str, str]:
    """The MLflow server's environment for webhooks to a receiver on 127.0.0.1 (see the module docstring)."""
    return {"MLFLOW_WEBHOOK_ALLOWED_SCHEMES": "http,https", "MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS": "true",
            "MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY": encryption_key, "MLFLOW_WEBHOOK_CACHE_TTL": str(cache_ttl_s)}


def receiver_url(port: int) -> str:
    return f"http://127.0.0.1:{port}{PATH}"


def register_webhook(tracking_uri: str, url: str, secret: str, *, name: str = WEBHOOK_NAME) -> str:
    """Create MLflow's webhook for ``url``, or update the one named ``name`` (URL, events, secret, active).

    Returns:
        The webhook's id.

    Raises:
        ServiceUnavailable: MLflow refused or did not answer (the message names the server, never the secret).
    """
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    try:
        existing = [w for w in client.list_webhooks(max_results=100) if w.name == name]
        if existing:
            hook = client.update_webhook(existing[0].webhook_id, url=url, events=EVENTS, secret=secret, status="ACTIVE")
        else:
            hook = client.create_webhook(name, url, EVENTS, description="starts model-release runs", secret=secret)
    except MlflowException as exc:
        raise ServiceUnavailable(
            f"MLflow at {tracking_uri} did not register webhook {name!r} for {url}: {exc.message}. A receiver on "
            "127.0.0.1 needs MLFLOW_WEBHOOK_ALLOWED_SCHEMES=http,https and MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS=true on the server"
        ) from exc
    return str(hook.webhook_id)


def run_receiver(*, port: int, specs: Path, secret: str, api: Callable[[], Any], tolerance_s: float) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit code."""
    receiver = Receiver(secret, lambda: routes_from_specs(specs), AirflowAssetEvents(api), tolerance_s=tolerance_s)
    try:
        server = serve(receiver, port)
    except OSError as exc:
        raise ServiceUnavailable(f"webhook receiver: cannot listen on 127.0.0.1:{port} ({exc}); pick a free port") from exc
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("webhook receiver listening on %s; specs in %s", receiver_url(server.server_address[1]), specs)
    while not stop.wait(1.0):
        pass
    server.shutdown()
    return 0
