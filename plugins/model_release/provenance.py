"""Who or what runs a release step: the actor, and Airflow's DAG run when the step runs in a task.

Airflow exports its task context to the task's process environment (``AIRFLOW_CTX_DAG_ID``,
``AIRFLOW_CTX_DAG_RUN_ID``, ``AIRFLOW_CTX_TASK_ID``, ``AIRFLOW_CTX_TRY_NUMBER``), so the core
learns the DAG run without importing Airflow. The canary's report and the release's manifest
record it; the channel history page shows it beside the pointer's ``updated_by``.
"""

from __future__ import annotations

import os
from typing import Any

from .store.documents import actor

_AIRFLOW = {"dag_id": "AIRFLOW_CTX_DAG_ID", "dag_run_id": "AIRFLOW_CTX_DAG_RUN_ID", "task_id": "AIRFLOW_CTX_TASK_ID",
            "try_number": "AIRFLOW_CTX_TRY_NUMBER"}


def trigger() -> dict[str, Any]:
    """``{"actor": ..., "dag_id": ..., "dag_run_id": ..., ...}``: the Airflow keys only inside a task."""
    found = {key: os.environ[var] for key, var in _AIRFLOW.items() if os.environ.get(var)}
    return {"actor": actor(), **(found if "dag_run_id" in found else {})}
