"""Where a long-running local stack keeps its state, which ports it uses, and the environment that reaches it.

A stack lives in one folder (default ``<project>/.work/stack``, or ``$MODEL_RELEASE_STACK``)::

    stack.json        the stack's id and ports, kept across restarts
    state.json        the running supervisor: its pid, each service's pid, ready or not (removed by down)
    env               ``export`` lines to ``source`` (mode 0600): URIs, the S3 keys, the Airflow login
    mlflow/           MLflow's SQLite database and its artifacts
    s3/state.pickle   the S3 endpoint's buckets and objects
    airflow/          AIRFLOW_HOME: airflow.cfg, the SQLite DB, task logs, passwords.json (mode 0600)
    workspace/        the release workspaces
    logs/             one log per service, and up.log

Everything is bound to 127.0.0.1. The ports picked on the first start are reused on the next one
when they are still free.

Named for what it holds, the long-running stack's folder (its files, ports and ``env`` file); the
module was ``layout``, the name the store's layout also had.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import project_home
from . import airflow_sqlite
from .ports import free_port
from .moto_process import _MOTO_KEY_ID, _MOTO_SECRET  # the local endpoint's dummy credentials
from .stack import connection_env

HOST = "127.0.0.1"
BUCKET = "model-store"
AIRFLOW_USER = "admin"
SERVICES = ("s3", "mlflow", "airflow")


def default_root() -> Path:
    """``$MODEL_RELEASE_STACK``, else ``<project>/.work/stack``."""
    return Path(os.environ.get("MODEL_RELEASE_STACK") or project_home() / ".work" / "stack").resolve()


def port_free(port: int) -> bool:
    """Whether a service of the stack could bind ``port`` on 127.0.0.1 now (as the servers bind, with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind: a closing socket is no obstacle
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600, also when it existed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


@dataclass
class Layout:
    """The folder of one stack and what is in it."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()

    stack_json = property(lambda self: self.root / "stack.json")
    state_json = property(lambda self: self.root / "state.json")
    env_file = property(lambda self: self.root / "env")
    mlflow = property(lambda self: self.root / "mlflow")
    s3_state = property(lambda self: self.root / "s3" / "state.pickle")
    airflow_home = property(lambda self: self.root / "airflow")
    passwords = property(lambda self: self.root / "airflow" / "passwords.json")
    workspace = property(lambda self: self.root / "workspace")
    logs = property(lambda self: self.root / "logs")

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def read_json(self, path: Path) -> dict[str, Any] | None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def airflow_password(self) -> str:
        """The Airflow ``admin`` password, generated on the first start and kept in ``passwords.json``."""
        saved = self.read_json(self.passwords) or {}
        if not saved.get(AIRFLOW_USER):
            saved[AIRFLOW_USER] = secrets.token_urlsafe(18)
            write_private(self.passwords, json.dumps(saved))
        return str(saved[AIRFLOW_USER])


@dataclass
class StackConfig:
    """What stays the same across restarts: the stack's id and its ports."""

    stack_id: str
    ports: dict[str, int]

    def url(self, service: str) -> str:
        return f"http://{HOST}:{self.ports[service]}"


def load_config(layout: Layout) -> tuple[StackConfig, list[str]]:
    """The saved config, with a new free port for each service whose port is taken; saves it.

    Returns:
        The config and one line for each port that had to change.
    """
    saved = layout.read_json(layout.stack_json) or {}
    ports = {k: int(v) for k, v in (saved.get("ports") or {}).items() if k in SERVICES}
    notes = []
    for service in SERVICES:
        if service in ports and port_free(ports[service]):
            continue
        new = free_port(HOST)
        if service in ports:
            notes.append(f"port {ports[service]} of {service} is taken by another process; using {new} instead")
        ports[service] = new
    config = StackConfig(saved.get("stack_id") or uuid.uuid4().hex, ports)
    layout.root.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in saved.items() if k not in ("stack_id", "ports")}  # what up saves beside them (serve_store)
    layout.stack_json.write_text(json.dumps({"stack_id": config.stack_id, "ports": config.ports, **kept}, indent=2) + "\n")
    return config, notes


#: How long a worker slot stays taken after its task process ended. Airflow's task supervisor waits
#: for the process in a select() of at most ``[workers] min_heartbeat_interval`` seconds (default 5):
#: when the process's sockets close a moment before it can be reaped (a big process takes that moment
#: to exit), nothing is left to wake the select, and the slot stays taken for the rest of it. The
#: local stack has 2 slots (LocalExecutor) and the distributed one a slot per Celery worker, so the
#: next task can wait those seconds. 1 s bounds the wait; the heartbeats it also paces are a PUT a
#: second to the api-server on 127.0.0.1 at most.
TASK_SLOT_ENV = {"AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1"}


def stack_env(layout: Layout, config: StackConfig) -> dict[str, str]:
    """The variables that point a process at this stack: MLflow's client, boto3, Airflow, the CLI.

    The same values go to the services (on top of the caller's environment) and to the env file.
    """
    home = project_home().resolve()
    tracking = config.url("mlflow")
    return {
        "MLFLOW_TRACKING_URI": tracking,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "AWS_ENDPOINT_URL": config.url("s3"),
        "AWS_ACCESS_KEY_ID": _MOTO_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": _MOTO_SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "MODEL_RELEASE_HOME": str(home),
        "MODEL_RELEASE_WORKSPACE": str(layout.workspace),
        "MODEL_RELEASE_STACK": str(layout.root),
        "AIRFLOW_HOME": str(layout.airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        # LocalExecutor whose task processes start with the release libraries imported (model_release.airflow.executor)
        "AIRFLOW__CORE__EXECUTOR": "model_release.airflow.executor.WarmLocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        # The scheduler moves a run on by one step per loop (a task's successor queued, a skip passed on) and
        # sleeps up to this long between loops when it has nothing to do (Airflow's default 1 s). A manual
        # run of model_release__iris, nine tasks skipped one after another, took 19.2 s with 1 s and 13.6 s
        # with 0.2 s on a 2-core machine (0.28 s a step with 0.25 s); an idle scheduler takes 6% of a core, not 2%.
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.25",
        **TASK_SLOT_ENV,
        **airflow_sqlite.ENV,  # a writer waits 20 s for SQLite's lock, not 5 s (CI's up failed on a locked file)
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{AIRFLOW_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(layout.passwords),
        "AIRFLOW__API__HOST": HOST,
        "AIRFLOW__API__PORT": str(config.ports["airflow"]),
        "AIRFLOW__API__BASE_URL": config.url("airflow"),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__LOGGING__COLORED_CONSOLE_LOG": "False",
        **connection_env(tracking, config.url("s3")),
        "AIRFLOW_URL": config.url("airflow"),
        "AIRFLOW_USERNAME": AIRFLOW_USER,
    }


def write_env_file(layout: Layout, config: StackConfig) -> Path:
    """Write ``env`` (mode 0600): the stack's variables, the Airflow password, the venv's ``bin`` first on PATH."""
    env = {**stack_env(layout, config), "AIRFLOW_PASSWORD": layout.airflow_password()}
    lines = [
        f"# written by `model-release up` for the stack in {layout.root}",
        "# use it in a shell with:  source " + shlex.quote(str(layout.env_file)),
        "# it holds the S3 keys and the Airflow password: keep it private (mode 0600)",
        *(f"export {name}={shlex.quote(value)}" for name, value in env.items()),
        f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:\"$PATH\"",
    ]
    write_private(layout.env_file, "\n".join(lines) + "\n")
    return layout.env_file
