"""MLflow 3.17's webhook signature: check a delivery before anything reads its body.

MLflow (``mlflow/webhooks/delivery.py``) sends each delivery as a POST with JSON
``{"entity", "action", "timestamp", "data"}`` and three headers:

- ``X-MLflow-Delivery-Id``: a fresh UUID per delivery (urllib3's retries of one delivery repeat it);
- ``X-MLflow-Timestamp``: Unix seconds when it was sent;
- ``X-MLflow-Signature``: ``v1,`` + base64 of HMAC-SHA256(secret, ``f"{delivery_id}.{timestamp}.{body}"``).

A delivery is accepted only with a valid signature, a timestamp inside the tolerance window
(either side of now), and a delivery id not accepted before. The secret is never put in a message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..safe_text import echo

#: the headers MLflow sends (``mlflow.webhooks.constants``; a test checks they agree)
SIGNATURE_HEADER = "X-MLflow-Signature"
TIMESTAMP_HEADER = "X-MLflow-Timestamp"
DELIVERY_ID_HEADER = "X-MLflow-Delivery-Id"
SIGNATURE_VERSION = "v1"
#: how far a delivery's timestamp may be from the receiver's clock, either way (seconds)
DEFAULT_TOLERANCE_S = 300.0


class WebhookRefused(Exception):
    """A delivery was refused; ``status`` is the HTTP status to answer (4xx: MLflow does not retry)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Delivery:
    """A verified delivery: its id, when it was sent, and the event."""

    delivery_id: str
    timestamp: int
    entity: str
    action: str
    data: dict[str, Any]


def _header(headers: Any, name: str) -> str:
    value = headers.get(name)
    if not value:
        raise WebhookRefused(f"no {name} header; a delivery from MLflow carries it (is the webhook's secret set?)", 401)
    return str(value)


def verify_delivery(secret: str, headers: Any, body: bytes, *, now: float,
                    tolerance_s: float = DEFAULT_TOLERANCE_S) -> Delivery:
    """Check a delivery's signature and timestamp, then parse it.

    Args:
        secret: the webhook's shared secret.
        headers: the request's headers (anything with a case-insensitive ``get``).
        body: the raw request body, exactly as received.
        now: the receiver's clock (Unix seconds).
        tolerance_s: the largest accepted distance between the delivery's timestamp and ``now``.

    Returns:
        The delivery.

    Raises:
        WebhookRefused: a header is missing, the signature does not match, the timestamp is outside
            the window, or the body is not an MLflow event.
    """
    delivery_id = _header(headers, DELIVERY_ID_HEADER)
    stamp = _header(headers, TIMESTAMP_HEADER)
    given = _header(headers, SIGNATURE_HEADER)
    if not stamp.isdigit() or len(stamp) > 12:
        raise WebhookRefused(f"{TIMESTAMP_HEADER} {echo(stamp)} is not Unix seconds", 401)
    signed = b".".join([delivery_id.encode(), stamp.encode(), body])
    expected = base64.b64encode(hmac.new(secret.encode(), signed, hashlib.sha256).digest()).decode()
    version, _, value = given.partition(",")
    if version != SIGNATURE_VERSION or not hmac.compare_digest(value.encode(), expected.encode()):
        raise WebhookRefused(f"signature of delivery {echo(delivery_id)} does not match (expected a {SIGNATURE_VERSION} "
                             "HMAC-SHA256 with this receiver's secret); check that MLflow's webhook has the same secret", 401)
    skew = now - int(stamp)
    if abs(skew) > tolerance_s:
        raise WebhookRefused(f"delivery {echo(delivery_id)} is {'old' if skew > 0 else 'from the future'}: sent {abs(skew):.0f} s "
                             f"{'ago' if skew > 0 else 'ahead'}, outside the {tolerance_s:.0f} s window; check both clocks", 401)
    return _parse(delivery_id, int(stamp), body)


def _parse(delivery_id: str, stamp: int, body: bytes) -> Delivery:
    try:
        event = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise WebhookRefused(f"delivery {echo(delivery_id)} is not JSON", 400) from None
    if not isinstance(event, dict) or not isinstance(event.get("data"), dict):
        raise WebhookRefused(f"delivery {echo(delivery_id)} is not an MLflow event (no \"data\" object)", 400)
    return Delivery(delivery_id, stamp, str(event.get("entity", "")), str(event.get("action", "")), event["data"])


class ReplayGuard:
    """Delivery ids accepted within the last ``window_s`` seconds (older ones fail the timestamp check anyway).

    An id is *held* while its delivery is handled and *released* when handling failed, so MLflow's retry
    of a delivery that met an Airflow outage (same id, same signature) is accepted.
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def hold(self, delivery_id: str, now: float) -> None:
        """Remember ``delivery_id``; raises WebhookRefused (409) when it was accepted or is being handled."""
        with self._lock:
            while self._seen and next(iter(self._seen.values())) < now - 2 * self.window_s:
                self._seen.popitem(last=False)
            if delivery_id in self._seen:
                raise WebhookRefused(f"delivery {echo(delivery_id)} was received before: a replay", 409)
            self._seen[delivery_id] = now

    def release(self, delivery_id: str) -> None:
        """Forget ``delivery_id`` (its handling failed; a retry may come)."""
        with self._lock:
            self._seen.pop(delivery_id, None)
