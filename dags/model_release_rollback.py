"""Roll a channel back: the pointer and the MLflow alias return to an earlier verified release.

Wiring only: one ``model_release.airflow.RollbackOperator``; the run's ``channel`` and ``to_release``
params override its arguments, and its outlet, the production channel's Asset, gets the event.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from model_release.airflow import RollbackOperator, channel_asset
from model_release.airflow.dagfiles import CHANNEL_PATTERN, RELEASE_ID_PATTERN

PRODUCTION = channel_asset("production")

DOC = """
### Roll back a channel

Moves the channel's pointer in the model store back to `to_release` (default: the release promoted
before the current one that was not itself rolled back from and still verifies), with a
conditional write, and moves the MLflow alias (`promote.mlflow_alias` of the spec) to that
release's model version. The store and channel come from the spec; `channel` overrides it.
A rollback of `production` emits an event on its Asset with `action: rollback`.
"""

with DAG(
    dag_id="model_release_rollback",
    description="Move a channel's pointer and MLflow alias back to an earlier release",
    doc_md=DOC,
    schedule=None,
    catchup=False,
    max_active_runs=1,
    tags=["model-release", "rollback"],
    params={
        "spec": Param("releases/iris.yaml", type="string", minLength=1, description="the spec whose store and alias to use"),
        "channel": Param(None, type=["null", "string"], pattern=CHANNEL_PATTERN,
                         description="the channel (default: the spec's promote.channel)"),
        "to_release": Param(None, type=["null", "string"], pattern=RELEASE_ID_PATTERN,
                            description="the release to return to (default: the previous one)"),
    },
) as dag:
    RollbackOperator(task_id="rollback", spec="{{ params.spec }}", outlets=[PRODUCTION], retries=1)
