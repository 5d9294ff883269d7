"""The embedded stack: everything a release needs, on one machine, started and stopped by code.

- MLflow tracking and registry on SQLite, artifacts in a local folder;
- a local S3 endpoint (the moto server over HTTP on 127.0.0.1, a free port) with the store bucket;
- an Airflow home with a migrated SQLite metadata DB, for ``airflow dags test``;
- the local Triton is started by the canary stage itself (:mod:`model_release.triton.local`).

This is the stack of ``make demo`` and the end-to-end tests: it lives as long as the ``with`` block.
``model-release up`` runs the same pieces as long-running services, MLflow as a server and S3 with
its state on disk (:mod:`model_release.local.up`).

Use it as a context manager: every process it started is stopped on exit, also on error::

    with EmbeddedStack(Path(".work/demo")) as stack:
        stack.run_dag({"spec": "releases/iris.yaml", "release_id": "iris-1"})
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from .. import project_home
from . import airflow_sqlite
from .airflow_cli import PREPARE_DB, airflow_commands
from .procs import StartedOnEnter

log = logging.getLogger(__name__)

#: what :mod:`model_release.airflow.dag_runner` is told to print after each run, before the run's end as JSON
RUN_END_MARK = "MODEL_RELEASE_DAG_RUN_END "


def connection_env(tracking_uri: str, endpoint_url: str) -> dict[str, str]:
    """Airflow's ``mlflow_default`` and ``aws_default`` connections for a stack, as environment variables.

    The S3 connection carries the local endpoint's dummy credentials (moto accepts any).
    """
    from .moto_process import _MOTO_KEY_ID, _MOTO_SECRET

    aws = {"conn_type": "aws", "login": _MOTO_KEY_ID, "password": _MOTO_SECRET,
           "extra": {"endpoint_url": endpoint_url, "region_name": "us-east-1"}}
    return {
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(aws),
        "AIRFLOW_CONN_MLFLOW_DEFAULT": json.dumps({"conn_type": "mlflow", "extra": {"tracking_uri": tracking_uri}}),
    }


@dataclass
class DagRunOutcome:
    returncode: int
    state: str | None
    output: str


class EmbeddedStack(StartedOnEnter):
    """MLflow (SQLite) + S3 (moto server) + an Airflow home, under ``root``.

    Args:
        root: a folder for the stack's state (created).
        bucket: the model store's bucket, created on start.
    """

    def __init__(self, root: Path, *, bucket: str = "model-store") -> None:
        self.root = Path(root).resolve()
        self.bucket = bucket
        self.moto: Any = None
        self.tracking_uri: str | None = None
        self.airflow_home = self.root / "airflow"
        self.workspace = self.root / "workspace"
        #: more environment for the processes the stack runs (a fleet file for the rollout task)
        self.extra_env: dict[str, str] = {}
        self._migrated = False

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "EmbeddedStack":
        from .mlflow import local_tracking
        from .moto_process import MotoServer, ensure_bucket

        self.root.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(exist_ok=True)
        self.tracking_uri = local_tracking(self.root / "mlflow")
        self.moto = MotoServer().start()
        ensure_bucket(self.moto.endpoint_url, self.bucket)
        log.info("embedded stack: MLflow %s, S3 %s (bucket %s)", self.tracking_uri, self.moto.endpoint_url, self.bucket)
        return self

    def stop(self) -> None:
        if self.moto is not None:
            self.moto.stop()
            self.moto = None

    # -- what other processes need -----------------------------------------------------------
    @property
    def endpoint_url(self) -> str:
        return self.moto.endpoint_url

    def s3_client(self) -> Any:
        return self.moto.client()

    def env(self) -> dict[str, str]:
        """Environment for a subprocess (``airflow dags test``, the CLI) that uses this stack."""
        env = dict(os.environ)
        home = project_home().resolve()
        env.update(  # the registry too: mlflow.set_registry_uri exports another stack's into os.environ
            MLFLOW_TRACKING_URI=str(self.tracking_uri),
            MLFLOW_REGISTRY_URI=str(self.tracking_uri),
            MLFLOW_DISABLE_TELEMETRY="true",
            DO_NOT_TRACK="true",
            MODEL_RELEASE_WORKSPACE=str(self.workspace),
            MODEL_RELEASE_HOME=str(home),
            AIRFLOW_HOME=str(self.airflow_home),
            AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__PARALLELISM="4",
            AIRFLOW__LOGGING__COLORED_CONSOLE_LOG="False",
            **airflow_sqlite.ENV,
            **connection_env(str(self.tracking_uri), self.endpoint_url),
        )
        env.update(self.extra_env)
        env.pop("AWS_PROFILE", None)
        return env

    def migrate_airflow(self) -> None:
        """``airflow db migrate`` on a SQLite DB in the stack's Airflow home, and the canary pool
        (``airflow pools set``), in one process (:func:`~.airflow_cli.airflow_commands`)."""
        if self._migrated:
            return
        self.airflow_home.mkdir(parents=True, exist_ok=True)
        airflow_commands(PREPARE_DB, env=self.env(), cwd=project_home(), timeout=300)
        self._migrated = True

    def run_dag(
        self, conf: dict[str, Any], *, dag_id: str = "model_release", echo: bool | Callable[[str], bool] = False
    ) -> DagRunOutcome:
        """Run the DAG once with ``airflow dags test`` and report the run's final state.

        Args:
            conf: the run's conf (the DAG's params).
            dag_id: which DAG.
            echo: print the run's output as it comes: every line (True), none (False), or the lines
                a predicate accepts.
        """
        self.migrate_airflow()
        airflow = Path(sys.executable).with_name("airflow")
        proc = subprocess.Popen(
            [str(airflow), "dags", "test", dag_id, "-c", json.dumps(conf)],
            env=self.env(), cwd=project_home(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            _echo(line, echo)
        proc.wait()
        output = "".join(lines)
        state = None
        for line in reversed(lines):
            if "DagRun Finished" in line or "Marking run" in line:
                lowered = line.lower()
                state = "success" if "state=success" in lowered or "successful" in lowered else "failed" if "failed" in lowered else None
                if state:
                    break
        return DagRunOutcome(proc.returncode, state, output)

    def dag_session(self, *, warm: str | None = None) -> "DagSession":
        """A process that runs DAGs as :meth:`run_dag` does, many times, paying Airflow's start-up once.

        Use as a context manager (``with stack.dag_session() as dags: dags.run(conf)``); the process
        takes the environment of :meth:`env` as it is when the session starts.

        Args:
            warm: a DAG id the process parses, with its tasks' imports, as soon as it starts (in the
                background of the caller, which may do other work before its first run).
        """
        self.migrate_airflow()
        return DagSession(self.env(), warm=warm)


def _echo(line: str, echo: bool | Callable[[str], bool]) -> None:
    """Print a run's ``line`` as it comes when ``echo`` asks for it: every line (True), none (False), or those a
    predicate accepts (:meth:`EmbeddedStack.run_dag` and :meth:`DagSession.run` alike)."""
    if echo is True or (callable(echo) and echo(line)):
        sys.stdout.write(line)
        sys.stdout.flush()


class DagSession:
    """``airflow dags test``, run by :mod:`model_release.airflow.dag_runner` in one long-lived process.

    Each :meth:`run` is a DagRun made by ``dag.test()`` (the command's own call); Airflow's start-up
    and the release's imports are paid by the first run only, which is what makes a test of several
    runs affordable on two cores.
    """

    def __init__(self, env: dict[str, str], *, warm: str | None = None) -> None:
        self.env = env
        self.warm = warm
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> "DagSession":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "model_release.airflow.dag_runner", RUN_END_MARK, *(["--warm", self.warm] if self.warm else [])],
            env=self.env, cwd=project_home(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def run(self, conf: dict[str, Any], *, dag_id: str = "model_release",
            echo: bool | Callable[[str], bool] = False) -> DagRunOutcome:
        """One run of ``dag_id`` with ``conf``: its state and output, and 1 as the command's exit
        status when it failed (as ``airflow dags test`` exits).

        Args:
            echo: print the run's output as it comes, as :meth:`EmbeddedStack.run_dag` does.
        """
        from ..errors import ServiceUnavailable

        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise ServiceUnavailable("the DAG session is not open: use it as a context manager")
        proc.stdin.write(json.dumps({"dag_id": dag_id, "conf": conf}) + "\n")
        proc.stdin.flush()
        lines = []
        for line in proc.stdout:
            if line.startswith(RUN_END_MARK):
                ended = json.loads(line[len(RUN_END_MARK):])
                state = ended["state"]
                failed = ended["error"] is not None or state != "success"
                return DagRunOutcome(1 if failed else 0, state, "".join(lines))
            lines.append(line)
            _echo(line, echo)
        raise ServiceUnavailable(f"the DAG session's process exited ({proc.wait()}); its output ends with:\n"
                                 + "".join(lines[-40:]))
