"""WarmLocalExecutor: the release libraries are imported in the scheduler before its workers fork."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from model_release import GC_THRESHOLD
from model_release.airflow.executor import PRELOAD, preload
from model_release.local.stack_folder import Layout, load_config, stack_env

PROBE = r"""
import json, os, sys
from model_release.airflow.executor import PRELOAD, WarmLocalExecutor
before = [m for m in PRELOAD if m in sys.modules]
executor = WarmLocalExecutor(parallelism=1)
executor.start()
workers = len(executor.workers)
after = [m for m in PRELOAD if m not in sys.modules]
# the provider's info (data only) is Airflow's own import, through the apache_airflow_provider entry point
ours = sorted(m for m in sys.modules if m.startswith("model_release.") and m not in (
    "model_release.airflow", "model_release.airflow.executor", "model_release.airflow.provider", "model_release.model",
    "model_release.model.skops_import"))
executor.end()
import gc
print(json.dumps({"before": before, "missing_after": after, "workers": workers, "ours": ours, "torch": "torch" in sys.modules,
                  "gc": list(gc.get_threshold())}))
"""


def test_the_scheduler_imports_the_release_libraries_before_it_forks_its_workers(tmp_path: Path) -> None:
    env = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": "/usr/bin:/bin",
           "AIRFLOW__CORE__EXECUTOR": "model_release.airflow.executor.WarmLocalExecutor"}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["before"] == [] and seen["missing_after"] == [] and seen["workers"] == 1
    assert seen["ours"] == []  # the pipeline's own modules are left for each task to import fresh
    assert seen["torch"] is False
    assert seen["gc"] == list(GC_THRESHOLD)


def test_a_library_that_fails_to_import_is_reported_and_the_rest_still_load() -> None:
    done = preload(("model_release_no_such_library", "json"))
    assert done["model_release_no_such_library"].startswith("not imported (ModuleNotFoundError: No module named")
    assert done["json"].endswith(" s")


def test_the_local_stack_runs_its_tasks_through_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "stack")
    env = stack_env(layout, load_config(layout)[0])
    assert env["AIRFLOW__CORE__EXECUTOR"] == "model_release.airflow.executor.WarmLocalExecutor"
    assert "skops.io" in PRELOAD and not any(m.startswith("model_release") for m in PRELOAD)


def test_celery_keeps_airflow_s_config_and_only_a_worker_s_start_preloads(monkeypatch) -> None:  # noqa: ANN001
    from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG
    from celery.signals import celeryd_init

    from model_release.airflow import celery_config

    assert celery_config.CELERY_CONFIG is DEFAULT_CELERY_CONFIG  # Airflow's own, so Airflow applies nothing over it
    calls: list[int] = []
    monkeypatch.setattr("model_release.airflow.executor.preload", lambda: calls.append(1) or {"json": "0.0 s"})
    assert calls == []  # importing the module (scheduler, api-server) preloads nothing
    celeryd_init.send(sender="celery@worker", instance=None, conf=None, options={})
    assert calls == [1]
