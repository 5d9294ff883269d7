"""MLflow registry webhooks in, Airflow Asset events out: a release starts seconds after an alias moves.

::

    MLflow registry ──(webhook: model_version_alias.created, HMAC-signed)──► receiver (127.0.0.1)
        signature.py   verify the HMAC and the timestamp window; refuse a delivery id seen before
        routes.py      which spec names the model and alias: the Asset its scheduled DAG waits on
        receiver.py    one decision per delivery, one log line; POST /api/v2/assets/events to Airflow
        wiring.py      register the webhook in MLflow (idempotent), the MLflow server's settings

Nothing here imports airflow. The scheduled DAG (``dags/model_release_scheduled.py``) runs on the
Asset event *or* its time schedule (Airflow's ``AssetOrTimeSchedule``), so the schedule stays the
fallback when a webhook is lost. Duplicate events (MLflow's retries, two aliases set at once) may
start more than one run; the channel's ledger lets exactly one of them claim the version.
"""

from __future__ import annotations

from .receiver import AirflowAssetEvents, Receiver, serve
from .routes import Route, asset_name, asset_uri, routes_from_specs
from .signature import Delivery, ReplayGuard, WebhookRefused, verify_delivery

__all__ = [
    "AirflowAssetEvents", "Delivery", "Receiver", "ReplayGuard", "Route", "WebhookRefused", "asset_name",
    "asset_uri", "routes_from_specs", "serve", "verify_delivery",
]
