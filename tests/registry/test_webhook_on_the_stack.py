"""On the stack ``model-release up`` starts: setting @candidate in MLflow starts the spec's DAG within
seconds, the run triggered by the receiver's Asset event; a forged delivery to the live receiver is refused.

Real services throughout: MLflow's server (which signs and sends the webhook itself), the receiver
as a stack service, Airflow's api-server, scheduler and dag-processor.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from model_release.local import procs
from model_release.local.http import AirflowApi
from tests.conftest import PROJECT

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # the whole `up` stack: 50 s inside make test

MODEL = "hooked-classifier"
DAG = "model_release__hooked"


def _spec_folder(tmp_path: Path) -> Path:
    """One spec, for a model of its own, with no time schedule: only the Asset event can start its DAG."""
    specs = tmp_path / "releases"
    specs.mkdir()
    text = (PROJECT / "releases" / "iris.yaml").read_text()
    text = text.replace("name: iris\n", "name: hooked\n").replace("name: iris-classifier", f"name: {MODEL}")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("schedule:"))
    (specs / "hooked.yaml").write_text(text + "\n")
    (specs / "iris-golden.npz").write_bytes((PROJECT / "releases" / "iris-golden.npz").read_bytes())
    return specs


def _env_file(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        if line.startswith("export ") and "=" in line and not line.startswith("export PATH="):
            name, _, value = line[len("export "):].partition("=")
            found[name] = shlex.split(value)[0]
    return found


_REGISTER = """
import sys
import mlflow
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

uri, model = sys.argv[1], sys.argv[2]
x, y = load_iris(return_X_y=True)
mlflow.set_tracking_uri(uri)
mlflow.set_registry_uri(uri)
mlflow.set_experiment("webhook-on-the-stack")
with mlflow.start_run():
    info = mlflow.sklearn.log_model(LogisticRegression(max_iter=200).fit(x, y), name="model",
                                    registered_model_name=model, input_example=x[:2].astype("float32"),
                                    pip_requirements=["scikit-learn"])
print(info.registered_model_version)
"""


def _register_a_version(tracking_uri: str) -> str:
    """Register a version in the stack's own MLflow, in a process of its own.

    mlflow's tracking and registry URIs and its active experiment are process-global (set_registry_uri
    even exports MLFLOW_REGISTRY_URI), and other tests of the same xdist worker set them: registered
    in this process, the version (and later the alias) could land in another test's registry, where
    no webhook is configured.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    done = subprocess.run([sys.executable, "-c", _REGISTER, tracking_uri, MODEL], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def _wait_for_run(api: AirflowApi, timeout: float, *, started: bool = False) -> dict:
    """The DAG's first run once it exists (``started``: once it also has a start date)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = api.get(f"/api/v2/dags/{DAG}/dagRuns?limit=10").get("dag_runs", [])
        if runs and (not started or runs[0].get("start_date")):
            return runs[0]
        time.sleep(0.5)
    what = "started run" if started else "run"
    raise AssertionError(f"no {what} of {DAG} within {timeout:.0f} s of setting @candidate")


def test_setting_candidate_starts_the_release_dag_through_the_asset_event(tmp_path: Path) -> None:
    root = tmp_path / "stack"
    env = {**os.environ, "MODEL_RELEASE_SPECS": str(_spec_folder(tmp_path)), "MODEL_RELEASE_STACK": str(root)}
    cli = [sys.executable, "-m", "model_release.cli"]
    try:
        up = subprocess.run([*cli, "up", "--detach", "--root", str(root), "--timeout", "600"], env=env, cwd=PROJECT,
                            capture_output=True, text=True, timeout=660)
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-3000:]
        stack = _env_file(root / "env")
        assert (root / "env").stat().st_mode & 0o077 == 0 and (root / "webhook.json").stat().st_mode & 0o077 == 0
        secret = stack["MODEL_RELEASE_WEBHOOK_SECRET"]
        api = AirflowApi(stack["AIRFLOW_URL"], stack["AIRFLOW_USERNAME"], stack["AIRFLOW_PASSWORD"])

        from mlflow import MlflowClient

        version = _register_a_version(stack["MLFLOW_TRACKING_URI"])
        assert api.get(f"/api/v2/dags/{DAG}/dagRuns").get("dag_runs") == [], "a new version alone starts nothing"
        t0 = time.monotonic()
        registry = MlflowClient(stack["MLFLOW_TRACKING_URI"], registry_uri=stack["MLFLOW_TRACKING_URI"])
        registry.set_registered_model_alias(MODEL, "candidate", version)
        run = _wait_for_run(api, timeout=60)
        started_s = time.monotonic() - t0
        assert run["run_type"] == "asset_triggered", run
        # Airflow 3.3's event list serialises each event's created runs with a required start_date, so
        # it answers 500 while the run is still queued (apache/airflow#71360): ask once it has started.
        run = _wait_for_run(api, timeout=120, started=True)
        run_id = urllib.parse.quote(run["dag_run_id"], safe="")
        events = api.get(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/upstreamAssetEvents")["asset_events"]
        assert [e["uri"] for e in events] == ["x-model-release://registry/hooked"], events
        extra = events[0]["extra"]
        assert (extra["source"], extra["model"], extra["alias"], extra["version"]) == (
            "mlflow-webhook", MODEL, "candidate", version), extra
        print(f"[webhook] @candidate set -> DAG run {run['dag_run_id']} created in {started_s:.1f} s")
        assert started_s < 30, f"the run started {started_s:.1f} s after the alias moved"

        # a forged delivery to the live receiver: refused, and no second run
        body = json.dumps({"entity": "model_version_alias", "action": "created",
                           "data": {"name": MODEL, "alias": "candidate", "version": version}}).encode()
        req = urllib.request.Request(stack["MODEL_RELEASE_WEBHOOK_URL"], data=body, method="POST", headers={
            "Content-Type": "application/json", "X-MLflow-Delivery-Id": "forged-1",
            "X-MLflow-Timestamp": str(int(time.time())), "X-MLflow-Signature": "v1,Zm9yZ2Vk"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        assert refused.value.code == 401
        time.sleep(3)
        assert len(api.get(f"/api/v2/dags/{DAG}/dagRuns").get("dag_runs")) == 1
        log = (root / "logs" / "webhook-receiver.log").read_text()
        assert "webhook 202 accepted" in log and "webhook 401 refused" in log and secret not in log
    finally:
        down = subprocess.run([*cli, "down", "--root", str(root)], env=env, cwd=PROJECT, capture_output=True, text=True,
                              timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    saved = json.loads((root / "stack.json").read_text())
    assert procs.marked(saved["stack_id"]) == []
