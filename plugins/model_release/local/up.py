"""``model-release up`` and ``model-release down``: the embedded stack as services a person can work with.

``up`` starts the S3 endpoint, MLflow's server, Airflow (api-server, scheduler, dag-processor) and a
serving fleet of two local Tritons (explicit mode, metrics on), each with its serving agent following
channel ``production`` of the store :data:`SERVE_STORE` (the agents register there; the rollout task
finds them there), on 127.0.0.1, waits until each answers and the ``model_release`` DAG is parsed, writes the env file,
prints the URLs, and keeps them running until Ctrl-C, SIGTERM or ``model-release down``. With
``--detach`` it runs itself in the background and returns once the stack is ready. Its state is in
one folder (see :mod:`model_release.local.stack_folder`) and survives a restart: MLflow's registry, the
S3 store's objects and Airflow's run history. A port picked for a service can be taken by another
process before the service binds it (Airflow's api-server binds about 8 s after it starts); then ``up``
stops what it started and starts again on new ports, at most :data:`PORT_RETRIES` times.

``down`` stops the supervisor, which stops the services in reverse order, in two tiers (:func:`stop_tiers`);
then it looks for any process still marked with the stack's id (a task runner, a canary's Triton) and stops it too, and
fails if one is left.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import ModelReleaseError, ServiceUnavailable, UserError
from ..flags import Parser
from . import procs, webhook
from .stack_folder import (
    AIRFLOW_USER, BUCKET, Layout, StackConfig, default_root, load_config, port_free, stack_env, write_env_file,
    write_private,
)
from .http import AirflowApi
from .services import CANARY_POOL, Service, airflow_ready, ensure_canary_pool, http_ready, init_airflow, services, wait_until

STOP_TIMEOUT = 30.0
#: the local serving fleet: how many Tritons ``up`` starts beside the stack
FLEET_SIZE = 2
#: the store and channel the local fleet's agents follow by default: the project spec's (releases/iris.yaml's
#: promote.store); ``up --serve-store URI`` names another, kept in stack.json for the next start
SERVE_STORE, SERVE_CHANNEL = f"s3://{BUCKET}/iris", "production"


def serve_store(layout: Layout, given: str | None = None) -> str:
    """The store the local fleet follows: ``given`` (saved for the next start), else the saved one, else :data:`SERVE_STORE`."""
    saved = layout.read_json(layout.stack_json) or {}
    if given is None:
        return str(saved.get("serve_store") or SERVE_STORE)
    from ..store.model_store import _uri_problem

    problem = _uri_problem(given)
    if problem or not given.startswith("s3://"):
        raise UserError(f"--serve-store {given!r} is not valid: {problem or 'the local stack serves from its S3 endpoint'}; "
                        f"give s3://{BUCKET}/PREFIX, the promote.store of the specs to serve")
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.stack_json.write_text(json.dumps({**saved, "serve_store": given}, indent=2) + "\n")
    return given


class Supervisor:
    """Starts the services, watches them, and stops them all on a signal."""

    def __init__(self, layout: Layout, config: StackConfig) -> None:
        self.layout = layout
        self.config = config
        self.stopping = threading.Event()
        self.running: dict[str, tuple[Service, subprocess.Popen[bytes]]] = {}
        self.env = {**os.environ, **stack_env(layout, config)}
        self.env.pop("AWS_PROFILE", None)
        self.started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.clock = time.monotonic()

    def start(self) -> None:
        """Start every service and wait until it answers; raises on a failure (the caller stops what was started).

        Every process starts as early as what it needs allows, and the waits come after: the serving
        Tritons, S3 and MLflow at once; Airflow's services (after ``airflow db migrate`` on the first
        start) and the webhook receiver without waiting for S3 or MLflow, which none of them needs to
        start. On two cores a wait for one service that started a process less is CPU for the others.
        """
        from .moto_process import ensure_bucket

        s3, mlflow, api, scheduler, processor = services(self.layout, self.config)
        wiring = webhook.wiring(self.layout)
        mlflow.env.update(webhook.mlflow_env(wiring))
        receiver = webhook.receiver_service(self.layout, wiring)
        fleet = self._spawn_fleet()  # the serving Tritons start first: a DAG run may roll out to them
        self._spawn(s3)
        self._spawn(mlflow)  # MLflow starts while Airflow's DB is migrated
        if init_airflow(self.layout, procs.marked_env(self.env, self.config.stack_id), stopping=self.stopping.is_set):
            self.say("Airflow's database initialised (first start)")
        for service in (api, scheduler, processor, receiver):  # Airflow starts while MLflow may still be starting
            self._spawn(service)
        self._wait(s3, http_ready(self.config.url("s3"), "/moto-api/"), 60)
        ensure_bucket(self.config.url("s3"), BUCKET)
        self._wait(mlflow, http_ready(self.config.url("mlflow"), "/health"), 300)
        self._register_webhook(wiring)  # while Airflow starts: MLflow calls the receiver only on an alias event
        password = self.layout.airflow_password()
        self._wait(api, airflow_ready(self.config, password), 300)
        if ensure_canary_pool(AirflowApi(self.config.url("airflow"), AIRFLOW_USER, password),
                              stopping=self.stopping.is_set):
            self.say(f"Airflow pool {CANARY_POOL[0]} created (one slot)")
        self._wait(receiver, http_ready(wiring.url.rsplit("/", 1)[0], "/health"), 60)
        self._wait_fleet(fleet)

    def _register_webhook(self, wiring: webhook.Wiring) -> None:
        """Register (or update) the webhook in MLflow, pointing at the receiver's URL (:mod:`.webhook`)."""
        webhook.register(self.config.url("mlflow"), wiring)
        self.say("MLflow's webhook for model_version_alias.created points at the receiver")

    def _spawn_fleet(self) -> list[Service]:
        """Start the local fleet: two serving Tritons (explicit mode, metrics on), each on its own repository with
        its agent beside it (it serves the channel's current release once the store answers)."""
        from .fleet import server_argv

        fleet = []
        for i in range(1, FLEET_SIZE + 1):
            service = Service(f"triton-serve-{i}", server_argv(self.layout.root / "serving", f"serve-{i}",
                                                              serve_store(self.layout), SERVE_CHANNEL))
            self._spawn(service)
            fleet.append(service)
        return fleet

    def _wait_fleet(self, fleet: list[Service]) -> None:
        """Wait for each serving Triton's info file (its Triton up, its agent listening)."""
        from ..serve.local_server import read_info

        servers = []
        for service in fleet:
            info = self.layout.root / "serving" / service.name.removeprefix("triton-") / "server.json"
            self._wait(service, lambda info=info: None if info.is_file() else "not ready yet", 180)
            servers.append(read_info(info))
            service.url = servers[-1].url  # known once the server picked its ports: `model-release status` asks it
        store = serve_store(self.layout)
        self.say(f"serving fleet up, following channel {SERVE_CHANNEL!r} of {store}: "
                 + ", ".join(f"{s.name} at {s.url} (ready: {s.ready_url})" for s in servers))
        add_serving_to_env_file(self.layout, store, [s.url for s in servers])

    def _spawn(self, service: Service) -> None:
        if self.stopping.is_set():
            raise ServiceUnavailable("start-up interrupted")
        proc = procs.spawn(service.argv, env={**self.env, **service.env}, stack_id=self.config.stack_id,
                           log_path=self.layout.log(service.name), cwd=self.layout.root)
        self.running[service.name] = (service, proc)
        self.save_state(ready=False)

    def _wait(self, service: Service, check: Any, timeout: float) -> None:
        proc = self.running[service.name][1]

        def ready() -> str | None:
            if proc.poll() is not None:
                raise ServiceUnavailable(
                    f"{service.name} exited with code {proc.returncode} while starting: {_last_line(self.layout.log(service.name))} "
                    f"(its log: {self.layout.log(service.name)})"
                )
            return check()

        wait_until(ready, what=service.name, timeout=timeout, stopping=self.stopping.is_set,
                   log=self.layout.log(service.name))
        self.say(f"{service.name} ready" + (f" at {service.url}" if service.url else ""))

    def say(self, message: str) -> None:
        sys.stdout.write(f"[up] {time.monotonic() - self.clock:5.0f} s  {message}\n")  # one write: the stop's threads say too
        sys.stdout.flush()

    def save_state(self, *, ready: bool) -> None:
        state = {
            "pid": os.getpid(), "stack_id": self.config.stack_id, "ready": ready, "started": self.started,
            "services": {name: {"pid": p.pid, "url": s.url, "log": str(self.layout.log(name))}
                         for name, (s, p) in self.running.items()},
        }
        tmp = self.layout.state_json.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.layout.state_json)

    def watch(self) -> None:
        """Until a stop signal: report a service that exits (the others keep running)."""
        reported: set[str] = set()
        while not self.stopping.wait(2.0):
            for name, (_, proc) in self.running.items():
                if proc.poll() is not None and name not in reported:
                    reported.add(name)
                    print(f"[up] {name} exited with code {proc.returncode}; see {self.layout.log(name)}. "
                          "Restart the stack: model-release down && model-release up", file=sys.stderr, flush=True)

    def stop(self) -> None:
        """Stop the services in reverse order, tier by tier (:func:`stop_tiers`), then any stray.

        Each service gets SIGTERM to its process group, then SIGKILL after :data:`STOP_TIMEOUT` (or its own
        ``stop_timeout``: the dag-processor's, :data:`~.services.DAG_PROCESSOR_STOP_S`). The
        services of one tier stop together: one after another, the stop cost each one's shutdown in
        turn (MLflow's alone about 14 s on a busy 2-core machine).
        """
        for tier in stop_tiers(list(self.running)):
            threads = [threading.Thread(target=self._stop_one, args=(name,), name=f"stop-{name}") for name in tier]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        self.running.clear()
        procs.sweep(self.config.stack_id)
        self.layout.state_json.unlink(missing_ok=True)

    def _stop_one(self, name: str) -> None:
        started = time.monotonic()
        service, proc = self.running[name]
        timeout = STOP_TIMEOUT if service.stop_timeout is None else service.stop_timeout
        # a service with its own short stop (the dag-processor) is killed as planned, not as a failure to stop
        warn = None if service.stop_timeout is not None else lambda: print(
            f"[up] {name} did not stop within {timeout:.0f} s; killing it", file=sys.stderr, flush=True)
        killed = procs.stop_group(proc, timeout=timeout, on_kill=warn)
        # each service's own stop time, as its start is logged: what a slow `down` waited for
        self.say(f"{name} {'killed' if killed else 'stopped'} after {time.monotonic() - started:.1f} s"
                 + (f" (its stop waits {timeout:g} s)" if killed and warn is None else ""))


