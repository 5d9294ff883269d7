"""A terminal's ``model-release release`` and a DAG run of the same version, started together fifty times.

Each trial races the two entry points' claim steps as they run, against the moto S3 server over
HTTP and a real MLflow registry (SQLite): the CLI's (:func:`model_release.pipeline.claim_release`,
what ``release`` does before its first stage, with the CLI's own store and holder) and the DAG's
start task (:func:`model_release.airflow.tasks.start`, through Airflow's connections). Exactly one
claims the version each time and goes on (here its promotion is recorded in the ledger as its
``finish`` would); the other ends with the one "held by" line naming the winner and when it
started: the CLI with exit code 6, the DAG run skipped. No ledger entry is left claimed.

The whole pipeline, once, with the real CLI in a process of its own and a version whose alias moves
meanwhile, is tests/registry/test_claimed_release.py.
"""

from __future__ import annotations

import json
import random
import threading
import time
from datetime import datetime, timezone

import pytest
import yaml

from model_release.errors import ClaimHeld
from model_release.local.moto_process import _MOTO_KEY_ID, _MOTO_SECRET, ensure_bucket
from model_release.local.stack import connection_env
from model_release.pipeline import Services, claim_release
from model_release.spec import load_spec
from model_release.store import ledger, open_store
from model_release.workspace import Workspace, new_release_id

from ..dag_spec import write_dag_spec

pytestmark = pytest.mark.integration

TRIALS = 50
MODEL, CHANNEL, BUCKET, PREFIX = "iris-classifier", "production", "claim-race", "race"


@pytest.fixture
def stack(tmp_path, moto, monkeypatch):
    """The moto S3 bucket, an MLflow registry holding version 1 of the model, and the environment both
    entry points read: Airflow's connections for the DAG's start, the S3 endpoint for the CLI."""
    from mlflow import MlflowClient

    ensure_bucket(moto.endpoint_url, BUCKET)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.create_registered_model(MODEL)
    client.create_model_version(MODEL, source=str(tmp_path), run_id=None)
    for key, value in {**connection_env(uri, moto.endpoint_url), "MODEL_RELEASE_S3_ENDPOINT_URL": moto.endpoint_url,
                       "AWS_ACCESS_KEY_ID": _MOTO_KEY_ID, "AWS_SECRET_ACCESS_KEY": _MOTO_SECRET,
                       "AWS_DEFAULT_REGION": "us-east-1", "MODEL_RELEASE_WORKSPACE": str(tmp_path / "dag-ws")}.items():
        monkeypatch.setenv(key, value)
    path = write_dag_spec(tmp_path / "specs")
    data = yaml.safe_load(path.read_text())
    data["promote"]["store"] = f"s3://{BUCKET}/{PREFIX}"
    path.write_text(yaml.safe_dump(data))
    return uri, path


def _cli(uri, path, ws_root, outcome, barrier, delay):
    """The CLI's claim step: what ``model-release release SPEC --version 1`` does before its first stage."""
    spec = load_spec(path, overrides={"model.version": 1})
    ws = Workspace(new_release_id(spec.name), ws_root)
    barrier.wait()
    time.sleep(delay)
    started = time.perf_counter()
    try:
        candidate, claim = claim_release(spec, ws, Services(tracking_uri=uri))
        outcome["cli"] = claim
    except ClaimHeld as exc:
        outcome["cli"] = exc
    outcome["cli_s"] = time.perf_counter() - started


def _dag(path, run_id, outcome, barrier, delay):
    """The DAG's start task, as the manual DAG runs it for ``{"spec": ..., "version": 1}``."""
    from airflow.sdk.exceptions import AirflowSkipException

    from model_release.airflow import tasks

    barrier.wait()
    time.sleep(delay)
    started = time.perf_counter()
    try:
        outcome["dag"] = tasks.start({"spec": str(path), "version": 1}, run_id, datetime.now(timezone.utc),
                                     run={"dag_id": "model_release"}, is_active=lambda run: True)
    except AirflowSkipException as exc:
        outcome["dag"] = exc
    outcome["dag_s"] = time.perf_counter() - started


@pytest.mark.slow  # about a second a trial on two cores: its file goes to a worker early
def test_a_cli_release_and_a_dag_run_of_one_version_race_fifty_times(stack, tmp_path) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    uri, path = stack
    store = open_store(f"s3://{BUCKET}/{PREFIX}")
    rng = random.Random(41)
    wins = {"cli": 0, "dag": 0}
    gap = 0.0  # how much longer the DAG's start takes to reach the ledger than the CLI's, as last measured
    for trial in range(TRIALS):
        outcome: dict[str, object] = {}
        barrier = threading.Barrier(2)
        run_id = f"manual__race-{trial:02d}"
        # the faster side waits out the gap, give or take 100 ms: which one reaches the ledger first is left to chance
        jitter = rng.uniform(-0.1, 0.1)
        threads = [threading.Thread(target=_cli, args=(uri, path, tmp_path / "cli-ws", outcome, barrier, max(0.0, gap + jitter))),
                   threading.Thread(target=_dag, args=(path, run_id, outcome, barrier, max(0.0, -gap - jitter)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        gap = 0.5 * gap + 0.5 * (float(outcome["dag_s"]) - float(outcome["cli_s"]))
        entry = ledger.read_entry(store, CHANNEL, MODEL, "1")[0]
        assert entry["state"] == ledger.CLAIMED, (trial, outcome)
        cli, dag = outcome["cli"], outcome["dag"]
        if isinstance(dag, dict):  # the DAG run claimed: the CLI is held, naming it
            assert isinstance(cli, ClaimHeld), (trial, cli)
            assert cli.exit_code == 6 and "\n" not in str(cli)
            assert f"is held by run {run_id!r} of DAG 'model_release', started {entry['started_at']}" in str(cli)
            winner, release_id, run = "dag", dag["release_id"], dag["run"]
            assert dag["claim"]["version"] == "1" and dag["claim"]["candidate"]["version"] == "1"
        else:  # the CLI claimed: the DAG run is skipped with the same line, naming the terminal's process
            assert isinstance(dag, AirflowSkipException) and not isinstance(cli, Exception), (trial, outcome)
            assert f"is held by run {cli.run['run_id']!r}, started {entry['started_at']}" in str(dag), str(dag)
            winner, release_id, run = "cli", cli.release_id, cli.run
        assert entry["release_id"] == release_id
        wins[winner] += 1
        # the winner goes on and promotes; its finish records that
        assert ledger.settle(store, CHANNEL, MODEL, "1", release_id=release_id, run=run, state=ledger.RELEASED) is not None
    assert wins["cli"] and wins["dag"], f"one entry point won every trial {wins}: the race was never run"
    print(f"{TRIALS} trials: the CLI claimed {wins['cli']} times, the DAG run {wins['dag']}; last gap {gap:.3f} s")
    states = [json.loads(o["Body"].read())["state"] for o in _ledger_objects(store)]
    assert states == [ledger.RELEASED], states  # one entry, settled: none left claimed


def _ledger_objects(store):
    s3 = store.backend.client
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/ledger/").get("Contents", [])]
    return [s3.get_object(Bucket=BUCKET, Key=k) for k in keys]
