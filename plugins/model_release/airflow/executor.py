"""The local stack's executor: Airflow's LocalExecutor, with the release tasks' libraries imported once.

Airflow 3's LocalExecutor forks its worker processes from the scheduler when it starts, and each
worker forks one process per task. Each task process then imports what its task needs on first use
(MLflow, scikit-learn and skops, ONNX and onnxruntime, Triton's client, boto3, matplotlib): seconds
of CPU per task on two cores, paid again by each task of a release (the intake and the export
each took about 10 s on a 2-core machine, most of it importing). :class:`WarmLocalExecutor`
imports :data:`PRELOAD` in the scheduler before the workers are forked, so every task process
starts with them in memory (shared copy-on-write, as Airflow shares its own modules), and with
the cyclic GC's thresholds of :data:`model_release.GC_THRESHOLD`.

Only third-party libraries are preloaded: the pipeline's own modules (``model_release.*``, the DAG
files) are still imported by each task, so an edit to ``plugins/`` or ``dags/`` reaches the next task
as before. A library that fails to import is logged and left to the task that needs it. It only
applies where workers are forked (multiprocessing's ``fork`` start method, Linux' default); the
Celery workers get the same through :mod:`model_release.airflow.celery_config`.
"""

from __future__ import annotations

import importlib
import logging
import time

from airflow.executors.local_executor import LocalExecutor

log = logging.getLogger(__name__)

#: what the release DAG's tasks import on first use, heaviest first (skops through model_release.model.skops_import)
PRELOAD = ("mlflow.sklearn", "mlflow.pyfunc", "mlflow.onnx", "skops.io", "sklearn.linear_model", "onnx", "onnxruntime",
           "skl2onnx", "tritonclient.http", "boto3", "matplotlib.figure", "scipy.stats", "pandas")


def preload(modules: tuple[str, ...] = PRELOAD) -> dict[str, str]:
    """Import ``modules``; what became of each (``"0.8 s"``, or the error), for the log."""
    from model_release.model.skops_import import import_skops

    done: dict[str, str] = {}
    for name in modules:
        started = time.perf_counter()
        try:
            import_skops() if name == "skops.io" else importlib.import_module(name)
            done[name] = f"{time.perf_counter() - started:.1f} s"
        except Exception as exc:  # noqa: BLE001 - the task that needs it reports it where it belongs
            done[name] = f"not imported ({type(exc).__name__}: {exc})"
    return done


def warm_before_fork(who: str) -> None:
    """In a process about to fork the task processes: :func:`~model_release.collect_less` and :func:`preload`
    (both inherited by the forks), and one log line of what it took."""
    from model_release import collect_less

    collect_less()
    started = time.perf_counter()
    done = preload()
    log.info("%s: preloaded for the task processes in %.1f s: %s", who, time.perf_counter() - started,
             ", ".join(f"{k} {v}" for k, v in done.items()))


class WarmLocalExecutor(LocalExecutor):
    """:class:`LocalExecutor` whose forked workers, and so their task processes, start with :data:`PRELOAD` imported."""

    def start(self) -> None:
        if self.is_mp_using_fork:
            warm_before_fork("WarmLocalExecutor")
        super().start()
