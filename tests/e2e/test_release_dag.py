"""The whole release DAG on real components: MLflow (SQLite), the moto S3 server, the local Triton, Airflow.

Two releases run as ``airflow dags test`` runs them (``dag.test()``); then the store is read back
over HTTP and checked against the manifest, the canary report and MLflow's aliases. Then the spec's
scheduled DAG: a run with nothing new, a rejected version and a run after it, and a rollback. These
runs share one Airflow process (:meth:`EmbeddedStack.dag_session`), which pays Airflow's start-up
once instead of per run (about 25 s each on two cores); bad input goes through the
``airflow dags test`` command itself.

The spec is releases/iris.yaml without the canary's load phase, tuning and expectations
(tests/dag_spec.py): these tests are about Airflow, not latency. Its folder is the one the scheduled
DAGs are generated from (``MODEL_RELEASE_SPECS``).
"""

from __future__ import annotations

import json
import sqlite3

import mlflow
import pytest

from model_release.local.demo import train_iris
from model_release.workspace import new_release_id

from ..dag_spec import write_dag_spec
from .conftest import StoreView

pytestmark = [pytest.mark.integration, pytest.mark.dags, pytest.mark.slow]

SECRET = "moto-local-secret"


@pytest.fixture(scope="module", autouse=True)
def spec(tmp_path_factory):
    """The DAG tests' spec, and its folder as the one the scheduled DAGs are generated from."""
    path = write_dag_spec(tmp_path_factory.mktemp("specs"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MODEL_RELEASE_SPECS", str(path.parent))  # the stack's `airflow dags test` inherits it
        yield str(path)


@pytest.fixture(scope="module")
def dags(stack, spec):
    """One Airflow process for the module's DAG runs (started after MODEL_RELEASE_SPECS is set)."""
    with stack.dag_session() as session:
        yield session


def test_two_releases_through_the_dag(stack, dags, spec) -> None:
    store = StoreView(stack, "iris")
    first_version = train_iris(stack.tracking_uri, c=1.0)
    first = new_release_id("iris")
    run = dags.run({"spec": spec, "release_id": first})
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
    assert report["golden"]["rows"] == 100 and report["timing"]["rows"] == 100  # the held-out rows of iris-golden.npz
    assert report["timing"]["requests"] >= 100 / 16
    assert report["server"]["models_loaded"]["iris"] == ["1"]
    assert report["server"]["shimmed_models"], "the report says plainly which models ran through the CPU shim"
    assert report["parity"]["label"]["agreement"] == 1.0

    client = mlflow.MlflowClient(tracking_uri=stack.tracking_uri)
    assert str(client.get_model_version_by_alias("iris-classifier", "production").version) == first_version

    # a better retrain: the canary serves it beside the first release, fetched from the store, and judges both
    second_version = train_iris(stack.tracking_uri, c=10.0)
    second = new_release_id("iris")
    run2 = dags.run({"spec": spec, "release_id": second, "workspace": "s3://model-store/workspaces"})
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

    # the manifest names the run that made the release, down to the pipeline's code
    run_record = store.json(f"releases/{second}/release.json")["run"]
    assert run_record["dag_id"] == "model_release" and run_record["run_id"]
    assert "bundle_name" in run_record and "bundle_version" in run_record and len(run_record["code_digest"]) == 16
    # the second release went through a workspace in the object store: every stage was published there
    published = {k.split("/")[1] for k in StoreView(stack, "workspaces").keys(f"{second}/") if k.endswith(".published.json")}
    assert {"intake", "export", "tensorrt", "repository", "canary", "promote"} <= published

    DONE.update(first=first, second=second, first_version=first_version)


#: what the first test released, for the second (the two run in order on one embedded stack)
DONE: dict[str, str] = {}


def test_the_schedule_skips_what_is_not_new_and_never_retries_a_rejected_version_then_a_rollback(stack, dags, spec) -> None:
    if not DONE:
        pytest.skip("needs the two releases of test_two_releases_through_the_dag")
    first, second, first_version = DONE["first"], DONE["second"], DONE["first_version"]
    store = StoreView(stack, "iris")
    client = mlflow.MlflowClient(tracking_uri=stack.tracking_uri)

    # the scheduled DAG of the spec finds nothing new (the candidate is what production serves): every task skipped
    before = _snapshot(store, client)
    nothing = dags.run({}, dag_id="model_release__iris")
    assert nothing.returncode == 0, nothing.output[-5000:]
    assert _states(stack, "model_release__iris") == {t: "skipped" for t in RELEASE_TASKS}
    assert "nothing to release: channel 'production' released iris-classifier v" in nothing.output
    assert _snapshot(store, client) == before, "a skipped run touches neither the store nor MLflow"

    # a degraded retrain: the scheduled run judges it and the canary rejects it; the next run does not try it again
    bad_version = train_iris(stack.tracking_uri, c=1.0, noise=0.4)
    rejected = dags.run({}, dag_id="model_release__iris")
    assert rejected.returncode != 0 and rejected.state == "failed", rejected.output[-3000:]
    entry = store.json(f"ledger/production/iris-classifier/{bad_version}.json")
    assert entry["state"] == "rejected" and entry["reason"].startswith("canary:"), entry
    assert store.json("channels/production.json")["release_id"] == second
    before = _snapshot(store, client)
    again = dags.run({}, dag_id="model_release__iris")
    assert again.returncode == 0, again.output[-5000:]
    assert f"rejected iris-classifier v{bad_version}" in again.output and "force_retry=true" in again.output
    assert _snapshot(store, client) == before

    # and the release engineer can take it back with the rollback DAG: the channel and the MLflow alias return to the first
    back = dags.run({"spec": spec}, dag_id="model_release_rollback")
    assert back.returncode == 0, back.output[-5000:]
    assert store.json("channels/production.json")["release_id"] == first
    assert str(client.get_model_version_by_alias("iris-classifier", "production").version) == first_version
    assert SECRET not in back.output


RELEASE_TASKS = ("start", "intake", "export", "tensorrt", "assemble", "canary", "promote", "rollout", "finish")


def _states(stack, dag_id: str) -> dict[str, str]:
    """The task states of the DAG's latest run, from Airflow's own metadata DB."""
    with sqlite3.connect(stack.airflow_home / "airflow.db") as db:
        (run_id,) = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)).fetchone()
        return dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)))