#: the services that stop first: what posts to Airflow or runs its tasks
_FIRST = ("webhook-receiver", "airflow-dag-processor", "airflow-scheduler")


def stop_tiers(started: list[str]) -> list[list[str]]:
    """The order ``stop`` takes the services in (``started`` is their start order), as tiers stopped together.

    First what posts to Airflow or runs its tasks (the webhook receiver, the dag-processor, the
    scheduler, which waits for its running tasks: they report to the api-server and write to MLflow
    and S3); then, together, everything else: the api-server and what the tasks wrote to (MLflow, S3)
    and the serving Tritons, none of which calls another. (The api-server used to stop alone in
    between, for nothing: 2.6-3.7 s of a 4-6 s stop on a busy 2-core machine.)
    """
    first = [n for n in reversed(started) if n in _FIRST]
    rest = [n for n in reversed(started) if n not in _FIRST]
    return [tier for tier in (first, rest) if tier]


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1].strip()[-600:] if lines else "no output"


def add_serving_to_env_file(layout: Layout, store: str, urls: list[str]) -> None:
    """Append the serving fleet's store and its Tritons' HTTP URLs to the env file (which stays mode 0600)."""
    text = layout.env_file.read_text() if layout.env_file.exists() else ""
    lines = [f"export MODEL_RELEASE_SERVE_STORE={shlex.quote(store)}",
             f"export MODEL_RELEASE_SERVING={shlex.quote(','.join(urls))}"]
    write_private(layout.env_file, text + "\n".join(lines) + "\n")


