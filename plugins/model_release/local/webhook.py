"""The local stack's registry webhook: MLflow signs alias events to a receiver that starts releases.

``model-release up`` keeps ``webhook.json`` (mode 0600) in the stack folder: the receiver's port,
the shared secret, and the key MLflow's server encrypts webhook secrets with (one key for the
stack's lifetime, so a restarted MLflow can still sign). It then

1. starts MLflow's server with the settings a receiver on 127.0.0.1 needs
   (:func:`model_release.registry_events.wiring.server_env`);
2. once MLflow answers, registers (or updates) the ``model-release`` webhook in MLflow for
   ``model_version_alias.created`` (while Airflow is still starting: MLflow calls the receiver only
   on an alias event, and ``up`` is not ready before the receiver answers);
3. starts ``model-release webhook-receiver`` as the ``webhook-receiver`` service beside Airflow's
   (its secret and the Airflow login in its environment, never on its command line); it posts to
   Airflow only when a delivery comes, and ``up`` is ready once both answer;
4. adds ``MODEL_RELEASE_WEBHOOK_SECRET`` and ``MODEL_RELEASE_WEBHOOK_URL`` to the env file.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..registry_events.wiring import SECRET_ENV, new_secret, receiver_url, register_webhook, server_env
from .ports import free_port
from .services import Service
from .stack_folder import HOST, Layout, port_free, write_private

SERVICE = "webhook-receiver"


@dataclass(frozen=True)
class Wiring:
    """What stays the same across restarts: the receiver's port, the secret, MLflow's encryption key."""

    port: int
    secret: str
    encryption_key: str

    @property
    def url(self) -> str:
        return receiver_url(self.port)


def _wiring_file(layout: Layout) -> Path:
    return layout.root / "webhook.json"


def saved_port(layout: Layout) -> int:
    """The receiver's port as last saved (0 before the first start); unlike :func:`wiring`, nothing is picked or written."""
    return int((layout.read_json(_wiring_file(layout)) or {}).get("port") or 0)


def wiring(layout: Layout) -> Wiring:
    """The saved wiring (a new port when the old one is taken), created on the first start; saved mode 0600."""
    path = _wiring_file(layout)
    saved = layout.read_json(path) or {}
    port = int(saved.get("port") or 0)
    if not port or not port_free(port):
        port = free_port(HOST)
    found = Wiring(port, str(saved.get("secret") or new_secret()),
                   str(saved.get("encryption_key") or base64.urlsafe_b64encode(os.urandom(32)).decode()))
    write_private(path, json.dumps({"port": found.port, "secret": found.secret,
                                    "encryption_key": found.encryption_key}) + "\n")
    return found


def mlflow_env(found: Wiring) -> dict[str, str]:
    """The MLflow server's environment for webhooks to the local receiver."""
    return server_env(found.encryption_key)


def receiver_service(layout: Layout, found: Wiring) -> Service:
    """The receiver as a stack service; Airflow's URL and user come from the stack's environment."""
    return Service(SERVICE, [sys.executable, "-m", "model_release.cli", "webhook-receiver", "--port", str(found.port)],
                   found.url, {SECRET_ENV: found.secret, "AIRFLOW_PASSWORD": layout.airflow_password()})


def register(tracking_uri: str, found: Wiring) -> str:
    """Register the webhook in MLflow (idempotent); returns its id."""
    return register_webhook(tracking_uri, found.url, found.secret)


def add_to_env_file(layout: Layout, found: Wiring) -> None:
    """Append the webhook's URL and secret to the env file (which stays mode 0600)."""
    text = layout.env_file.read_text() if layout.env_file.exists() else ""
    lines = [f"export MODEL_RELEASE_WEBHOOK_URL={found.url}", f"export {SECRET_ENV}={found.secret}"]
    write_private(layout.env_file, text + "\n".join(lines) + "\n")
