"""An inconclusive canary in Airflow: the canary task reschedules itself, bounded by ``canary.inconclusive``,
then ends the run saying the version stays open. Never a rejection, never an immediate retry."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from model_release.errors import CanaryInconclusive, CanaryRejected, SpecError
from model_release.spec import InconclusiveSpec, parse_spec

NOW = datetime(2026, 12, 2, 3, 0, tzinfo=timezone.utc)
EXC = CanaryInconclusive("the canary of iris (iris-a) is inconclusive: no gate failed, but p99 ... straddles ...",
                         stage="canary")

# Airflow and model_release.airflow.tasks (which imports it) take seconds to import: each test imports
# them, so collecting this file on every pytest-xdist worker does not.


@pytest.mark.parametrize("reschedules", [0, 1])
def test_while_reschedules_are_left_the_task_tries_again_after_the_delay(reschedules) -> None:
    from airflow.sdk.exceptions import AirflowRescheduleException

    from model_release.airflow.tasks import inconclusive_next

    raised = inconclusive_next(EXC, InconclusiveSpec(retries=2, retry_delay_s=600), reschedules, now=NOW)
    assert isinstance(raised, AirflowRescheduleException)  # up for reschedule: no try spent, the pool slot freed
    assert raised.reschedule_date == NOW + timedelta(seconds=600)


def test_the_last_try_ends_the_run_failed_saying_why_and_that_the_version_stays_open() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from model_release.airflow.tasks import inconclusive_next

    raised = inconclusive_next(EXC, InconclusiveSpec(retries=2, retry_delay_s=600), 2, now=NOW)
    assert isinstance(raised, AirflowFailException)  # not retried by the task's own retries either
    message = str(raised)
    assert message.startswith("[canary_inconclusive] canary: the canary of iris (iris-a) is inconclusive")
    assert "stayed inconclusive over 3 tries (canary.inconclusive.retries 2, 600 s apart)" in message
    assert "nothing was promoted or rejected" in message and "stays open in the channel's ledger" in message


def test_no_retries_configured_ends_at_once() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from model_release.airflow.tasks import inconclusive_next

    raised = inconclusive_next(EXC, InconclusiveSpec(retries=0), 0, now=NOW)
    assert isinstance(raised, AirflowFailException) and "over 1 try " in str(raised)


def test_the_defaults_and_bounds_of_canary_inconclusive() -> None:
    spec = parse_spec({"name": "iris", "model": {"name": "m", "alias": "candidate"}})
    assert (spec.canary.inconclusive.retries, spec.canary.inconclusive.retry_delay_s) == (2, 600.0)
    custom = parse_spec({"name": "iris", "model": {"name": "m", "alias": "candidate"},
                         "canary": {"inconclusive": {"retries": 5, "retry_delay_s": 30}}})
    assert custom.canary.inconclusive == InconclusiveSpec(retries=5, retry_delay_s=30)
    for bad in ({"retries": -1}, {"retries": 21}, {"retry_delay_s": -1}, {"tries": 2}):
        with pytest.raises(SpecError, match="canary.inconclusive"):
            parse_spec({"name": "iris", "model": {"name": "m", "alias": "candidate"}, "canary": {"inconclusive": bad}})


def test_an_inconclusive_canary_is_neither_a_user_error_nor_a_rejection_and_its_reschedule_goes_through_the_task() -> None:
    """The task wrapper fails user errors at once; the reschedule the canary task raises passes it unchanged."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException

    from model_release.airflow.tasks import inconclusive_next, no_retry_on_user_error

    assert not isinstance(EXC, CanaryRejected) and EXC.exit_code == 5 and EXC.kind == "canary_inconclusive"

    @no_retry_on_user_error
    def canary_task(reschedules: int) -> None:
        try:
            raise EXC
        except CanaryInconclusive as exc:
            raise inconclusive_next(exc, InconclusiveSpec(retries=1, retry_delay_s=5), reschedules, now=NOW) from exc

    with pytest.raises(AirflowRescheduleException):
        canary_task(0)
    with pytest.raises(AirflowFailException, match="over 2 tries"):
        canary_task(1)
