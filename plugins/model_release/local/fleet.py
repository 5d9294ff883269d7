"""A local serving fleet for as long as a ``with`` block: the serving Tritons ``model-release up`` starts, each with its agent.

Each server is ``python -m model_release.serve.local_server`` (a local Triton in explicit mode on its
own model repository, bound to 127.0.0.1, metrics and p99 summaries on, and the serving agent beside
it following ``channel`` in the store ``store``), as ``up`` supervises them. No fleet file: the agents
register in the store by their heartbeats, where the release DAG's rollout task finds them. Leaving
the block stops every process the fleet started, whatever happened (each server's process group,
then any process still marked with the fleet's own id)::

    with LocalFleet(Path(".work/demo/serving"), store="s3://model-store/iris", env=s3_env(url)) as fleet:
        ...
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from ..errors import ServiceUnavailable
from ..serve.fleet import Fleet, Server
from ..serve.local_server import read_info
from . import procs

#: seconds a server may take to become ready (a local Triton is ready in 2-5 s on an idle machine)
READY_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0


def s3_env(endpoint_url: str) -> dict[str, str]:
    """What a serving agent needs to read a local S3 endpoint's store (moto takes any credentials)."""
    from .moto_process import _MOTO_KEY_ID, _MOTO_SECRET

    return {"AWS_ENDPOINT_URL": endpoint_url, "AWS_ACCESS_KEY_ID": _MOTO_KEY_ID, "AWS_SECRET_ACCESS_KEY": _MOTO_SECRET,
            "AWS_DEFAULT_REGION": "us-east-1"}


def server_argv(root: Path, name: str, store: str, channel: str, *, poll_s: float = 1.0) -> list[str]:
    """The command that runs one local serving Triton with its agent (``up`` runs the same)."""
    folder = root / name
    return [sys.executable, "-m", "model_release.serve.local_server", "--name", name, "--store", store, "--channel", channel,
            "--repository", str(folder / "models"), "--info", str(folder / "server.json"), "--poll", str(poll_s)]


class LocalFleet(procs.StartedOnEnter):
    """``count`` serving Tritons under ``root`` (``serve-1``, ``serve-2``, ...) with agents following ``channel`` of ``store``.

    Attributes:
        fleet: the servers as the roll-out and traffic see them (set once started).
    """

    def __init__(self, root: Path, *, store: str, channel: str = "production", count: int = 2,
                 env: dict[str, str] | None = None, poll_s: float = 1.0) -> None:
        self.root = Path(root).resolve()
        self.store, self.channel, self.count, self.env, self.poll_s = store, channel, count, dict(env or {}), poll_s
        self.fleet: Fleet | None = None
        self._id = f"fleet-{uuid.uuid4().hex[:12]}"  # marks every process this fleet starts, and only those
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> Fleet:
        """Start the servers side by side and wait until each one's Triton is up (its agent then loads the
        channel's current release by itself)."""
        names = [f"serve-{i}" for i in range(1, self.count + 1)]
        for name in names:
            self._spawn(name)
        self.fleet = Fleet(self.channel, tuple(self._wait_up(name) for name in names))
        return self.fleet

    def add(self, name: str) -> Server:
        """Start one more server (it joins the fleet: its agent serves the current release, no roll-out)."""
        self._spawn(name)
        server = self._wait_up(name)
        assert self.fleet is not None
        self.fleet = Fleet(self.channel, (*self.fleet.servers, server))
        return server

    def _spawn(self, name: str) -> None:
        self._procs[name] = procs.spawn(server_argv(self.root, name, self.store, self.channel, poll_s=self.poll_s),
                                        env={**os.environ, **self.env}, stack_id=self._id,
                                        log_path=self.root / name / "server.log", cwd=self.root)

    def _wait_up(self, name: str) -> Server:
        info, log, proc = self.root / name / "server.json", self.root / name / "server.log", self._procs[name]
        deadline = time.monotonic() + READY_TIMEOUT
        while not info.is_file():
            if proc.poll() is not None:
                raise ServiceUnavailable(f"serving Triton {name} exited with code {proc.returncode} while starting; "
                                         f"its log is {log}")
            if time.monotonic() > deadline:
                raise ServiceUnavailable(f"serving Triton {name} was not up within {READY_TIMEOUT:.0f} s; its log is {log}")
            time.sleep(0.2)
        return read_info(info)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT) -> None:
        """Wait until every server's agent answers ready (it serves the channel's current release)."""
        import urllib.request

        assert self.fleet is not None
        deadline = time.monotonic() + timeout_s
        for server in self.fleet.servers:
            while True:
                try:
                    with urllib.request.urlopen(str(server.ready_url), timeout=2) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise ServiceUnavailable(f"serving agent {server.name} was not ready within {timeout_s:.0f} s; its log "
                                             f"is {self.root / server.name / 'server.log'}")
                time.sleep(0.2)

    def triton_pid(self, name: str) -> int:
        """The pid of ``name``'s tritonserver process now (it changes when its supervisor starts it again)."""
        import json

        return int(json.loads((self.root / name / "server.json").read_text())["pid"])

    def stop(self) -> None:
        """Stop every server (SIGTERM to its group, SIGKILL after a while), then anything still marked as ours."""
        for proc in reversed(list(self._procs.values())):
            procs.stop_group(proc, timeout=STOP_TIMEOUT)
        self._procs.clear()
        procs.sweep(self._id)
