"""The rollout task's channel Asset event: emitted only for a rollback by the watch, with what a consumer needs."""

from __future__ import annotations

# model_release.airflow.tasks imports Airflow (seconds): the tests import it, so collecting this file on
# every pytest-xdist worker does not.

ROLLED = {"release_id": "iris-r4", "to_release": "iris-r3", "wave": 1, "servers": ["serve-1"], "pointer_moved": True,
          "mlflow_alias": "production", "reason": "rolled back by the watch: probe error rate 100.0% against 0.0%, limit 1.0%"}


def rolled_back(**over) -> dict:
    from model_release.airflow.tasks import ROLLED_BACK_OUTCOME

    return {"release_id": "iris-r4", "outcome": ROLLED_BACK_OUTCOME, "channel": "production",
            "store": "s3://model-store/iris", "rolled_back": dict(ROLLED), "message": "...", **over}


def test_a_rollback_by_the_watch_names_both_releases_the_reason_and_the_channel() -> None:
    from model_release.airflow.tasks import watch_rollback_event

    assert watch_rollback_event(rolled_back()) == {
        "action": "rollback", "by": "watch", "release_id": "iris-r3", "previous_release": "iris-r4",
        "store": "s3://model-store/iris", "channel": "production", "reason": ROLLED["reason"], "wave": 1,
        "servers": ["serve-1"], "mlflow_alias": "production",
    }


def test_the_event_is_shaped_like_the_rollback_dags_for_the_downstream_consumer() -> None:
    from model_release.airflow.tasks import watch_rollback_event

    # dags/model_release_downstream.py reads action, release_id (what the channel serves now) and store
    event = watch_rollback_event(rolled_back())
    assert event is not None and {"action", "release_id", "previous_release", "store", "channel"} <= set(event)


def test_no_event_for_anything_but_a_rollback_by_the_watch() -> None:
    from model_release.airflow.tasks import watch_rollback_event

    done = {"release_id": "iris-r4", "outcome": "done", "seq": 3, "servers": {"serve-1": "switched"}, "watch": {}}
    assert watch_rollback_event(done) is None
    assert watch_rollback_event(None) is None
    assert watch_rollback_event({}) is None
    # just outside: the outcome says rolled back but no rollback facts came with it
    assert watch_rollback_event(rolled_back(rolled_back=None)) is None
    assert watch_rollback_event(rolled_back(outcome="stopped")) is None
