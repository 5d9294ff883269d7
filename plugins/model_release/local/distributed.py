"""The distributed stack on one machine, started by code: what `make distributed-demo` and the
``distributed`` test run. Every process binds 127.0.0.1 on a free port and is stopped on exit.

- Postgres (Debian's ``postgresql`` binaries, run as the ``postgres`` user when this runs as root):
  the Airflow metadata DB and the MLflow backend store;
- Redis (Debian's ``redis-server``): the Celery broker;
- the moto S3 server: the model store, the release workspaces (``s3://model-store/workspaces``),
  MLflow's artifacts and the canary Triton's model repository;
- the MLflow tracking server (``--workers 1``) on Postgres, artifacts in S3;
- a Triton 2.51 started on its own, explicit model control, its only repository an empty S3 prefix:
  the remote canary, reached through the ``triton_canary`` connection only;
- Airflow 3 with the CeleryExecutor: api-server, scheduler, dag-processor, triggerer, and two
  Celery workers, ``cpu-worker`` (queue ``default``) and ``gpu-worker`` (queue ``gpu``), each with
  its own working folder and workspace root and no path in common. Each worker reports its own
  name as the task instances' hostname (``[core] hostname_callable``), so Airflow's own records say
  which worker ran which task.

Installed by ``infra/local/setup-distributed.sh`` (``make distributed-demo`` calls it).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import project_home
from ..errors import ServiceUnavailable
from ..store.keys import WORKSPACES
from .airflow_cli import PREPARE_DB, airflow_commands
from .ports import free_port
from .procs import StartedOnEnter, signal_pids, stop_group
from .services import DAG_PROCESSOR_STOP_S
from .stack_folder import TASK_SLOT_ENV

log = logging.getLogger(__name__)

BUCKET = "model-store"
WORKERS = {"cpu-worker": "default", "gpu-worker": "gpu"}


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _together(*steps) -> None:  # noqa: ANN002
    """Run ``steps`` in threads, side by side (each mostly waits for a process of its own to be ready);
    the first failure is raised once all of them are done (:meth:`DistributedStack.stop` cleans up)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(steps)) as pool:
        futures = [pool.submit(step) for step in steps]
    for f in futures:
        f.result()


