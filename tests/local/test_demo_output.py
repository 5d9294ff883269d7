"""The demo's default output: stage progress and decisions, no traceback for a task that fails by design."""

from __future__ import annotations

from model_release.local.demo import _progress_line

# lines of a real `make demo` run (release 2 blocked by the canary, release 4 rolled back by the watch), shortened
BLOCKED = [
    "2026-12-06T07:18:22.342391Z [error    ] canary: the canary of iris (iris-20261206T071816Z-e12c) was rejected: "
    "accuracy of the served candidate is 0.82 on the golden set's ground truth [model_release.pipeline] loc=pipeline.py:110",
    "Traceback (most recent call last):",
    '  File "/work/.venv/lib/python3.11/site-packages/airflow/sdk/execution_time/task_runner.py", line 1041, in run',
    "model_release.errors.CanaryRejected: the canary of iris (iris-20261206T071816Z-e12c) was rejected: accuracy 0.82",
    "airflow.sdk.exceptions.AirflowFailException: release iris-20261206T071853Z-53e0 of iris-classifier v4 rejected: "
    "rejected in production: rolled back by the watch: error rate 20.41% against 0.0%, limit 1.0%",
    "2026-12-06T07:18:22.525715Z [info     ] [DAG TEST] end task task_id=canary map_index=-1 [airflow.sdk.definitions.dag]",
]


def test_a_refused_task_shows_its_decision_line_and_no_traceback() -> None:
    shown = [line for line in BLOCKED if _progress_line(line)]
    assert shown == [BLOCKED[0], BLOCKED[-1]]


def test_error_records_and_stage_lines_are_still_shown() -> None:
    for line in ("2026-12-06T07:16:33Z [info     ] intake: resolving models:/iris-classifier/3 [model_release.pipeline]",
                 "2026-12-06T07:19:25Z [warning  ] Task failed with error ServiceUnavailable: MLflow did not answer",
                 "[dag session] ready in 4.1 s"):
        assert _progress_line(line), line
    assert not _progress_line("2026-12-06T07:16:33Z [info     ] Filling up the DagBag from /dags [airflow.models.dagbag]")
