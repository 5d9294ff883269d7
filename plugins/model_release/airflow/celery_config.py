"""Celery workers whose task processes start with the release tasks' libraries imported.

``[celery] celery_config_options = model_release.airflow.celery_config.CELERY_CONFIG`` keeps Airflow's
Celery configuration as it is (this module's ``CELERY_CONFIG`` *is* Airflow's default) and, on the way,
connects a handler to Celery's ``celeryd_init`` signal, which fires once in a worker's main process
before it forks its pool. The handler imports what the release DAG's tasks import
(:func:`model_release.airflow.executor.warm_before_fork`), so the pool processes, and the process Airflow forks
from them for each task, start with it in memory: the Celery counterpart of the local stack's
:class:`~model_release.airflow.executor.WarmLocalExecutor`. Where the scheduler or the api-server
import this module, nothing is imported: the signal fires only in a worker.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG
from celery.signals import celeryd_init

#: Airflow's own Celery configuration, unchanged (the same object, so Airflow treats it as its default)
CELERY_CONFIG = DEFAULT_CELERY_CONFIG


def _preload_in_worker(**_: Any) -> None:
    from . import executor

    executor.warm_before_fork("celery worker")


celeryd_init.connect(_preload_in_worker, weak=False)
