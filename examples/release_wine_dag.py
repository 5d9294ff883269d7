"""Your own release DAG (README, "Your own DAG"): put it in your DAGs folder; a relative spec path is this file's folder's."""

from airflow.sdk import DAG, Param

from model_release.airflow import release_task_group

with DAG("release_wine", schedule=None, params={"version": Param(None, type=["null", "integer"], minimum=1)}):
    release_task_group("../releases/wine.yaml")  # trigger with {"version": 2} to release that version
