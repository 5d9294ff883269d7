"""The release as one task group in any DAG: :func:`release_task_group`, over the operators of :mod:`.operators`.

A DAG file of your own releases a spec in a few lines::

    from airflow.sdk import DAG
    from model_release.airflow import release_task_group

    with DAG("release_wine", schedule=None):
        release_task_group("wine.yaml")   # beside this file; or an absolute path

The shipped DAGs (``dags/``) are built the same way.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import TaskGroup

from ..stages import ASSEMBLE, CANARY, EXPORT, FINISH, INTAKE, PROMOTE, ROLLOUT, START, TENSORRT
from .dags import RETRY_DELAY
from .hooks import MlflowHook, ModelStoreHook, TritonCanaryHook
from . import operators as op


def release_task_group(
    spec: str,
    *,
    channel: str = "production",
    group_id: str = "model_release",
    mlflow_conn_id: str = MlflowHook.default_conn_name,
    aws_conn_id: str = ModelStoreHook.default_conn_name,
    triton_conn_id: str = TritonCanaryHook.default_conn_name,
    promote: bool = True,
    version: int | str | None = None,
    alias: str | None = None,
    release_id: str | None = None,
    workspace: str | None = None,
    scheduled: bool = False,
    tensorrt_queue: str = "gpu",
    canary_pool: str = "triton_canary",
    retries: int = 1,
    retry_delay: timedelta = RETRY_DELAY,
    prefix_group_id: bool = True,
) -> TaskGroup:
    """Add a release of ``spec`` to the DAG being defined: ``start -> intake -> export -> tensorrt -> assemble
    -> canary -> promote -> rollout``, and ``finish`` after them whatever happened.

    Call it inside a ``with DAG(...)`` block (or another task group). Each task is an operator of
    :mod:`.operators` over the task bodies the shipped DAGs run; each passes the next the release
    reference through XCom.

    Args:
        spec: the release spec (YAML). Relative: to the folder of the DAG file; absolute as is; a
            template (``"{{ params.spec }}"``) renders at run time (relative then: to the project home).
        channel: the channel whose Asset ``promote`` emits on (and ``rollout`` through its rollback alias).
        group_id: the task group's id (its tasks are ``<group_id>.start`` ... unless ``prefix_group_id``
            is False).
        mlflow_conn_id, aws_conn_id, triton_conn_id: the MLflow, model store and Triton canary connections.
        promote: False stops after the canary.
        version, alias, release_id, workspace: as :class:`~.operators.ReleaseStartOperator` takes them
            (templated). DAG params of these names (and ``promote``, ``force_retry``) override them at
            trigger time when the DAG declares them and the run gives a value.
        scheduled: a scheduled release: skip, touching nothing, unless the candidate is new to the channel.
        tensorrt_queue: the queue of the TensorRT task (a GPU worker's).
        canary_pool: the pool of the canary task (one release at a time on the canary Triton).
        retries, retry_delay: each task's retries for outages (a user error or a gate never retries).
        prefix_group_id: False keeps the task ids unprefixed (``start``, ``intake``, ...).

    Returns:
        The task group; set dependencies on it as on a task (``prepare >> release_task_group(...)``).
    """
    common: dict[str, Any] = {"aws_conn_id": aws_conn_id, "retries": retries, "retry_delay": retry_delay}
    with TaskGroup(group_id, prefix_group_id=prefix_group_id,
                   tooltip=f"release {spec} to channel {channel}") as group:
        start = op.ReleaseStartOperator(task_id=START, spec=spec, version=version, alias=alias, release_id=release_id,
                                        promote=promote, workspace=workspace, scheduled=scheduled,
                                        mlflow_conn_id=mlflow_conn_id, **common)
        intake = op.IntakeOperator(task_id=INTAKE, release=start.output, mlflow_conn_id=mlflow_conn_id, **common)
        export = op.ExportOperator(task_id=EXPORT, release=intake.output, **common)
        tensorrt = op.TensorRTOperator(task_id=TENSORRT, release=export.output, queue=tensorrt_queue, **common)
        assemble = op.AssembleOperator(task_id=ASSEMBLE, release=tensorrt.output, **common)
        canary = op.CanaryOperator(task_id=CANARY, release=assemble.output, pool=canary_pool, pool_slots=1,
                                   mlflow_conn_id=mlflow_conn_id, triton_conn_id=triton_conn_id, **common)
        promoted = op.PromoteOperator(task_id=PROMOTE, release=canary.output, channel=channel,
                                      mlflow_conn_id=mlflow_conn_id, **common)
        rollout = op.RolloutOperator(task_id=ROLLOUT, release=promoted.output, channel=channel,
                                     mlflow_conn_id=mlflow_conn_id, **common)
        finish = op.ReleaseFinishOperator(task_id=FINISH, start_task_id=start.task_id, **common)
        [start, promoted, rollout] >> finish  # after the roll-out: a watch's rejection in production is the run's verdict
    return group
