"""The canary task's retry of an inconclusive canary, on a real Airflow: a plain task (not a sensor) that
raises the reschedule :func:`~model_release.airflow.tasks.inconclusive_next` returns is rescheduled after
the delay without spending a try, sees ``task_reschedule_count`` grow, and fails on its last try without
the task's own retries taking over. Run as ``dag.test()`` on a migrated SQLite DB in a fresh Airflow home."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.dags, pytest.mark.slow]

DAG = '''
from datetime import datetime
from airflow.sdk import DAG, task, get_current_context

with DAG("inconclusive_probe", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    @task(retries=1)  # an outage's retry: an inconclusive canary's last try must not take it
    def canary():
        from model_release.airflow.tasks import inconclusive_next
        from model_release.errors import CanaryInconclusive
        from model_release.spec import InconclusiveSpec

        count = int(get_current_context().get("task_reschedule_count") or 0)
        print("PROBE reschedules", count, flush=True)
        exc = CanaryInconclusive("p99 ratio straddles its limit", stage="canary")
        raise inconclusive_next(exc, InconclusiveSpec(retries=2, retry_delay_s=1), count) from exc

    canary()
'''

#: migrates the fresh home's DB as ``airflow db migrate`` does (its ``upgradedb``), then runs the DAG: one
#: process, so Airflow's start-up is paid once (a separate ``airflow db migrate`` cost about 3 s of CPU)
RUN = '''
import sys
from airflow.utils.db import upgradedb
upgradedb()
sys.path.insert(0, sys.argv[1])
from probe import dag
run = dag.test()
ti = run.get_task_instances()[0]
print("PROBE run", run.state, "task", ti.state, "try", ti.try_number, flush=True)
'''


def test_an_inconclusive_canary_task_is_rescheduled_twice_then_fails_on_a_real_airflow(tmp_path) -> None:
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "probe.py").write_text(DAG)
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "dags")}
    ran = subprocess.run([sys.executable, "-c", RUN, str(tmp_path / "dags")], env=env, capture_output=True, text=True,
                         timeout=600)
    out = ran.stdout + ran.stderr
    probes = [line.split("PROBE ", 1)[1].strip() for line in out.splitlines() if "PROBE " in line]
    assert probes[:3] == ["reschedules 0", "reschedules 1", "reschedules 2"], out[-5000:]
    assert probes[-1] == "run failed task failed try 1", out[-5000:]  # no try spent on the reschedules, none after
    assert out.count("marking task as UP_FOR_RESCHEDULE") == 2
    assert "stayed inconclusive over 3 tries (canary.inconclusive.retries 2, 1 s apart)" in out