def _snapshot(store: StoreView, client) -> tuple:  # noqa: ANN001
    """Every object of the store (key, etag) and every MLflow model version's aliases, tags and update time."""
    objects = sorted((o["Key"], o["ETag"]) for page in store.client.get_paginator("list_objects_v2").paginate(
        Bucket=store.bucket, Prefix=store.prefix + "/") for o in page.get("Contents", []))
    versions = sorted((v.version, v.last_updated_timestamp, tuple(sorted(v.tags.items())), tuple(sorted(v.aliases)))
                      for v in client.search_model_versions("name='iris-classifier'"))
    return objects, versions


def test_bad_input_fails_the_dag_at_once_without_retries(stack) -> None:
    run = stack.run_dag({"spec": "releases/no-such-spec.yaml"})  # the `airflow dags test` command itself
    assert run.returncode != 0 and run.state == "failed"
    assert "no-such-spec.yaml' does not exist" in run.output
    assert "up_for_retry" not in run.output.lower()


def test_the_stacks_airflow_database_is_migrated_and_holds_the_canary_pool(stack) -> None:
    """``airflow db migrate`` then ``airflow pools set``, run in one process (EmbeddedStack.migrate_airflow):
    the pool's row needs the migrated schema, and the canary task's pool lets one release at a time onto
    the canary Triton."""
    stack.migrate_airflow()  # done already where a run came first on this worker; else now
    with sqlite3.connect(stack.airflow_home / "airflow.db") as db:
        pools = db.execute("select slots, description from slot_pool where pool = 'triton_canary'").fetchall()
        stamped = db.execute("select version_num from alembic_version").fetchall()
    assert pools == [(1, "one release at a time on the canary Triton")]
    assert len(stamped) == 1 and stamped[0][0]
