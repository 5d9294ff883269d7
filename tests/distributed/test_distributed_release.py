"""A release on the distributed stack: Postgres, Redis, Celery workers with no shared disk, the MLflow
server, a Triton started on its own; triggered through Airflow's REST API, judged from Airflow's records.

One scenario, in order (each step needs the one before):

1. a release triggered through the REST API; the default worker is SIGKILLed while the canary runs
   and started again; the canary's retry completes the release;
2. which worker ran each task, from Airflow's task-instance records: TensorRT on ``gpu-worker``,
   every other task on ``cpu-worker``;
3. the canary delivered the models to the remote Triton (its object-store repository is empty
   afterwards) and the store holds the release, verified, with nothing half-written;
4. the spec's scheduled DAG, unpaused, gets a run from the scheduler (run type ``scheduled``), which
   finds nothing new, ends with every task skipped and touches neither the store nor MLflow.

(The rejected-version and rollback runs are in tests/e2e/test_release_dag.py, on the embedded stack:
each extra release here costs minutes on two cores.)
"""

from __future__ import annotations

import os
import time

import pytest

from model_release.local.distributed import BUCKET, DistributedStack

pytestmark = [pytest.mark.distributed, pytest.mark.slow, pytest.mark.timeout(2400)]

RELEASE_TASKS = ("start", "intake", "export", "tensorrt", "assemble", "canary", "promote", "finish")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    with DistributedStack(root) as s:
        yield s


def _wait_task(stack, dag_id, run_id, task, states, timeout=600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ti = stack.task_instances(dag_id, run_id).get(task)
        if ti and ti["state"] in states:
            return ti
        time.sleep(1)
    raise TimeoutError(f"{task} never reached {states}: {stack.task_instances(dag_id, run_id)}")


def _bucket(stack, prefix: str) -> list[tuple[str, str]]:
    client = stack.moto.client()
    return sorted((o["Key"], o["ETag"]) for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=prefix) for o in page.get("Contents", []))


