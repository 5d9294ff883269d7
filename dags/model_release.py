"""The release DAG: MLflow candidate -> ONNX -> (TensorRT) -> Triton repository -> canary -> S3 store.

Wiring only: every task body is a line into ``model_release.airflow.tasks``. Trigger it by hand
with a spec and, optionally, a version or alias::

    airflow dags trigger model_release -c '{"spec": "releases/iris.yaml", "version": 3}'

The TensorRT task runs on queue ``gpu`` (CeleryExecutor routes it to a GPU worker); the canary
runs in pool ``triton_canary`` so one release at a time uses the canary server. A successful
promotion emits an event on the channel's Asset, so downstream DAGs can be scheduled on it.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Asset, Param, get_current_context, task

from model_release.names import ALIAS, RELEASE_ID, anchored

PRODUCTION = Asset(name="model_release_channel_production", uri="model-release://channels/production")

with DAG(
    dag_id="model_release",
    description="Release an MLflow model to the Triton model store, behind parity and canary gates",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    tags=["model-release", "triton", "mlflow"],
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
    params={
        "spec": Param("releases/iris.yaml", type="string", minLength=1, description="release spec (YAML), relative to the project"),
        "alias": Param(None, type=["null", "string"], pattern=anchored(ALIAS), description="override model.alias"),
        "version": Param(None, type=["null", "integer"], minimum=1, description="override with a model version"),
        "release_id": Param(None, type=["null", "string"], pattern=anchored(RELEASE_ID)),
        "promote": Param(True, type="boolean", description="false: stop after the canary"),
        "workspace": Param(None, type=["null", "string"], description="release workspace root every worker reaches"),
    },
) as dag:

    @task
    def start() -> dict:
        from model_release.airflow import tasks

        ctx = get_current_context()
        return tasks.start(dict(ctx["params"]), ctx["run_id"], ctx["dag_run"].run_after)

    @task
    def intake(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.intake(ref)

    @task
    def export(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.export(ref)

    @task(queue="gpu")
    def tensorrt(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.tensorrt(ref)

    @task
    def assemble(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.assemble(ref)

    @task(pool="triton_canary", pool_slots=1, retries=0)
    def canary(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.canary(ref)

    @task(outlets=[PRODUCTION], retries=0)
    def promote(ref: dict) -> dict:
        from model_release.airflow import tasks

        ref = tasks.promote(ref)
        promoted = ref["stages"].get("promote")
        if promoted and promoted["channel"] == "production":
            get_current_context()["outlet_events"][PRODUCTION].extra = {
                "release_id": promoted["release_id"], "store": promoted["store_uri"], "prefix": promoted["release_prefix"],
            }
        return ref

    promote(canary(assemble(tensorrt(export(intake(start()))))))
