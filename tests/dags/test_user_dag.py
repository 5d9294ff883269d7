"""A DAG file of a user's own, outside ``dags/``, releases a model: the public task group on a real stack.

The user's folder (a temporary one) holds a DAG file of five lines and its spec beside it (the DAG
tests' iris spec, tests/dag_spec.py); Airflow's DAGs folder is that folder. The DAG names connections
of its own (``team_mlflow``, ``team_store``) while the default ones point nowhere, so a task that
ignored the operators' ``*_conn_id`` would fail. The run is ``dag.test()`` as ``airflow dags test``
makes it (:meth:`EmbeddedStack.dag_session`) on MLflow (SQLite), the moto S3 server, the local Triton
and a migrated Airflow SQLite DB; then the channel pointer, the MLflow alias, the Asset event, the
task states and every task's XCom are read back from the services themselves.
"""

from __future__ import annotations

import json
import sqlite3
import pytest

from model_release.local.demo import train_iris
from model_release.local.stack import EmbeddedStack, connection_env

from ..dag_spec import write_dag_spec

pytestmark = [pytest.mark.integration, pytest.mark.dags, pytest.mark.slow]

#: the user's DAG file, whole: what README's "Your own DAG" promises (at most ten lines)
USER_DAG = '''\
from airflow.sdk import DAG

from model_release.airflow import release_task_group

with DAG("team_release", schedule=None, tags=["team"]):
    release_task_group("iris.yaml", mlflow_conn_id="team_mlflow", aws_conn_id="team_store")
'''
GROUP = "model_release"
TASKS = ("start", "intake", "export", "tensorrt", "assemble", "canary", "promote", "rollout", "finish")


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """The user's folder, the stack, the model version trained and the run's outcome."""
    folder = tmp_path_factory.mktemp("team-dags")
    (folder / "team_release.py").write_text(USER_DAG)
    write_dag_spec(folder)  # folder/iris.yaml: the DAG names it relative to its own folder
    with EmbeddedStack(tmp_path_factory.mktemp("stack")) as stack:
        real = connection_env(str(stack.tracking_uri), stack.endpoint_url)
        stack.extra_env.update(
            AIRFLOW__CORE__DAGS_FOLDER=str(folder),
            AIRFLOW_CONN_TEAM_MLFLOW=real["AIRFLOW_CONN_MLFLOW_DEFAULT"],
            AIRFLOW_CONN_TEAM_STORE=real["AIRFLOW_CONN_AWS_DEFAULT"],
            # the defaults lead nowhere: a registry that does not exist (refused at once), an S3 nobody serves
            AIRFLOW_CONN_MLFLOW_DEFAULT=json.dumps({"conn_type": "http", "extra": {
                "tracking_uri": "sqlite:////nonexistent-default-registry/mlflow.db"}}),
            AIRFLOW_CONN_AWS_DEFAULT=json.dumps({"conn_type": "aws", "extra": {"endpoint_url": "http://127.0.0.1:9"}}),
            MODEL_RELEASE_RETRY_DELAY_S="1",
        )
        version = train_iris(stack.tracking_uri, c=1.0)
        with stack.dag_session() as dags:
            run = dags.run({}, dag_id="team_release")
        yield folder, stack, version, run


def _db(stack: EmbeddedStack, query: str) -> list[tuple]:
    with sqlite3.connect(stack.airflow_home / "airflow.db") as db:
        return db.execute(query).fetchall()


def test_the_user_dag_file_is_at_most_ten_lines() -> None:
    assert len(USER_DAG.splitlines()) <= 10


def test_a_users_dag_file_releases_the_model_and_promotes_it(released) -> None:
    import mlflow

    folder, stack, version, run = released
    assert run.returncode == 0 and run.state == "success", run.output[-6000:]
    states = dict(_db(stack, "SELECT task_id, state FROM task_instance WHERE dag_id = 'team_release'"))
    # every stage ran; the roll-out skipped (this stack declares no serving fleet), finish settled the claim
    assert states == {f"{GROUP}.{t}": "skipped" if t == "rollout" else "success" for t in TASKS}, states

    pointer = json.loads(stack.s3_client().get_object(Bucket=stack.bucket, Key="iris/channels/production.json")["Body"].read())
    xcoms = _return_values(stack)
    release_id = xcoms["start"]["release_id"]
    assert pointer["release_id"] == release_id
    client = mlflow.MlflowClient(tracking_uri=stack.tracking_uri)
    assert str(client.get_model_version_by_alias("iris-classifier", "production").version) == version
    events = [json.loads(extra) for (extra,) in _db(stack, "SELECT e.extra FROM asset_event e JOIN asset a ON "
                                                           "a.id = e.asset_id WHERE a.name = 'model_release_channel_production'")]
    assert [(e["action"], e["release_id"]) for e in events] == [("promote", release_id)]
    assert xcoms["finish"] == {"state": "released", "reason": xcoms["finish"]["reason"], "recorded": True}


def test_each_task_returns_the_small_release_reference_with_its_own_stage_added(released) -> None:
    folder, stack, version, run = released
    assert run.returncode == 0, run.output[-3000:]
    xcoms = _return_values(stack)
    start = xcoms["start"]
    # the spec was taken from the DAG file's folder; the run's connections are the DAG's, not the defaults
    assert start["spec_path"] == str(folder / "iris.yaml")
    assert start["connections"] == {"mlflow_conn_id": "team_mlflow", "aws_conn_id": "team_store"}
    assert start["model"] == f"models:/iris-classifier/{version}" and start["stages"] == {}
    seen: list[str] = []
    for task, stage in [("intake", "intake"), ("export", "export"), ("tensorrt", "tensorrt"),
                        ("assemble", "repository"), ("canary", "canary"), ("promote", "promote")]:
        ref = xcoms[task]
        seen.append(stage)
        assert ref["release_id"] == start["release_id"] and list(ref["stages"]) == seen, (task, ref["stages"])
    assert xcoms["canary"]["stages"]["canary"]["passed"] is True
    assert xcoms["promote"]["stages"]["promote"]["channel"] == "production"
    assert xcoms["tensorrt"]["stages"]["tensorrt"]["built"] is False  # no GPU here: skipped with its reason
    # small JSON, no credentials: the store's key and secret live only in the connections
    secrets = json.loads(connection_env("x", "y")["AIRFLOW_CONN_AWS_DEFAULT"])
    for task, value in xcoms.items():
        text = json.dumps(value)
        assert len(text) < 4096, (task, len(text))
        assert secrets["login"] not in text and secrets["password"] not in text


def _return_values(stack: EmbeddedStack) -> dict[str, dict]:
    """Each task's XCom ``return_value`` of the user's DAG run, by task id without the group's prefix."""
    rows = _db(stack, "SELECT task_id, value FROM xcom WHERE dag_id = 'team_release' AND key = 'return_value'")
    return {task.removeprefix(f"{GROUP}."): json.loads(value) for task, value in rows}

