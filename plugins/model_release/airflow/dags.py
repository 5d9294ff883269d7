"""The Assets and schedules of the release DAGs: what a release's tasks emit on, what a scheduled DAG runs on.

- :func:`channel_asset`: a channel's Asset; ``promote`` emits on it (and the rollback DAG); downstream
  DAGs schedule on it.
- :func:`watch_rollback_alias`: the alias ``rollout`` emits the channel's event through, only when its
  watch rolled the release back (so an ordinary roll-out emits nothing).
- :func:`registry_asset` and :func:`release_schedule`: a scheduled DAG's registry Asset (posted by the
  webhook receiver when the spec's alias moves) *or* its spec's time schedule.

The release tasks themselves are :mod:`.operators`, chained by :func:`~.task_group.release_task_group`.
Nothing heavy is imported here: DAG files import it at parse time.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import Asset, AssetAlias

from ..names import ASSET_SCHEME

#: the XCom key start leaves when it skips the run (nothing new to release), with the reason
NOTHING_NEW = "nothing_new"
#: the retry delay of the release tasks (``$MODEL_RELEASE_RETRY_DELAY_S``, default 30 s)
RETRY_DELAY = timedelta(seconds=float(os.environ.get("MODEL_RELEASE_RETRY_DELAY_S", "30")))


def channel_asset(channel: str) -> Asset:
    """The Asset a channel's promotions (and rollbacks) emit events on; downstream DAGs schedule on it."""
    return Asset(name=f"model_release_channel_{channel}", uri=f"{ASSET_SCHEME}://channels/{channel}")


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
