"""The whole release DAG on real components: MLflow (SQLite), the moto S3 server, the local Triton, Airflow.

Two releases run through ``airflow dags test``; then the store is read back over HTTP and checked
against the manifest, the canary report and MLflow's aliases.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import mlflow
import pytest

from model_release.demo import train_iris
from model_release.workspace import new_release_id

from .conftest import StoreView

pytestmark = [pytest.mark.integration, pytest.mark.dags, pytest.mark.slow]

SECRET = "moto-local-secret"


def test_two_releases_through_the_dag(stack) -> None:
    store = StoreView(stack, "iris")
    first_version = train_iris(stack.tracking_uri, c=1.0)
    first = new_release_id("iris")
    run = stack.run_dag({"spec": "releases/iris.yaml", "release_id": first})
    assert run.returncode == 0, run.output[-5000:]

    pointer = store.json("channels/production.json")
    assert pointer is not None and pointer["release_id"] == first

    manifest = store.json(f"releases/{first}/release.json")
    assert manifest["format_version"] == 1
    assert manifest["model"]["name"] == "iris-classifier" and str(manifest["model"]["version"]) == first_version
    assert manifest["canary"]["passed"] is True
    files = manifest["files"]
    assert any(k.startswith("models/iris/") for k in files), files.keys()
    assert any(k.endswith("model.onnx") for k in files)
    for key, meta in files.items():  # every object in the store is byte-for-byte the manifest's
        assert store.sha256(f"releases/{first}/{key}") == meta["sha256"], key

    report = store.json(f"releases/{first}/reports/report.json")
    assert report["passed"] is True
    # the ensemble itself answered every golden row in the canary
    assert report["entry_model"] == "iris"
    assert report["golden"]["rows"] == 150 and report["timing"]["rows"] == 150
    assert report["timing"]["requests"] >= 150 / 16
    assert report["server"]["models_loaded"]["iris"] == ["1"]
    assert report["server"]["shimmed_models"], "the report says plainly which models ran through the CPU shim"
    assert report["parity"]["label"]["agreement"] == 1.0

    client = mlflow.MlflowClient(tracking_uri=stack.tracking_uri)
    assert str(client.get_model_version_by_alias("iris-classifier", "production").version) == first_version

    # a better retrain: the canary serves it beside the first release, fetched from the store, and judges both
    second_version = train_iris(stack.tracking_uri, c=10.0)
    second = new_release_id("iris")
    run2 = stack.run_dag({"spec": "releases/iris.yaml", "release_id": second})
    assert run2.returncode == 0, run2.output[-5000:]
    pointer = store.json("channels/production.json")
    assert pointer["release_id"] == second
    report2 = store.json(f"releases/{second}/reports/report.json")
    assert report2["champion"]["kind"] == "served" and report2["champion"]["release_id"] == first
    assert report2["server"]["models_loaded"]["iris__champion"] == ["1"]
    quality = report2["quality"]
    assert quality["candidate"]["accuracy"] > quality["champion"]["accuracy"]
    # the champion served now scores what its own release's report recorded on the same golden set
    assert quality["champion"] == report["quality"]["candidate"]
    assert report2["shift"]["agreement"] >= 0.9
    assert store.json(f"releases/{second}/release.json")["canary"]["champion"] == {"release_id": first, "kind": "served"}
    assert str(client.get_model_version_by_alias("iris-classifier", "production").version) == second_version
    # the first release is still there, whole and unchanged
    assert store.json(f"releases/{first}/release.json") == manifest

    # credentials never reach the logs
    assert SECRET not in run.output and SECRET not in run2.output

    # each promotion emitted an event on the channel's Asset, naming the release, for downstream DAGs
    with sqlite3.connect(stack.airflow_home / "airflow.db") as db:
        events = [json.loads(extra) for (extra,) in db.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE a.name = 'model_release_channel_production' ORDER BY e.timestamp")]
    assert [e["release_id"] for e in events] == [first, second]
    assert events[-1]["prefix"].endswith(f"/releases/{second}/")

    # and the release engineer can take it back: the channel and the MLflow alias return to the first
    from model_release.local.s3 import _MOTO_KEY_ID, _MOTO_SECRET

    env = {**stack.env(), "AWS_ENDPOINT_URL": stack.endpoint_url, "AWS_ACCESS_KEY_ID": _MOTO_KEY_ID,
           "AWS_SECRET_ACCESS_KEY": _MOTO_SECRET, "AWS_DEFAULT_REGION": "us-east-1"}
    proc = subprocess.run(
        [sys.executable, "-m", "model_release.cli", "rollback", "--store", "s3://model-store/iris",
         "--channel", "production", "--mlflow-tracking-uri", stack.tracking_uri],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["to_release"] == first
    assert store.json("channels/production.json")["release_id"] == first
    assert str(client.get_model_version_by_alias("iris-classifier", "production").version) == first_version
    assert _MOTO_SECRET not in proc.stdout + proc.stderr


def test_bad_input_fails_the_dag_at_once_without_retries(stack) -> None:
    run = stack.run_dag({"spec": "releases/no-such-spec.yaml"})
    assert run.returncode != 0 and run.state == "failed"
    assert "no-such-spec.yaml' does not exist" in run.output
    assert "up_for_retry" not in run.output.lower()
