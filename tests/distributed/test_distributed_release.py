"""A release on the distributed stack: Postgres, Redis, Celery workers with no shared disk, the MLflow
server, a Triton started on its own; triggered through Airflow's REST API, judged from Airflow's records.

One stack, started once for the module, serves the checks below, in order (each needs the one before):

1. a release triggered through the REST API; the default worker is SIGKILLed while the canary is
   delivering models to the remote Triton, and started again; the canary's retry completes the
   release, and nothing half-written was visible in the store meanwhile;
2. which worker ran each task, from Airflow's task-instance records: TensorRT on ``gpu-worker``,
   every other task on ``cpu-worker``, each in its own folder;
3. the canary delivered the models to the remote Triton (its object-store repository is empty
   afterwards, the killed try's objects included), the store holds the release, verified, and every
   stage in the workspace store is whole;
4. the promotion's Asset event ran the example downstream DAG, which read the release from its extra;
5. the spec's scheduled DAG, unpaused, gets a run from the scheduler (run type ``scheduled``), which
   finds nothing new, ends with every task skipped and touches neither the store nor MLflow.

The spec is releases/iris.yaml without the canary's load phase, tuning and expectations (tests/dag_spec.py).
(The rejected-version and rollback runs are in tests/e2e/test_release_dag.py, on the embedded stack:
each extra release here costs a minute or more on two cores.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from model_release.local.distributed import BUCKET, DistributedStack

from ..dag_spec import write_dag_spec

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

RELEASE_TASKS = ("start", "intake", "export", "tensorrt", "assemble", "canary", "promote", "rollout", "finish")
STAGES = ("intake", "export", "tensorrt", "repository", "canary", "promote")

#: what the release check found, for the checks after it
DONE: dict[str, Any] = {}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    spec = write_dag_spec(root / "specs")
    env = {"MODEL_RELEASE_SPECS": str(spec.parent),
           # the DAG files do not change under test: parsed once, by one process, not every 30 s on two cores
           "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600", "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1"}
    with DistributedStack(root, extra_env=env) as s:
        s.spec = spec  # type: ignore[attr-defined]
        yield s


@pytest.fixture
def released(stack):
    if not DONE:
        pytest.skip("needs the release of test_a_release_survives_its_worker_killed_mid_canary")
    return DONE


def _until(what: str, check: Callable[[], Any], timeout: float, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def _bucket(stack, prefix: str) -> list[tuple[str, str]]:
    client = stack.moto.client()
    return sorted((o["Key"], o["ETag"]) for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=prefix) for o in page.get("Contents", []))


def _store(stack):
    from model_release.store import open_store

    return open_store(f"s3://{BUCKET}/iris", s3_client=stack.moto.client())


def test_a_release_survives_its_worker_killed_mid_canary(stack) -> None:
    from model_release.local.demo import train_iris
    from model_release.store import list_releases

    started = time.monotonic()
    version = train_iris(stack.tracking_uri, c=1.0)
    stack.unpause("model_release")
    stack.unpause("model_release_downstream_example")  # runs on the production channel's Asset events
    run_id = stack.trigger("model_release", {"spec": str(stack.spec)})

    # the canary is in the middle of its work: its models are being delivered to the remote Triton
    def delivering() -> bool:
        ti = stack.task_instances("model_release", run_id).get("canary") or {}
        assert ti.get("state") not in ("success", "failed"), f"the canary ended before it could be interrupted: {ti}"
        return ti.get("state") == "running" and len(_bucket(stack, "canary/")) > 1

    _until("the canary delivering models", delivering, 900, every=0.2)
    stack.kill_worker("cpu-worker")
    stack.start_worker("cpu-worker")  # a worker is back; Airflow notices the lost try on its own
    store = _store(stack)
    assert list_releases(store) == [] and _bucket(stack, "iris/releases/") == [] and _bucket(stack, "iris/channels/") == [], \
        "nothing half-written is visible in the store"

    assert stack.wait_run("model_release", run_id, timeout=900) == "success"
    DONE.update(run_id=run_id, version=version, tis=stack.task_instances("model_release", run_id),
                seconds=time.monotonic() - started)
    assert DONE["tis"]["canary"]["try_number"] == 2, "the canary was retried after its worker was killed"
    print(f"\ndistributed: release with a killed worker {DONE['seconds']:.0f} s")


def test_each_task_ran_on_its_queue_worker_in_a_folder_of_its_own(stack, released) -> None:
    tis = released["tis"]
    assert tis["tensorrt"]["hostname"] == "gpu-worker" and tis["tensorrt"]["queue"] == "gpu"
    assert {t: tis[t]["hostname"] for t in RELEASE_TASKS if t != "tensorrt"} == {
        t: "cpu-worker" for t in RELEASE_TASKS if t != "tensorrt"}
    # each worker worked in its own folder: the release's stages it ran are there, the other worker's are not
    # (a local .published.json marks a stage folder fetched from the workspace store, not made here)
    fetched_on_cpu = {p.parent.name for p in stack.worker_folder("cpu-worker").glob("workspace/*/*/.published.json")}
    fetched_on_gpu = {p.parent.name for p in stack.worker_folder("gpu-worker").glob("workspace/*/*/.published.json")}
    assert fetched_on_gpu == {"export"}, f"the GPU worker fetched only what TensorRT reads: {fetched_on_gpu}"
    assert "tensorrt" in fetched_on_cpu, "assemble, on the CPU worker, fetched the TensorRT stage's result"
    assert (stack.worker_folder("gpu-worker") / "workspace").is_dir() and not os.path.commonpath(
        [stack.worker_folder("cpu-worker"), stack.worker_folder("gpu-worker")]).endswith("worker")


def test_the_store_holds_the_verified_release_and_the_remote_canary_is_empty_again(stack, released, tmp_path) -> None:
    import mlflow

    from model_release.store import list_releases, verify_release
    from model_release.workspace_mirror import StoreMirror

    store = _store(stack)
    [release] = [r for r in list_releases(store) if r.exists]
    assert verify_release(store, release.release_id).ok
    assert store.read_pointer("production").release_id == release.release_id
    manifest = store.read_json(f"releases/{release.release_id}/release.json")[0]
    assert manifest["run"]["dag_id"] == "model_release" and manifest["run"]["run_id"] == released["run_id"]
    report = store.read_json(f"releases/{release.release_id}/reports/report.json")[0]
    assert report["server"]["mode"] == "remote" and report["server"]["shimmed_models"]
    assert set(report["server"]["delivery"].values()) == {"staged"}, "an ensemble's models go through the repository Triton polls"
    # the killed try's staged models were cleared by the retry, and the retry's own after it
    assert [k for k, _ in _bucket(stack, "canary/")] == ["canary/.keep"]
    assert not stack.moto.client().list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    # every stage of the release in the workspace store is whole: indexed, and each file the one indexed
    mirror = StoreMirror.open(f"s3://{BUCKET}/workspaces", s3_client=stack.moto.client())
    assert set(STAGES) <= set(mirror.stages(release.release_id))
    assert mirror.owner(release.release_id) == f"airflow run {released['run_id']}"
    for stage in STAGES:
        assert mirror.fetch(release.release_id, stage, tmp_path / stage), f"{stage} has no index in the workspace store"
    client = mlflow.MlflowClient(tracking_uri=stack.tracking_uri)
    assert str(client.get_model_version_by_alias("iris-classifier", "production").version) == released["version"]


def test_the_promotion_event_ran_the_downstream_example(stack, released) -> None:
    def finished() -> list:
        runs = stack.runs("model_release_downstream_example")
        return runs if runs and runs[0]["state"] in ("success", "failed") else []

    runs = _until("the downstream example's run", finished, 300, every=1)
    assert runs[0]["run_type"] == "asset_triggered" and runs[0]["state"] == "success", runs
    seen = stack.api("GET", f"/api/v2/dags/model_release_downstream_example/dagRuns/{runs[0]['dag_run_id']}"
                            "/taskInstances/what_production_serves/xcomEntries/return_value")["value"]
    assert seen[0]["release_id"] == _store(stack).read_pointer("production").release_id and seen[0]["action"] == "promote"


def test_the_next_scheduled_run_finds_nothing_new_and_touches_nothing(stack, released) -> None:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=stack.tracking_uri)

    def snapshot() -> tuple:
        return (_bucket(stack, "iris/"), sorted((v.version, v.last_updated_timestamp, tuple(sorted(v.tags.items())),
                                                 tuple(sorted(v.aliases)))
                                                for v in client.search_model_versions("name='iris-classifier'")))

    before = snapshot()
    # unpaused, the spec's scheduled DAG gets its latest interval's run from the scheduler at once
    stack.unpause("model_release__iris")
    runs = _until("the scheduler's run of model_release__iris", lambda: stack.runs("model_release__iris"), 300, every=1)
    assert runs[0]["run_type"] == "scheduled", runs
    skipped_run = runs[0]["dag_run_id"]
    assert stack.wait_run("model_release__iris", skipped_run, timeout=600) == "success"
    stack.unpause("model_release__iris", paused=True)  # not before: a paused DAG's run schedules no task
    states = {t: ti["state"] for t, ti in stack.task_instances("model_release__iris", skipped_run).items()}
    assert states == {t: "skipped" for t in RELEASE_TASKS}
    assert snapshot() == before, "a run with nothing new touches neither the store nor MLflow"
