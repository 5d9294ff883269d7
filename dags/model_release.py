"""The manual release DAG: MLflow candidate -> ONNX -> (TensorRT) -> Triton repository -> canary -> S3 store.

Wiring only: the tasks are the public task group ``model_release.airflow.release_task_group`` (the
one a DAG file of your own uses), its spec the ``spec`` param. Trigger it by hand with a spec and,
optionally, a version or alias::

    airflow dags trigger model_release -c '{"spec": "releases/iris.yaml", "version": 3}'
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from model_release.airflow import channel_asset, release_task_group
from model_release.airflow.dagfiles import ALIAS_PATTERN, RELEASE_ID_PATTERN

#: the production channel's Asset (a promotion emits an event on it; see dags/model_release_downstream.py)
PRODUCTION = channel_asset("production")

DOC = """
### Release a model by hand

Takes the MLflow model the spec names (its alias, or the `version` / `alias` given here) through
ONNX export, TensorRT (queue `gpu`), the Triton repository, the canary (pool `triton_canary`,
judged beside the production champion) and promotion to the model store. A promotion emits an
event on the channel's Asset (`model_release_channel_<channel>`) naming the release; so does a
roll-out whose watch rolled the release back (`action: rollback`, `by: watch`).

* The version is pinned and **claimed** in the channel's ledger at `start`: a version another
  running run holds is skipped, so two runs never release it. A manual run may release a version
  the channel released or rejected before; the scheduled DAGs (`model_release__<spec>`) never do.
* `finish` (runs whatever happened) records the outcome: released, rejected (a gate or a bad
  model), or failed (an outage: the schedule may try again).
* With `MODEL_RELEASE_WORKSPACE_STORE` (or `workspace: s3://...`) the workers share no disk: each
  task fetches the stage folders it reads from the object store and publishes its own.
* Roll back with the `model_release_rollback` DAG.
"""

with DAG(
    dag_id="model_release",
    description="Release an MLflow model to the Triton model store, behind parity and canary gates",
    doc_md=DOC,
    schedule=None,
    catchup=False,
    max_active_runs=1,
    tags=["model-release", "triton", "mlflow"],
    params={
        "spec": Param("releases/iris.yaml", type="string", minLength=1, description="release spec (YAML), relative to the project"),
        "alias": Param(None, type=["null", "string"], pattern=ALIAS_PATTERN, description="override model.alias"),
        "version": Param(None, type=["null", "integer"], minimum=1, description="override with a model version"),
        "release_id": Param(None, type=["null", "string"], pattern=RELEASE_ID_PATTERN),
        "promote": Param(True, type="boolean", description="false: stop after the canary"),
        "workspace": Param(None, type=["null", "string"], minLength=1,
                           description="s3://BUCKET/PREFIX (workers share no disk) or a folder every worker mounts"),
    },
) as dag:
    # the run's params (version, alias, release_id, promote, workspace) override the group's arguments
    release_task_group("{{ params.spec }}", channel="production", prefix_group_id=False)
