"""The registry webhook receiver over real HTTP on 127.0.0.1, deliveries signed by MLflow's own code.

A delivery is accepted only when signed with the secret, inside the timestamp window, and new;
it becomes one Asset event per spec that names model@alias. The events go to a recording fake
(Airflow's side is the integration test's).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from model_release.store import ledger
from model_release.registry_events import Receiver, Route, routes_from_specs, serve
from model_release.registry_events import signature as sig
from model_release.store import open_store
from tests.conftest import PROJECT

SECRET = "s3cr3t-" + "x" * 24
NOW = 1_800_000_000.0
TOLERANCE = 300.0


class Recorder:
    """Stands in for Airflow's asset-event endpoint; ``fail`` makes the next posts raise."""

    def __init__(self) -> None:
        self.posted: list[tuple[Route, dict[str, Any]]] = []
        self.fail = 0

    def post(self, route: Route, extra: dict[str, Any]) -> None:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("Airflow at http://127.0.0.1:9 did not answer")
        self.posted.append((route, extra))


@pytest.fixture
def receiver():
    events = Recorder()
    clock = {"now": NOW}
    rec = Receiver(SECRET, lambda: routes_from_specs(PROJECT / "releases"), events, tolerance_s=TOLERANCE,
                   clock=lambda: clock["now"])
    server = serve(rec)
    yield f"http://127.0.0.1:{server.server_address[1]}/webhook", events, clock
    server.shutdown()
    server.server_close()


def _delivery(name="iris-classifier", alias="candidate", version="7", *, secret=SECRET, stamp=NOW,
              delivery_id=None, entity="model_version_alias", action="created"):
    """Body and headers exactly as MLflow 3.17's delivery code builds and signs them."""
    from mlflow.webhooks.delivery import _generate_hmac_signature

    body = json.dumps({"entity": entity, "action": action, "timestamp": "2027-01-15T08:00:00+00:00",
                       "data": {"name": name, "alias": alias, "version": version}})
    delivery_id = delivery_id or str(uuid.uuid4())
    headers = {"Content-Type": "application/json", sig.DELIVERY_ID_HEADER: delivery_id,
               sig.TIMESTAMP_HEADER: str(int(stamp)),
               sig.SIGNATURE_HEADER: _generate_hmac_signature(secret, delivery_id, str(int(stamp)), body)}
    return body.encode(), headers


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_receiver_reads_the_headers_mlflow_sends() -> None:
    from mlflow.webhooks import constants

    assert (sig.SIGNATURE_HEADER, sig.TIMESTAMP_HEADER, sig.DELIVERY_ID_HEADER, sig.SIGNATURE_VERSION) == (
        constants.WEBHOOK_SIGNATURE_HEADER, constants.WEBHOOK_TIMESTAMP_HEADER, constants.WEBHOOK_DELIVERY_ID_HEADER,
        constants.WEBHOOK_SIGNATURE_VERSION)


def test_a_signed_alias_event_becomes_one_asset_event_for_the_spec_that_names_it(receiver, caplog) -> None:
    url, events, _ = receiver
    body, headers = _delivery()
    with caplog.at_level(logging.INFO, logger="model_release.registry_events"):
        status, text = _post(url, body, headers)
    assert status == 202, text
    assert [(r.spec_name, r.asset_uri) for r, _ in events.posted] == [("iris", "x-model-release://registry/iris")]
    extra = events.posted[0][1]
    assert extra == {"source": "mlflow-webhook", "delivery_id": headers[sig.DELIVERY_ID_HEADER],
                     "model": "iris-classifier", "alias": "candidate", "version": "7"}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("webhook 202 accepted") and SECRET not in lines[0]


def test_a_forged_signature_is_refused_and_the_secret_is_never_echoed(receiver, caplog) -> None:
    url, events, _ = receiver
    body, headers = _delivery(secret="not-the-secret")
    with caplog.at_level(logging.INFO, logger="model_release.registry_events"):
        status, text = _post(url, body, headers)
    assert status == 401 and "signature of delivery" in text and "does not match" in text
    assert events.posted == []
    assert SECRET not in text and all(SECRET not in r.getMessage() for r in caplog.records)
    assert len(caplog.records) == 1 and caplog.records[0].levelno == logging.WARNING
    # a body altered after signing is forged too
    body, headers = _delivery()
    status, _ = _post(url, body.replace(b'"7"', b'"8"'), headers)
    assert status == 401 and events.posted == []
    # and a delivery without a signature (a webhook registered without the secret)
    body, headers = _delivery()
    del headers[sig.SIGNATURE_HEADER]
    status, text = _post(url, body, headers)
    assert status == 401 and "no X-MLflow-Signature header" in text


