"""A scheduled run that finds no candidate yet has nothing to release; a run someone started fails, saying why.

On a fresh stack the scheduled DAG's first run comes before any training has set the alias: that is
a schedule polling, not a failure (it used to fail, with a retry, on every new stack). The registry
is a real MLflow store (SQLite); the candidate lookup is the only thing asked before the skip.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from ..dag_spec import write_dag_spec

RUN_AFTER = datetime(2026, 12, 2, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """An MLflow registry that knows the model but no version of it under the alias ``candidate``."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(tracking_uri=uri, registry_uri=uri).create_registered_model("iris-classifier")
    monkeypatch.setenv("AIRFLOW_CONN_MLFLOW_DEFAULT", json.dumps({"conn_type": "http", "extra": {"tracking_uri": uri}}))
    return uri


def test_a_scheduled_run_without_a_candidate_is_skipped_as_nothing_to_release(tmp_path, registry) -> None:
    from airflow.sdk.exceptions import AirflowSkipException  # in the test: collecting stays free of Airflow's import

    from model_release.airflow import tasks

    spec = write_dag_spec(tmp_path / "specs")
    with pytest.raises(AirflowSkipException) as skipped:
        tasks.start({"spec": str(spec)}, "scheduled__2026-12-02T00:00:00+00:00", RUN_AFTER, scheduled=True)
    assert str(skipped.value).startswith('nothing to release: model "iris-classifier" has no alias "candidate"')
    assert not (tmp_path / "workspace").exists()


def test_a_run_someone_started_without_a_candidate_fails_naming_the_alias(tmp_path, registry) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from model_release.airflow import tasks

    spec = write_dag_spec(tmp_path / "specs")
    # a user's error: the task fails without retrying (no_retry_on_user_error), naming the alias and what to do
    with pytest.raises(AirflowFailException, match=r'^\[intake\] model "iris-classifier" has no alias "candidate"; .*set the alias on'):
        tasks.start({"spec": str(spec)}, "manual__2026-12-02T00:00:00+00:00", RUN_AFTER, scheduled=False)
