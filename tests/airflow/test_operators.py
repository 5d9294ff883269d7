"""The release operators and their task group as a DAG file sees them: templated fields, the run's params,
the release reference they pass, the group's task ids, dependencies, queue, pool and connections.

The run itself (every operator executing on a real Airflow, MLflow, S3 and Triton) is
tests/dags/test_user_dag.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# Airflow takes seconds to import: each test imports it, so collecting this file on every pytest-xdist worker does not.

HERE = Path(__file__).resolve().parent
STAGES = ["start", "intake", "export", "tensorrt", "assemble", "canary", "promote", "rollout", "finish"]


def _dag(dag_id: str = "probe", **params):
    from airflow.sdk import DAG, Param

    return DAG(dag_id, schedule=None, params={k: Param(v, type=["null", "string", "integer", "boolean"])
                                              for k, v in params.items()})


def test_the_start_operator_renders_a_templated_spec_version_and_connection_from_the_params() -> None:
    from model_release.airflow import ReleaseStartOperator

    with _dag(spec="releases/wine.yaml", version=3, conn="team_mlflow"):
        start = ReleaseStartOperator(task_id="start", spec="{{ params.spec }}", version="{{ params.version }}",
                                     mlflow_conn_id="{{ params.conn }}", release_id="wine-{{ params.version }}")
    params = {"spec": "releases/wine.yaml", "version": 3, "conn": "team_mlflow"}
    start.render_template_fields({"params": params})
    assert (start.spec, start.version, start.mlflow_conn_id, start.release_id) == (
        "releases/wine.yaml", "3", "team_mlflow", "wine-3")
    run = start.run_params(params)
    # a template that renders relative stays relative: tasks.start takes it from the project home, as ever
    assert run["spec"] == "releases/wine.yaml"
    assert run["version"] == 3 and isinstance(run["version"], int)  # Jinja renders text; the spec wants a number
    assert run["release_id"] == "wine-3" and run["alias"] is None and run["promote"] is True


def test_a_relative_literal_spec_is_the_dag_files_folders_and_an_absolute_one_stays() -> None:
    from model_release.airflow import ReleaseStartOperator

    with _dag():
        relative = ReleaseStartOperator(task_id="relative", spec="specs/wine.yaml")
        absolute = ReleaseStartOperator(task_id="absolute", spec="/srv/specs/wine.yaml")
    assert relative.run_params({})["spec"] == str(HERE / "specs" / "wine.yaml")  # this test file made the DAG
    assert absolute.run_params({})["spec"] == "/srv/specs/wine.yaml"


def test_a_run_param_overrides_the_argument_only_when_the_run_gives_a_value() -> None:
    from model_release.airflow import ReleaseStartOperator

    with _dag(version=None, alias=None, promote=True):
        start = ReleaseStartOperator(task_id="start", spec="/s/wine.yaml", alias="champion", promote=False,
                                     workspace="s3://bucket/ws")
    # declared but not given (None, or None rendered by Jinja): the argument stands
    assert start.run_params({"version": None, "alias": "None"})["alias"] == "champion"
    # given: the run wins; an undeclared key (workspace) keeps the argument
    run = start.run_params({"version": 7, "alias": "staging", "promote": True, "force_retry": True})
    assert (run["version"], run["alias"], run["promote"], run["workspace"], run["force_retry"]) == (
        7, "staging", True, "s3://bucket/ws", True)
    # a run that names an alias releases that alias, not the version the DAG file pinned
    with _dag():
        pinned = ReleaseStartOperator(task_id="pinned", spec="/s/wine.yaml", version=4)
    assert (pinned.run_params({"alias": "staging"})["version"], pinned.run_params({"alias": "staging"})["alias"]) == (
        None, "staging")
    assert pinned.run_params({"alias": None})["version"] == 4
    # just outside the list of run params: a "spec" param never replaces the operator's own spec
    assert start.run_params({"spec": "/other.yaml"})["spec"] == "/s/wine.yaml"


def test_a_stage_operator_passes_the_reference_on_with_its_own_connection_ids() -> None:
    from model_release.airflow import CanaryOperator

    with _dag():
        canary = CanaryOperator(task_id="canary", release={}, triton_conn_id="gpu_canary")
    canary.release = {"release_id": "wine-1", "connections": {"mlflow_conn_id": "team_mlflow", "aws_conn_id": "s3"}}
    ref = canary.release_ref()
    # the start task's choices reach it; its own arguments win where it has them
    assert ref["connections"] == {"mlflow_conn_id": "mlflow_default", "aws_conn_id": "aws_default",
                                  "triton_conn_id": "gpu_canary"}
    assert canary.release["connections"] == {"mlflow_conn_id": "team_mlflow", "aws_conn_id": "s3"}  # not mutated


def test_a_stage_operator_given_something_else_than_a_reference_fails_saying_what_to_pass() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from model_release.airflow import ExportOperator

    with _dag():
        export = ExportOperator(task_id="export", release="{{ ti.xcom_pull('intake') }}")
    export.release = "{'release_id': 'wine-1'}"  # what a Jinja template of an XCom renders: text
    with pytest.raises(AirflowFailException, match=r"^export: release is str .*pass the upstream release task's "
                                                   r"\.output \(for example release=intake\.output\)"):
        export.release_ref()
    export.release = {"stages": {}}  # a dict, but no release reference: just outside
    with pytest.raises(AirflowFailException, match="not a release reference"):
        export.release_ref()


def test_the_task_group_chains_the_stages_with_their_queue_pool_and_trigger_rule() -> None:
    from model_release.airflow import release_task_group

    with _dag() as dag:
        group = release_task_group("wine.yaml")
    assert group.group_id == "model_release"
    ids = {t.task_id.split(".", 1)[1]: t for t in dag.tasks}
    assert sorted(ids) == sorted(STAGES) and all(t.task_id.startswith("model_release.") for t in dag.tasks)
    chain = [sorted(t.split(".", 1)[1] for t in ids[s].upstream_task_ids) for s in STAGES]
    assert chain == [[], ["start"], ["intake"], ["export"], ["tensorrt"], ["assemble"], ["canary"], ["promote"],
                     ["promote", "rollout", "start"]]
    assert {s: ids[s].queue for s in STAGES if ids[s].queue != "default"} == {"tensorrt": "gpu"}
    assert {s: ids[s].pool for s in STAGES if ids[s].pool != "default_pool"} == {"canary": "triton_canary"}
    assert {s: str(ids[s].trigger_rule.value) for s in STAGES if ids[s].trigger_rule != "all_success"} == {
        "finish": "all_done"}
    assert ids["finish"].start_task_id == "model_release.start"  # pulls the prefixed start's reference
    assert [o.name for o in ids["promote"].outlets] == ["model_release_channel_production"]
    assert [o.name for o in ids["rollout"].outlets] == ["model_release_channel_production_watch_rollbacks"]


def test_the_task_group_gives_every_operator_the_connections_and_placement_it_is_told() -> None:
    from model_release.airflow import release_task_group

    with _dag() as dag:
        release_task_group("/s/wine.yaml", group_id="wine", channel="staging", mlflow_conn_id="team_mlflow",
                           aws_conn_id="team_s3", triton_conn_id="gpu_canary", tensorrt_queue="a100",
                           canary_pool="canary_a", prefix_group_id=False, retries=3)
    tasks = {t.task_id: t for t in dag.tasks}
    assert sorted(tasks) == sorted(STAGES)
    conns = {(name, getattr(t, name)) for t in tasks.values() for name in ("mlflow_conn_id", "aws_conn_id",
                                                                          "triton_conn_id") if hasattr(t, name)}
    assert conns == {("mlflow_conn_id", "team_mlflow"), ("aws_conn_id", "team_s3"), ("triton_conn_id", "gpu_canary")}
    assert all(hasattr(t, "aws_conn_id") for t in tasks.values())  # every task reads the workspace store
    assert hasattr(tasks["intake"], "mlflow_conn_id") and hasattr(tasks["canary"], "triton_conn_id")
    assert (tasks["tensorrt"].queue, tasks["canary"].pool) == ("a100", "canary_a")
    assert {t.retries for t in tasks.values()} == {3}
    assert [o.name for o in tasks["promote"].outlets] == ["model_release_channel_staging"]


def test_a_group_can_be_set_downstream_of_a_task_like_one() -> None:
    from airflow.sdk import task

    from model_release.airflow import release_task_group

    with _dag() as dag:
        @task
        def prepare() -> None:
            return None

        prepare() >> release_task_group("wine.yaml")
    assert dag.get_task("model_release.start").upstream_task_ids == {"prepare"}


def test_the_readme_example_dag_releases_the_wine_spec_beside_the_clones_releases() -> None:
    """examples/release_wine_dag.py, parsed as Airflow would: a few lines, its spec resolved from its own folder."""
    from airflow.dag_processing.dagbag import DagBag

    from model_release.spec import load_spec

    example = HERE.parents[1] / "examples" / "release_wine_dag.py"
    text = example.read_text()
    assert len(text.splitlines()) <= 10
    code = text.split('"""', 2)[2].strip()  # what follows the docstring: README shows it as written
    assert f"```python\n{code}\n```" in (HERE.parents[1] / "README.md").read_text()
    bag = DagBag(dag_folder=str(example))  # as the dag-processor parses a DAG file
    assert bag.import_errors == {} and list(bag.dags) == ["release_wine"]
    dag = bag.dags["release_wine"]
    start = dag.get_task("model_release.start")
    spec = start.run_params({"version": 2})
    assert spec["spec"] == str(example.parent / "../releases/wine.yaml") and spec["version"] == 2
    assert load_spec(spec["spec"]).model.name == "wine-classifier"
