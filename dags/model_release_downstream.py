"""An example downstream DAG: runs on every event of the production channel's Asset.

A promotion (or a rollback) of channel ``production`` emits an event whose ``extra`` names the
release; this DAG reads it, which is how a consumer (a deployment, a notification) learns what the
channel now serves. Copy it and replace the task's body.
"""

from __future__ import annotations

from airflow.sdk import DAG, get_current_context, task

from model_release.airflow import channel_asset

PRODUCTION = channel_asset("production")

with DAG(
    dag_id="model_release_downstream_example",
    description="Example consumer of the production channel's Asset events",
    doc_md=__doc__,
    schedule=[PRODUCTION],
    catchup=False,
    tags=["model-release", "example"],
) as dag:

    @task
    def what_production_serves() -> list[dict]:
        events = get_current_context()["triggering_asset_events"][PRODUCTION]
        seen = [{"action": e.extra.get("action", "promote"), "release_id": e.extra.get("release_id"),
                 "store": e.extra.get("store"), "prefix": e.extra.get("prefix")} for e in events]
        for event in seen:
            print(f"channel production now serves {event['release_id']} ({event['action']}; {event['store']})")
        return seen

    what_production_serves()
