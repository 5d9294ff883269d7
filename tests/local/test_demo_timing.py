"""The demo's times, read off ``dag.test()``'s own task lines, and the DAG session's refusal of bad arguments."""

from __future__ import annotations

import pytest

from model_release.airflow import dag_runner
from model_release.local.demo import task_spans


def line(at: str, what: str, task: str) -> str:
    return (f"2026-12-02T13:{at}Z [info     ] [DAG TEST] {what} task_id={task} map_index=-1 "
            "[airflow.sdk.definitions.dag] loc=dag.py:1501")


PROMOTED = "\n".join([
    line("12:55.500000", "starting", "start"), line("13:01.000000", "end task", "start"),
    line("13:01.250000", "starting", "intake"), "intake: models:/iris-classifier/1 (3.1 s)", line("13:04.500000", "end task", "intake"),
    line("13:05.000000", "starting", "canary"), line("13:34.750000", "end task", "canary"),
    line("13:35.000000", "starting", "promote"), line("13:36.000000", "end task", "promote"),
    line("13:36.100000", "starting", "rollout"), line("13:47.100000", "end task", "rollout"),
])


def test_spans_run_from_intake_to_promote_and_count_the_roll_out_apart() -> None:
    spans = task_spans(PROMOTED)
    assert spans["intake..promote"] == pytest.approx(34.75)
    assert spans["canary"] == pytest.approx(29.75) and spans["rollout"] == pytest.approx(11.0)
    assert spans["start"] == pytest.approx(5.5)


def test_a_refused_release_ends_at_the_canary_and_a_task_that_never_ended_has_no_span() -> None:
    refused = "\n".join(PROMOTED.splitlines()[:8] + [line("13:50.000000", "starting", "finish")])
    spans = task_spans(refused)
    assert spans["intake..promote"] == pytest.approx(33.5)  # intake's start to the canary's end
    assert "promote" not in spans and "finish" not in spans


def test_output_without_task_lines_gives_no_spans() -> None:
    assert task_spans("airflow printed nothing of its tasks\n") == {}


def test_the_dag_session_refuses_unknown_arguments_and_says_what_is_valid(capsys) -> None:
    assert dag_runner.main(["MARK", "--wram", "model_release"]) == 2
    err = capsys.readouterr().err
    assert "unknown arguments ['--wram', 'model_release']" in err and "valid: MARK [--warm DAG_ID]" in err


def test_a_task_tried_twice_is_timed_by_its_last_try_and_its_tries_are_counted() -> None:
    lines = PROMOTED.splitlines()
    retried = "\n".join(lines[:6] + [line("13:20.000000", "end task", "canary"), line("13:22.000000", "starting", "canary")]
                        + lines[6:])
    spans = task_spans(retried)
    assert spans["canary"] == pytest.approx(12.75) and spans["canary tries"] == 2
    assert spans["intake..promote"] == pytest.approx(34.75) and "intake tries" not in spans