def summary(layout: Layout, config: StackConfig) -> str:
    """The lines ``up`` prints once the stack is ready: the URLs, the env file, how to stop it."""
    env_file = layout.env_file
    try:
        env_file = env_file.relative_to(Path.cwd())
    except ValueError:
        pass
    return "\n".join([
        f"model-release stack is up; its state is in {layout.root}",
        f"  MLflow UI and tracking   {config.url('mlflow')}",
        f"  Airflow UI and REST API  {config.url('airflow')}   (user admin; the password is AIRFLOW_PASSWORD in the env file)",
        f"  S3 endpoint              {config.url('s3')}   (bucket {BUCKET})",
        f"  serving Tritons          following channel {SERVE_CHANNEL} of {serve_store(layout)}"
        "   (their URLs: MODEL_RELEASE_SERVING in the env file)",
        f"  use it from a shell:     source {env_file}",
        "  stop it:                 model-release down   (or Ctrl-C where `model-release up` runs)",
    ])


def _running(layout: Layout) -> dict[str, Any] | None:
    state = layout.read_json(layout.state_json)
    return state if state and procs.alive(state.get("pid")) else None


#: how many times ``up`` starts the stack again when a port it picked was taken by another process
#: before its service bound it (Airflow's api-server binds about 8 s after it is started)
PORT_RETRIES = 2


