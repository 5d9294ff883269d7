"""The services of the long-running local stack: how each is started and how to tell it is ready.

- ``s3``: the persistent moto endpoint (:mod:`model_release.local.moto_persistent`);
- ``mlflow``: ``mlflow server`` with its UI, one worker, tracking and registry on SQLite,
  artifacts served by the server from a local folder;
- ``airflow-api-server`` (UI and REST), ``airflow-scheduler`` (LocalExecutor as :class:`~model_release.airflow.executor.WarmLocalExecutor`, parallelism 2) and
  ``airflow-dag-processor`` on a SQLite metadata DB, with the ``mlflow_default`` and
  ``aws_default`` connections set in their environment.

All of them listen on 127.0.0.1 only.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from ..errors import ServiceUnavailable
from ..waiting import POLL_S, wait_until
from .airflow_cli import CANARY_POOL
from .http import AirflowApi, AirflowApiError, answers
from .stack_folder import AIRFLOW_USER, HOST, Layout, StackConfig

BIN = Path(sys.executable).parent
DAG_ID = "model_release"


def script(name: str, *args: str) -> list[str]:
    """The command line that runs the venv's console script ``name`` with ``args`` through
    :mod:`model_release.local.quick_exit` (the process ends without the interpreter's last sweep)."""
    return [sys.executable, "-m", "model_release.local.quick_exit", str(BIN / name), *args]


@dataclass
class Service:
    """One process of the stack."""

    name: str
    argv: list[str]
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: seconds the stop waits after SIGTERM before it kills the process group; None: the supervisor's default
    stop_timeout: float | None = None


#: The dag-processor's stop: SIGTERM, then SIGKILL after this many seconds. Stopped while it parses,
#: Airflow's dag-processor waits out its own 5 s escalation delay for a parsing child that had already
#: exited (its children's exits are read on one selector they share, and the wait for the first can
#: take the event the second's wait then never sees): 5.4 s of a 7.1 s `model-release down`, measured
#: by touching the DAG files and stopping 0.5 s later; 0.3 s when it is idle. It parses files into
#: the metadata DB in transactions, so a kill loses nothing: the next start parses them again.
DAG_PROCESSOR_STOP_S = 1.5


def services(layout: Layout, config: StackConfig) -> list[Service]:
    """The stack's processes, in start order."""
    db = (layout.mlflow / "mlflow.db").as_posix()
    return [
        Service("s3", [sys.executable, "-m", "model_release.local.moto_persistent", "--host", HOST,
                       "--port", str(config.ports["s3"]), "--state", str(layout.s3_state)], config.url("s3")),
        Service("mlflow", script("mlflow", "server", "--host", HOST, "--port", str(config.ports["mlflow"]),
                                 "--workers", "1", "--backend-store-uri", f"sqlite:///{db}",
                                 "--artifacts-destination", str(layout.mlflow / "artifacts")),
                config.url("mlflow"), {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}),
        Service("airflow-api-server", script("airflow", "api-server"), config.url("airflow")),
        Service("airflow-scheduler", script("airflow", "scheduler")),
        Service("airflow-dag-processor", script("airflow", "dag-processor"), stop_timeout=DAG_PROCESSOR_STOP_S),
    ]


def init_airflow(layout: Layout, env: dict[str, str], *, stopping: Callable[[], bool]) -> bool:
    """On the first start (or after an Airflow upgrade): ``airflow db migrate``.

    Its output goes to ``logs/airflow-init.log``; a stop request ends it at once. The canary's pool is
    created through the REST API once the api-server answers (:func:`ensure_canary_pool`): a second
    ``airflow`` command here cost a whole Airflow import (8 s idle, about 50 s on a busy 2-core machine)
    before the services could start.

    Returns:
        True when it ran, False when the DB was already initialised for this Airflow version.

    Raises:
        ServiceUnavailable: the migration failed (the message has its output's tail) or start-up was interrupted.
    """
    marker = layout.airflow_home / ".model-release-init"
    wanted = f"apache-airflow {version('apache-airflow')}"
    if marker.is_file() and marker.read_text().strip() == wanted:
        return False
    layout.airflow_home.mkdir(parents=True, exist_ok=True)
    log = layout.log("airflow-init")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(script("airflow", "db", "migrate"), env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    while proc.poll() is None:
        if stopping():
            proc.terminate()
            proc.wait()
            raise ServiceUnavailable("`airflow db migrate`: start-up interrupted")
        time.sleep(0.2)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise ServiceUnavailable(
            f"`airflow db migrate` failed (exit {proc.returncode}) in {layout.airflow_home}: {tail} (log: {log})"
        )
    marker.write_text(wanted + "\n")
    return True


def ensure_canary_pool(api: AirflowApi, *, within_s: float = 60.0, stopping: Callable[[], bool] = lambda: False,
                       sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.monotonic) -> bool:
    """Create the canary's pool (one slot) unless it exists; a pool someone changed is left as it is.

    Airflow's local database is SQLite: when another process held the file's lock for longer than the stack's
    processes wait for it (:mod:`.airflow_sqlite`), the api-server answers 500 ("Database error"); on a busy
    machine it may not answer at all. Such answers are asked again (:func:`wait_until`) for ``within_s`` seconds;
    any other refusal is final at once.

    Returns:
        True when it was created now.

    Raises:
        ServiceUnavailable: Airflow refused to create it, or still failed after ``within_s`` (the message has its answer).
    """
    name, slots, description = CANARY_POOL
    by_hand = f"Create it: airflow pools set {name} {slots} '{description}'"
    made: list[bool] = []

    def failed(exc: AirflowApiError, doing: str) -> str:
        """Why it is not made yet, for an answer worth asking again; raised at once for any other."""
        why = f"Airflow did not {doing}: {exc}"
        if exc.status is not None and exc.status < 500:
            raise ServiceUnavailable(f"{why}. {by_hand}") from None
        return why

    def check() -> str | None:
        try:
            api.get(f"/api/v2/pools/{name}")
            made.append(False)
            return None
        except AirflowApiError as exc:
            if exc.status != 404:
                return failed(exc, f"say whether pool {name!r} exists")
        try:
            api.post("/api/v2/pools", {"name": name, "slots": int(slots), "description": description})
        except AirflowApiError as exc:
            if exc.status != 409:  # created meanwhile: as good
                return failed(exc, f"create pool {name!r}")
        made.append(True)
        return None

    wait_until(check, what=f"Airflow's pool {name!r} ({by_hand})", timeout=within_s, stopping=stopping, sleep=sleep,
               clock=clock)
    return made[-1]


def http_ready(url: str, path: str) -> Callable[[], str | None]:
    def check() -> str | None:
        status = answers(url + path)
        return None if status == 200 else f"GET {path} answered {status or 'nothing'}"

    return check


def airflow_ready(config: StackConfig, password: str) -> Callable[[], str | None]:
    """Ready when the scheduler and dag-processor are healthy and the release DAG is parsed, without import errors."""
    api = AirflowApi(config.url("airflow"), AIRFLOW_USER, password)

    def check() -> str | None:
        try:
            health = api.health()
            unhealthy = [k for k in ("metadatabase", "scheduler", "dag_processor")
                         if (health.get(k) or {}).get("status") != "healthy"]
            if unhealthy:
                return f"not healthy yet: {', '.join(unhealthy)}"
            errors = api.get("/api/v2/importErrors").get("import_errors", [])
            if errors:
                first = errors[0]
                raise ServiceUnavailable(
                    f"Airflow cannot import {first.get('filename')}: {str(first.get('stack_trace', ''))[-800:]} "
                    "Fix the DAG file; the dag-processor reads it again within 30 s."
                )
            api.get(f"/api/v2/dags/{DAG_ID}")
            return None
        except AirflowApiError as exc:
            return str(exc)

    return check