def postgres_bin() -> Path:
    """Debian's Postgres server binaries (the newest major installed)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    if not found:
        raise ServiceUnavailable("no Postgres server binaries under /usr/lib/postgresql; run `bash infra/local/setup-distributed.sh`")
    return found[-1].parent


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path


@dataclass
class DistributedStack(StartedOnEnter):
    """The whole distributed deployment under ``root`` (see the module docstring)."""

    root: Path
    procs: dict[str, Proc] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    moto: Any = None
    triton: Any = None
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start everything in waves of services started side by side (each wave needs the one before):
        Postgres, Redis and the S3 server; then the MLflow server, the Triton canary and Airflow (its
        DB migrated, then its components); then the two workers, which need all of them."""
        self.root.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)  # an interrupted caller (Ctrl-C in pytest skips teardown) still stops it all
        self.ports = {k: free_port() for k in ("postgres", "redis", "mlflow", "api", "log_cpu", "log_gpu")}
        _together(self._postgres, self._redis, self._s3)
        _together(self._mlflow, self._triton, self._airflow)
        for worker in WORKERS:  # the workers run the tasks: they need the Triton canary's port, and MLflow
            self.start_worker(worker)
        self._wait("dag-processor", lambda: bool(self.api("GET", "/api/v2/dags/model_release")), 300)
        for worker in WORKERS:
            self.wait_worker(worker)

    def _s3(self) -> None:
        from .moto_process import MotoServer, ensure_bucket

        self.moto = MotoServer().start()
        ensure_bucket(self.moto.endpoint_url, BUCKET)
        self.moto.client().put_object(Bucket=BUCKET, Key="canary/.keep", Body=b"")  # an empty canary repository

    def stop(self) -> None:
        """Stop every process this stack started, by PID and process group, side by side; Postgres last. Idempotent."""
        atexit.unregister(self.stop)

        def stop(name: str, sig: int = signal.SIGTERM) -> None:
            try:
                self._stop(name, sig)
            except Exception as exc:  # noqa: BLE001 - stop the others all the same
                log.warning("could not stop %s cleanly: %s", name, exc)

        # side by side (each may take seconds to shut down); Postgres last, SIGINT being its fast
        # shutdown (SIGTERM waits for every client to leave)
        others = [name for name in reversed(list(self.procs)) if name != "postgres"]
        if others:
            _together(*(lambda name=name: stop(name) for name in others))
        if self.triton is not None:
            self.triton.stop()
            self.triton = None
        if self.moto is not None:
            self.moto.stop()
            self.moto = None
        stop("postgres", signal.SIGINT)

    def _stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.popen.poll() is not None:
            return
        if name == "dag-processor":  # killed after its own short stop, as `model-release down` does
            timeout = min(timeout, DAG_PROCESSOR_STOP_S)
        tree = _descendants(proc.popen.pid)
        # kill_rest: what outlived its leader in its group; then the rest of its tree (a Celery pool
        # child, a task runner in a process group of its own)
        stop_group(proc.popen, timeout=timeout, sig=sig, kill_rest=True)
        signal_pids(tree, signal.SIGKILL)

    def _spawn(self, name: str, cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
               user: str | None = None) -> Proc:
        logf = self.root / "logs" / f"{name}.log"
        logf.parent.mkdir(parents=True, exist_ok=True)
        with open(logf, "ab") as out:
            popen = subprocess.Popen(cmd, env=env, cwd=cwd or self.root, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, user=user)
        self.procs[name] = Proc(name, popen, logf)
        return self.procs[name]

    def _wait(self, name: str, probe, timeout: float = 180) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.procs.get(name)
            if proc is not None and proc.popen.poll() is not None:
                raise ServiceUnavailable(f"{name} exited with {proc.popen.returncode}; its log {proc.log} ends with:\n"
                                         + "\n".join(proc.log.read_text(errors="replace").splitlines()[-30:]))
            try:
                if probe():
                    return
            except Exception:  # noqa: BLE001 - not yet
                pass
            time.sleep(0.5)
        raise ServiceUnavailable(f"{name} was not ready within {timeout:.0f} s; see {self.root / 'logs' / (name + '.log')}")

    # -- services -----------------------------------------------------------------------------
    def _postgres(self) -> None:
        bindir = postgres_bin()
        data = self.root / "postgres"
        user = None
        if os.geteuid() == 0:  # Postgres refuses to run as root: its files and process belong to "postgres"
            user = "postgres"
            pw = pwd.getpwnam(user)
            for d in (self.root, *self.root.parents):
                if d == Path("/"):
                    break
                os.chmod(d, os.stat(d).st_mode | 0o011)  # traversable, not readable, by postgres
            data.mkdir(exist_ok=True)
            os.chown(data, pw.pw_uid, pw.pw_gid)
        subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "release", "--auth=trust", "-E", "UTF8"],
                       check=True, capture_output=True, user=user, cwd="/")
        self._spawn("postgres", [str(bindir / "postgres"), "-D", str(data), "-p", str(self.ports["postgres"]),
                                 "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={data}",
                                 "-c", "max_connections=200", "-c", "fsync=off"], user=user, cwd=Path("/"))
        import psycopg2

        def ready() -> bool:
            psycopg2.connect(self.pg_url("postgres")).close()
            return True

        self._wait("postgres", ready, 60)
        conn = psycopg2.connect(self.pg_url("postgres"))
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE airflow")
            cur.execute("CREATE DATABASE mlflow")
        conn.close()

    def pg_url(self, db: str, driver: str = "postgresql") -> str:
        return f"{driver}://release@127.0.0.1:{self.ports['postgres']}/{db}"

    def _redis(self) -> None:
        self._spawn("redis", [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(self.ports["redis"]),
                              "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.root)])
        import socket

        def ready() -> bool:
            with socket.create_connection(("127.0.0.1", self.ports["redis"]), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")

        self._wait("redis", ready, 30)

    def _aws_env(self) -> dict[str, str]:
        from .moto_process import _MOTO_KEY_ID, _MOTO_SECRET

        return {"AWS_ACCESS_KEY_ID": _MOTO_KEY_ID, "AWS_SECRET_ACCESS_KEY": _MOTO_SECRET, "AWS_DEFAULT_REGION": "us-east-1"}

    @property
    def tracking_uri(self) -> str:
        return f"http://127.0.0.1:{self.ports['mlflow']}"

    def _mlflow(self) -> None:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AWS_"))}, **self._aws_env(),
               "MLFLOW_S3_ENDPOINT_URL": self.moto.endpoint_url,
               "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
        mlflow = Path(sys.executable).with_name("mlflow")
        self._spawn("mlflow", [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(self.ports["mlflow"]),
                               "--workers", "1", "--backend-store-uri", self.pg_url("mlflow", "postgresql+psycopg2"),
                               "--artifacts-destination", f"s3://{BUCKET}/mlflow-artifacts"], env=env)
        self._wait("mlflow", lambda: urllib.request.urlopen(self.tracking_uri + "/health", timeout=2).status == 200, 240)

    def _triton(self) -> None:
        from ..triton.local import NO_AUTO_COMPLETE, LocalTriton

        # as the local stack's serving Tritons: configs loaded as written (no python stub per python model
        # load asking for a completion); the connection declares it (auto_complete false, airflow_env)
        self.triton = LocalTriton(f"s3://127.0.0.1:{self.moto.port}/{BUCKET}/canary", work_dir=self.root / "triton-host",
                                  env=self._aws_env(), ready_timeout=120, server_args=[NO_AUTO_COMPLETE])
        self.triton.start()

    # -- Airflow ------------------------------------------------------------------------------
    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['api']}"

    def airflow_env(self) -> dict[str, str]:
        """What every Airflow component gets: the metadata DB, the broker, the connections, the workspace store."""
        from .moto_process import _MOTO_KEY_ID, _MOTO_SECRET

        aws = {"conn_type": "aws", "login": _MOTO_KEY_ID, "password": _MOTO_SECRET,
               "extra": {"endpoint_url": self.moto.endpoint_url if self.moto else "", "region_name": "us-east-1"}}
        canary = {"conn_type": "triton_canary", "host": "127.0.0.1", "port": self.triton.http_port if self.triton else 0,
                  "extra": {"repository": f"s3://{BUCKET}/canary", "gpu": False, "auto_complete": False}}
        # the tasks read the connections from their worker's environment; the canary's only once it has a port
        conns = {"AIRFLOW_CONN_TRITON_CANARY": json.dumps(canary)} if canary["port"] else {}
        # nothing inherited that names another stack: mlflow.set_tracking_uri/set_registry_uri export
        # MLFLOW_TRACKING_URI/MLFLOW_REGISTRY_URI into the caller's environment, and a registry URI left
        # there by an earlier release would send the workers' model lookups to that other registry
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "MODEL_RELEASE", "AWS_", "MLFLOW_"))}
        env.update(
            AIRFLOW_HOME=str(self.root / "airflow"),
            AIRFLOW__CORE__DAGS_FOLDER=str(project_home().resolve() / "dags"),
            AIRFLOW__CORE__EXECUTOR="CeleryExecutor",
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__PARALLELISM="4",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="True",
            AIRFLOW__CORE__HOSTNAME_CALLABLE="model_release.airflow.hostname.worker_hostname",
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"{self.api_url}/execution/",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=self.pg_url("airflow", "postgresql+psycopg2"),
            AIRFLOW__CELERY__BROKER_URL=f"redis://127.0.0.1:{self.ports['redis']}/0",
            AIRFLOW__CELERY__RESULT_BACKEND=self.pg_url("airflow", "db+postgresql+psycopg2"),
            AIRFLOW__CELERY__WORKER_CONCURRENCY="1",
            # each worker imports the release tasks' libraries once, before it forks (model_release.airflow.celery_config)
            AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS="model_release.airflow.celery_config.CELERY_CONFIG",
            AIRFLOW__API__HOST="127.0.0.1",
            AIRFLOW__API__PORT=str(self.ports["api"]),
            AIRFLOW__API__WORKERS="1",
            AIRFLOW__API__BASE_URL=self.api_url,
            # a task whose worker was lost is noticed within about 20 s (default: 5 minutes)
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT="20",
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL="2",
            AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
            **TASK_SLOT_ENV,  # a Celery worker's one slot is free within 1 s of its task's end
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="30",
            AIRFLOW__LOGGING__COLORED_CONSOLE_LOG="False",
            AIRFLOW_CONN_AWS_DEFAULT=json.dumps(aws),
            AIRFLOW_CONN_MLFLOW_DEFAULT=json.dumps({"conn_type": "mlflow", "extra": {"tracking_uri": self.tracking_uri}}),
            MODEL_RELEASE_HOME=str(project_home().resolve()),
            MODEL_RELEASE_WORKSPACE_STORE=f"s3://{BUCKET}/{WORKSPACES.rstrip('/')}",
            MODEL_RELEASE_RETRY_DELAY_S="5",
            # MLflow's model download resolves a logged model's own URI with the process-wide tracking URI,
            # not the one passed to it: every process that reads models gets it as the environment too
            MLFLOW_TRACKING_URI=self.tracking_uri,
            MLFLOW_DISABLE_TELEMETRY="true",
            DO_NOT_TRACK="true",
            PYTHONUNBUFFERED="1",
        )
        env.update(conns)
        env.update(self.extra_env)
        return env

    def _airflow(self) -> None:
        """Airflow's DB migrated and the canary's pool made, then its components started at once (none
        needs another to start) and the API waited for. The workers are started by :meth:`start`."""
        (self.root / "airflow").mkdir(exist_ok=True)
        airflow_commands(PREPARE_DB, env=self.airflow_env(), cwd=self.root)
        airflow = str(Path(sys.executable).with_name("airflow"))
        env = self.airflow_env()
        self._spawn("api-server", [airflow, "api-server", "--host", "127.0.0.1", "--port", str(self.ports["api"]),
                                   "--workers", "1"], env=env)
        for name in ("scheduler", "dag-processor", "triggerer"):
            self._spawn(name, [airflow, name], env=env)
        self._wait("api-server", lambda: urllib.request.urlopen(self.api_url + "/api/v2/monitor/health", timeout=2).status == 200, 300)

    def wait_worker(self, worker: str, timeout: float = 240) -> None:
        """Until the Celery worker says it is ready (its log's ``celery@... ready.``)."""
        proc = self.procs[worker]  # its log is its own since it started (start_worker moves an older one away)
        self._wait(worker, lambda: b" ready." in proc.log.read_bytes(), timeout)

    def worker_folder(self, worker: str) -> Path:
        return self.root / worker

    def start_worker(self, worker: str) -> Proc:
        """Start a Celery worker: its own folder (cwd and workspace root), queue and log-server port."""
        folder = self.worker_folder(worker)
        folder.mkdir(parents=True, exist_ok=True)
        # its own Airflow home (task logs), workspace root and temporary folder: no path in common with the other worker
        env = {**self.airflow_env(), "AIRFLOW_HOME": str(folder / "airflow"), "MODEL_RELEASE_WORKER_NAME": worker,
               "MODEL_RELEASE_WORKSPACE": str(folder / "workspace"),
               "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.ports["log_cpu" if worker == "cpu-worker" else "log_gpu"]),
               "TMPDIR": str(folder / "tmp")}
        (folder / "tmp").mkdir(exist_ok=True)
        airflow = str(Path(sys.executable).with_name("airflow"))
        log_file = self.root / "logs" / f"{worker}.log"
        if log_file.exists():  # a restarted worker: its readiness is read from the new lines only
            log_file.rename(log_file.with_suffix(f".{int(time.time())}.log"))
        return self._spawn(worker, [airflow, "celery", "worker", "--queues", WORKERS[worker], "--concurrency", "1",
                                    "--celery-hostname", f"{worker}@%h"], env=env, cwd=folder)

    def kill_worker(self, worker: str) -> list[int]:
        """SIGKILL a worker and every process under it (the task runs in a process group of its own):
        a machine lost. Returns the PIDs killed."""
        proc = self.procs.pop(worker)
        tree = [proc.popen.pid, *_descendants(proc.popen.pid)]
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.popen.wait()
        return tree

    # -- the REST API -------------------------------------------------------------------------
    def token(self) -> str:
        with urllib.request.urlopen(self.api_url + "/auth/token", timeout=30) as r:
            return json.loads(r.read())["access_token"]

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call Airflow's REST API with a bearer token; None on 404."""
        req = urllib.request.Request(self.api_url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self.token()}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise ServiceUnavailable(f"{method} {path}: HTTP {exc.code}: {exc.read()[:1000]!r}") from None

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        from datetime import datetime, timezone

        run = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns",
                       {"conf": conf, "logical_date": None, "run_after": datetime.now(timezone.utc).isoformat()})
        return run["dag_run_id"]

    def unpause(self, dag_id: str, paused: bool = False) -> None:
        """(Un)pause a DAG: new DAGs start paused; an unpaused scheduled DAG gets its latest interval run at once."""
        self.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": paused})

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=-run_after")["dag_runs"]

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        found = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        return {t["task_id"]: t for t in found["task_instances"]}

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 900) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run_state(dag_id, run_id)
            if state in ("success", "failed"):
                return state
            time.sleep(1)
        raise TimeoutError(f"run {run_id} of {dag_id} did not finish within {timeout:.0f} s "
                           f"(tasks: { {k: v['state'] for k, v in self.task_instances(dag_id, run_id).items()} })")