def test_a_release_across_workers_that_share_no_disk(stack) -> None:
    import mlflow

    from model_release.demo import train_iris
    from model_release.store import list_releases, open_store, verify_release

    started = time.monotonic()
    version = train_iris(stack.tracking_uri, c=1.0)
    stack.unpause("model_release")
    stack.unpause("model_release_downstream_example")  # runs on the production channel's Asset events
    run_id = stack.trigger("model_release", {"spec": "releases/iris.yaml"})

    # 1. a worker lost in the middle of the canary: the retry, on the restarted worker, completes the release
    _wait_task(stack, "model_release", run_id, "canary", ("running",), timeout=900)
    time.sleep(3)
    stack.kill_worker("cpu-worker")
    store = open_store(f"s3://{BUCKET}/iris", s3_client=stack.moto.client())
    assert list_releases(store) == [] and _bucket(stack, "iris/channels/") == [], "nothing half-written is visible"
    _wait_task(stack, "model_release", run_id, "canary", ("up_for_retry", "failed", "queued", "scheduled"), timeout=300)
    stack.start_worker("cpu-worker")
    stack.wait_worker("cpu-worker")
    assert stack.wait_run("model_release", run_id, timeout=900) == "success"
    tis = stack.task_instances("model_release", run_id)

    # 2. the worker of each task, from Airflow's own records
    assert tis["tensorrt"]["hostname"] == "gpu-worker" and tis["tensorrt"]["queue"] == "gpu"
    assert {t: tis[t]["hostname"] for t in RELEASE_TASKS if t != "tensorrt"} == {
        t: "cpu-worker" for t in RELEASE_TASKS if t != "tensorrt"}
    assert tis["canary"]["try_number"] == 2, "the canary was retried after its worker was killed"
    # each worker worked in its own folder: the release's stages it ran are there, the other worker's are not
    # (a local .published.json marks a stage folder fetched from the workspace store, not made here)
    fetched_on_cpu = {p.parent.name for p in stack.worker_folder("cpu-worker").glob("workspace/*/*/.published.json")}
    fetched_on_gpu = {p.parent.name for p in stack.worker_folder("gpu-worker").glob("workspace/*/*/.published.json")}
    assert fetched_on_gpu == {"export"}, f"the GPU worker fetched only what TensorRT reads: {fetched_on_gpu}"
    assert "tensorrt" in fetched_on_cpu, "assemble, on the CPU worker, fetched the TensorRT stage's result"
    assert (stack.worker_folder("gpu-worker") / "workspace").is_dir() and not os.path.commonpath(
        [stack.worker_folder("cpu-worker"), stack.worker_folder("gpu-worker")]).endswith("worker")

    # 3. the store holds the release, verified; the canary's repository is empty again
    [release] = [r for r in list_releases(store) if r.exists]
    assert verify_release(store, release.release_id).ok
    pointer = store.read_pointer("production")
    assert pointer.release_id == release.release_id
    manifest = store.read_json(f"releases/{release.release_id}/release.json")[0]
    assert manifest["run"]["dag_id"] == "model_release" and manifest["run"]["run_id"] == run_id
    report = store.read_json(f"releases/{release.release_id}/reports/report.json")[0]
    assert report["server"]["mode"] == "remote" and report["server"]["shimmed_models"]
    assert set(report["server"]["delivery"].values()) == {"staged"}, "an ensemble's models go through the repository Triton polls"
    assert _bucket(stack, "canary/") == [("canary/.keep", _bucket(stack, "canary/")[0][1])]
    assert not stack.moto.client().list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    client = mlflow.MlflowClient(tracking_uri=stack.tracking_uri)
    assert str(client.get_model_version_by_alias("iris-classifier", "production").version) == version
    released = time.monotonic() - started

    # the promotion's Asset event started the example downstream DAG, which read the release from its extra
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        runs = stack.runs("model_release_downstream_example")
        if runs and runs[0]["state"] in ("success", "failed"):
            break
        time.sleep(2)
    assert runs and runs[0]["run_type"] == "asset_triggered" and runs[0]["state"] == "success", runs
    seen = stack.api("GET", f"/api/v2/dags/model_release_downstream_example/dagRuns/{runs[0]['dag_run_id']}"
                            "/taskInstances/what_production_serves/xcomEntries/return_value")["value"]
    assert seen[0]["release_id"] == release.release_id and seen[0]["action"] == "promote"

    # 4. the spec's scheduled DAG, unpaused: the scheduler starts its run for the latest interval, which finds
    #    nothing new, skips every task and touches neither the store nor MLflow
    before = (_bucket(stack, "iris/"), sorted((v.version, v.last_updated_timestamp, tuple(sorted(v.tags.items())))
                                                for v in client.search_model_versions("name='iris-classifier'")))
    stack.unpause("model_release__iris")
    deadline = time.monotonic() + 300
    while not (runs := stack.runs("model_release__iris")) and time.monotonic() < deadline:
        time.sleep(2)
    assert runs and runs[0]["run_type"] == "scheduled", runs
    skipped_run = runs[0]["dag_run_id"]
    assert stack.wait_run("model_release__iris", skipped_run, timeout=600) == "success"
    stack.unpause("model_release__iris", paused=True)  # not before: a paused DAG's run schedules no task
    states = {t: ti["state"] for t, ti in stack.task_instances("model_release__iris", skipped_run).items()}
    assert states == {t: "skipped" for t in RELEASE_TASKS}
    after = (_bucket(stack, "iris/"), sorted((v.version, v.last_updated_timestamp, tuple(sorted(v.tags.items())))
                                               for v in client.search_model_versions("name='iris-classifier'")))
    assert after == before
    print(f"\ndistributed: release with a killed worker {released:.0f} s; whole scenario {time.monotonic() - started:.0f} s")