@pytest.mark.parametrize("offset,accepted", [(TOLERANCE, True), (TOLERANCE + 1, False), (-TOLERANCE, True),
                                             (-TOLERANCE - 1, False)])
def test_the_timestamp_window_is_inclusive_at_its_edge(receiver, offset, accepted) -> None:
    url, events, _ = receiver
    body, headers = _delivery(stamp=NOW - offset)
    status, text = _post(url, body, headers)
    if accepted:
        assert status == 202, text
    else:
        assert status == 401 and f"outside the {TOLERANCE:.0f} s window" in text
        assert ("old" in text) == (offset > 0)
        assert events.posted == []


def test_a_replayed_delivery_is_refused(receiver) -> None:
    url, events, clock = receiver
    body, headers = _delivery()
    assert _post(url, body, headers)[0] == 202
    clock["now"] += 60  # still inside the window: only the delivery id gives the replay away
    status, text = _post(url, body, headers)
    assert status == 409 and "received before: a replay" in text
    assert len(events.posted) == 1


def test_an_unknown_model_is_refused_and_an_alias_no_spec_waits_on_is_ignored(receiver, caplog) -> None:
    url, events, _ = receiver
    with caplog.at_level(logging.INFO, logger="model_release.registry_events"):
        status, text = _post(url, *_delivery(name="someone-elses-model"))
    assert status == 404 and "no spec in releases/ names model 'someone-elses-model'" in text
    assert len(caplog.records) == 1 and "someone-elses-model" in caplog.records[0].getMessage()
    status, text = _post(url, *_delivery(alias="production"))  # promote moving @production is no new candidate
    assert status == 200 and "no spec waits on alias 'production'" in text
    status, text = _post(url, *_delivery(entity="model_version_alias", action="deleted"))
    assert status == 200 and text.startswith("ignored")
    assert events.posted == []


def test_an_airflow_outage_answers_503_and_mlflows_retry_of_that_delivery_goes_through(receiver) -> None:
    url, events, _ = receiver
    body, headers = _delivery()
    events.fail = 1
    status, text = _post(url, body, headers)
    assert status == 503 and "not passed to Airflow" in text and "MLflow retries it" in text
    assert _post(url, body, headers)[0] == 202  # urllib3's retry repeats the delivery id and the signature
    assert len(events.posted) == 1


def test_a_burst_of_duplicate_events_makes_one_release(receiver, tmp_path) -> None:
    """Webhook retries and two aliases set at once reach Airflow as several events, and may start several
    runs; each run's start claims the version in the channel's ledger, and exactly one claim wins."""
    url, events, _ = receiver
    for _ in range(6):  # six deliveries of one alias move: distinct ids, so none is a replay
        assert _post(url, *_delivery(version="7"))[0] == 202
    assert len(events.posted) == 6
    store = open_store((tmp_path / "store").as_uri())
    decisions: list[ledger.Decision] = []
    barrier = threading.Barrier(len(events.posted))

    def start(n: int, extra: dict[str, Any]) -> None:  # what tasks.start does with the event's model and version
        barrier.wait()
        decisions.append(ledger.claim(store, "production", extra["model"], extra["version"], release_id=f"iris-{n}",
                                      run={"dag_id": "model_release__iris", "run_id": f"asset_triggered__{n}"}))

    threads = [threading.Thread(target=start, args=(n, extra)) for n, (_, extra) in enumerate(events.posted)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(d.go for d in decisions) == [False] * 5 + [True]
    assert all("two runs never release one version" in d.reason for d in decisions if not d.go)
    assert ledger.read_entry(store, "production", "iris-classifier", "7")[0]["state"] == ledger.CLAIMED


def test_an_empty_secret_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="the webhook secret is empty; set MODEL_RELEASE_WEBHOOK_SECRET"):
        Receiver("", lambda: [], Recorder())


def test_the_body_limit_and_the_path(receiver) -> None:
    url, _, _ = receiver
    status, text = _post(url.replace("/webhook", "/other"), *_delivery())
    assert status == 404 and "ends in /webhook" in text
    status, text = _post(url, b"x" * (64 * 1024 + 1), {"Content-Type": "application/json"})
    assert status == 413


def test_the_scheduled_dag_runs_on_the_receivers_asset_or_its_time_schedule() -> None:
    from datetime import timedelta

    from airflow.sdk import AssetOrTimeSchedule

    from model_release.airflow.dags import release_schedule

    cron = release_schedule("iris", "@daily")
    assert isinstance(cron, AssetOrTimeSchedule)
    assert [a.uri for a in cron.asset_condition.objects] == [Route("iris", "m", "a", "p").asset_uri]
    assert isinstance(release_schedule("iris", timedelta(hours=6)), AssetOrTimeSchedule)
    assert [a.uri for a in release_schedule("iris", None)] == ["x-model-release://registry/iris"]