def ports_taken(layout: Layout, config: StackConfig) -> list[str]:
    """The stack's own ports (its services' and the webhook receiver's) that are not free: with the
    stack's processes stopped, each is held by another process."""
    receiver = webhook.saved_port(layout)
    ports = {**config.ports, **({webhook.SERVICE: receiver} if receiver else {})}
    return [f"port {port} of {name}" for name, port in ports.items() if not port_free(port)]


def _foreground(layout: Layout, supervisor_class: type[Supervisor] | None = None) -> int:
    started = time.monotonic()
    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stopping.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    for attempt in range(PORT_RETRIES + 1):
        config, notes = load_config(layout)  # a port taken since the last try gets a new one here
        for note in notes:
            print(f"[up] {note}", flush=True)
        stray = procs.sweep(config.stack_id)
        if stray:
            print(f"[up] stopped {len(stray)} process(es) left by an earlier run of this stack: {stray}", flush=True)
        write_env_file(layout, config)
        webhook.add_to_env_file(layout, webhook.wiring(layout))
        supervisor = (supervisor_class or Supervisor)(layout, config)
        supervisor.stopping = stopping
        try:
            supervisor.start()
            break
        except Exception as exc:  # whatever failed, nothing that was started may keep running
            supervisor.stop()
            if stopping.is_set():
                print("[up] interrupted; every service is stopped", flush=True)
                return 130
            taken = ports_taken(layout, config)
            if taken and attempt < PORT_RETRIES:
                print(f"[up] {exc}; {', '.join(taken)} was taken by another process while the stack started: "
                      "every service is stopped, starting again on new ports", flush=True)
                continue
            print(f"model-release up: {exc}; every service is stopped", file=sys.stderr, flush=True)
            return exc.exit_code if isinstance(exc, ModelReleaseError) else ServiceUnavailable.exit_code
    supervisor.save_state(ready=True)
    print(f"[up] ready in {time.monotonic() - started:.0f} s", flush=True)
    print(summary(layout, config), flush=True)
    supervisor.watch()
    print("[up] stopping ...", flush=True)
    supervisor.stop()
    print("[up] stopped; the state is kept for the next `model-release up`", flush=True)
    return 0


