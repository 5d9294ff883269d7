"""The release DAG's shape, built once for the manual DAG and for every scheduled one (``dags/``).

``start -> intake -> export -> tensorrt (queue gpu) -> assemble -> canary (pool triton_canary) -> promote
-> rollout`` (a plan the serving agents follow, one at a time by its lease; skipped with no agent), and
``finish`` whatever happened (``trigger_rule="all_done"``, after the roll-out), which settles the run's
claim in the channel's ledger.
``promote`` emits the channel's Asset event; ``rollout`` emits one only when its watch rolled the release
back (through the channel's rollback alias, so an ordinary roll-out emits nothing). Task bodies are one
line into :mod:`model_release.airflow.tasks`; nothing heavy is imported at parse time.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Asset, AssetAlias, get_current_context, task

from ..stages import ASSEMBLE, CANARY, EXPORT, FINISH, INTAKE, PROMOTE, ROLLOUT, START, TENSORRT

#: the XCom key start leaves when it skips the run (nothing new to release), with the reason
NOTHING_NEW = "nothing_new"
#: the retry delay of the release tasks (``$MODEL_RELEASE_RETRY_DELAY_S``, default 30 s)
RETRY_DELAY = timedelta(seconds=float(os.environ.get("MODEL_RELEASE_RETRY_DELAY_S", "30")))


def channel_asset(channel: str) -> Asset:
    """The Asset a channel's promotions (and rollbacks) emit events on; downstream DAGs schedule on it."""
    return Asset(name=f"model_release_channel_{channel}", uri=f"model-release://channels/{channel}")


def watch_rollback_alias(channel: str) -> AssetAlias:
    """The alias the rollout task emits the channel's Asset event through when its watch rolled back.

    A task's plain Asset outlet emits an event on every success; through an alias the roll-out emits
    one only when it adds the channel's Asset (a rollback by the watch), never for an ordinary roll-out.
    """
    return AssetAlias(name=f"model_release_channel_{channel}_watch_rollbacks")


def registry_asset(spec_name: str) -> Asset:
    """The Asset a spec's scheduled DAG runs on when its model's alias moves (posted by the webhook receiver)."""
    from ..registry_events.routes import asset_name, asset_uri

    return Asset(name=asset_name(spec_name), uri=asset_uri(spec_name))


def release_schedule(spec_name: str, schedule: Any) -> Any:
    """A scheduled DAG's ``schedule=``: the registry Asset's events *or* the spec's time schedule.

    Args:
        spec_name: the spec's name (its Asset).
        schedule: what :func:`~model_release.spec.schedule_value` gives: a cron or preset string, a
            timedelta, or None (then the Asset alone).
    """
    from datetime import timedelta as _timedelta

    from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, DeltaTriggerTimetable

    asset = registry_asset(spec_name)
    if schedule is None:
        return [asset]
    timetable = (DeltaTriggerTimetable(schedule) if isinstance(schedule, _timedelta)
                 else CronTriggerTimetable(schedule, timezone="UTC"))
    return AssetOrTimeSchedule(timetable=timetable, assets=[asset])


def run_facts() -> dict[str, Any]:
    """The running DAG run, for the release manifest: DAG id, run type, the DAG bundle and its version."""
    ctx = get_current_context()
    ti = ctx["ti"]
    bundle = getattr(ti, "bundle_instance", None)
    return {
        "dag_id": ctx["dag"].dag_id,
        "run_type": str(getattr(ctx["dag_run"], "run_type", "") or ""),
        "bundle_name": getattr(bundle, "name", None),
        "bundle_version": getattr(bundle, "version", None),
    }


def _is_active(holder: dict[str, Any]) -> bool:
    """Whether the run holding a ledger claim is still queued or running (asked through the Task SDK)."""
    if not holder.get("dag_id") or not holder.get("run_id"):
        return False
    try:
        state = get_current_context()["ti"].get_dagrun_state(holder["dag_id"], holder["run_id"])
    except Exception:  # noqa: BLE001 - a run that cannot be found is not running
        return False
    return str(state).rsplit(".", 1)[-1].lower() in ("queued", "running")


def build_release_dag(dag: DAG, *, channel: str, scheduled: bool, retry_delay: timedelta = RETRY_DELAY) -> None:
    """Add the release tasks to ``dag`` (inside its ``with`` block)."""
    asset = channel_asset(channel)
    retries = {"retries": 1, "retry_delay": retry_delay}

    @task(task_id=START, **retries)
    def start() -> dict:
        from model_release.airflow import tasks

        from airflow.sdk.exceptions import AirflowSkipException

        ctx = get_current_context()
        try:
            return tasks.start(dict(ctx["params"]), ctx["run_id"], ctx["dag_run"].run_after, run=run_facts(),
                               scheduled=scheduled, is_active=_is_active)
        except AirflowSkipException as exc:  # finish tells "nothing to release" from "start failed" by this
            ctx["ti"].xcom_push(key=NOTHING_NEW, value=str(exc))
            raise

    @task(task_id=INTAKE, **retries)
    def intake(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.intake(ref)

    @task(task_id=EXPORT, **retries)
    def export(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.export(ref)

    @task(task_id=TENSORRT, queue="gpu", **retries)
    def tensorrt(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.tensorrt(ref)

    @task(task_id=ASSEMBLE, **retries)
    def assemble(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.assemble(ref)

    # a gate's refusal fails at once (no retry); an outage, or a worker lost mid-canary, is retried; an
    # inconclusive canary reschedules itself (canary.inconclusive: bounded, its pool slot freed meanwhile)
    @task(task_id=CANARY, pool="triton_canary", pool_slots=1, **retries)
    def canary(ref: dict) -> dict:
        from model_release.airflow import tasks

        return tasks.canary(ref, reschedules=int(get_current_context().get("task_reschedule_count") or 0))

    @task(task_id=PROMOTE, outlets=[asset], **retries)
    def promote(ref: dict) -> dict:
        from model_release.airflow import tasks

        ref = tasks.promote(ref)
        promoted = ref["stages"].get(PROMOTE)
        if promoted and promoted["channel"] == channel:
            get_current_context()["outlet_events"][asset].extra = {
                "action": "promote", "release_id": promoted["release_id"], "store": promoted["store_uri"],
                "prefix": promoted["release_prefix"], "channel": promoted["channel"],
                "previous_release": promoted["previous_release"],
            }
        return ref

    rollbacks = watch_rollback_alias(channel)

    @task(task_id=ROLLOUT, outlets=[rollbacks], **retries)  # one at a time: the roll-out's lock in the store
    def rollout_task(ref: dict) -> dict:
        from model_release.airflow import tasks

        ctx = get_current_context()
        result = tasks.rollout(ref, ctx["run_id"])
        extra = tasks.watch_rollback_event(result)
        if extra is not None and extra["channel"] == channel:  # the watch rolled back: the channel's consumers hear it
            ctx["outlet_events"][rollbacks].add(asset, extra=extra)
        return result

    @task(task_id=FINISH, trigger_rule="all_done", **retries)
    def finish() -> dict:
        from model_release.airflow import tasks

        # pulled, not passed: a skipped or failed start leaves no reference, and that is an answer too
        ti = get_current_context()["ti"]
        return tasks.finish(ti.xcom_pull(task_ids=START), nothing_new=ti.xcom_pull(task_ids=START, key=NOTHING_NEW))

    ref = start()
    done = promote(canary(assemble(tensorrt(export(intake(ref))))))
    rolled = rollout_task(done)
    settled = finish()
    [ref, done, rolled] >> settled  # after the roll-out: a watch's rejection in production is the run's verdict