def _detach(layout: Layout, *, timeout: float) -> int:
    """Run the supervisor in the background (its output goes to logs/up.log) and wait until it is ready."""
    log = layout.log("up")
    log.parent.mkdir(parents=True, exist_ok=True)
    offset = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "model_release.cli", "up", "--root", str(layout.root)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = layout.read_json(layout.state_json) or {}
        if state.get("pid") == proc.pid and state.get("ready"):
            print(summary(layout, _saved_config(layout)))
            print(f"  the supervisor runs in the background (pid {proc.pid}); its log is {log}")
            return 0
        if proc.poll() == 130:
            print("model-release up: stopped (by model-release down or a signal) before the stack was ready", file=sys.stderr)
            return 130
        if proc.poll() is not None:
            tail = log.read_bytes()[offset:].decode(errors="replace").strip().splitlines()[-15:]
            print("\n".join(tail), file=sys.stderr)
            print(f"model-release up: the stack did not start (exit {proc.returncode}); the whole log is {log}", file=sys.stderr)
            return proc.returncode or 4
        time.sleep(0.1)  # reads a file: a tenth of a second is nothing; the ready stack is seen at once
    print(f"model-release up: not ready after {timeout:.0f} s; it keeps starting in the background (pid {proc.pid}). "
          f"Watch {log}, or stop it with `model-release down`.", file=sys.stderr)
    return 4


#: ``--root`` of up, down and status
ROOT_HELP = "the stack's folder (default $MODEL_RELEASE_STACK or ./.work/stack)"


def up_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="model-release up", description="Start the local stack and keep it running.")
    parser.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    parser.add_argument("--detach", action="store_true", help="run in the background; return once the stack is ready")
    parser.add_argument("--timeout", type=float, default=600, help="with --detach: seconds to wait for the stack (default 600)")
    parser.add_argument("--serve-store", metavar="URI", default=None,
                        help="the model store whose channel production the two serving Tritons follow (default: the "
                             f"last one given, else {SERVE_STORE}); kept for the next start")
    return parser


def down_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="model-release down", description="Stop the local stack; its state is kept.")
    parser.add_argument("--root", type=Path, default=None, help=ROOT_HELP)
    return parser


def up_main(argv: list[str]) -> int:
    args = up_parser().parse_args(argv)
    layout = Layout(args.root or default_root())
    state = _running(layout)
    if args.serve_store is not None and state and serve_store(layout) != args.serve_store:
        raise UserError(f"the stack in {layout.root} is running and its serving Tritons follow {serve_store(layout)}; "
                        f"`model-release down`, then `model-release up --serve-store {args.serve_store}`")
    if args.serve_store is not None:
        serve_store(layout, args.serve_store)  # saved in stack.json: the supervisor (and the next start) read it
    if state:
        config = _saved_config(layout)
        print(f"model-release up: the stack is already {'running' if state.get('ready') else 'starting'} "
              f"(supervisor pid {state['pid']})")
        print(summary(layout, config))
        return 0
    return _detach(layout, timeout=args.timeout) if args.detach else _foreground(layout)


def _saved_config(layout: Layout) -> StackConfig:
    saved = layout.read_json(layout.stack_json) or {}
    return StackConfig(str(saved.get("stack_id", "")), {k: int(v) for k, v in (saved.get("ports") or {}).items()})


def down_main(argv: list[str]) -> int:
    args = down_parser().parse_args(argv)
    layout = Layout(args.root or default_root())
    config = _saved_config(layout)
    if not config.stack_id:
        print(f"model-release down: no stack in {layout.root} (nothing was ever started there)")
        return 0
    state = _running(layout)
    if state:
        print(f"stopping the stack in {layout.root} (supervisor pid {state['pid']}) ...", flush=True)
        procs.stop([int(state["pid"])], timeout=STOP_TIMEOUT * 4)
    stray = procs.sweep(config.stack_id)
    layout.state_json.unlink(missing_ok=True)
    left = procs.marked(config.stack_id)
    if left:
        print(f"model-release down: processes of the stack are still running: {left}; stop them with kill -9", file=sys.stderr)
        return 1
    if stray:
        print(f"stopped {len(stray)} process(es) the supervisor had not stopped: {stray}")
    print("stopped; no process of the stack is left" if state or stray else f"the stack in {layout.root} is not running")
    return 0
