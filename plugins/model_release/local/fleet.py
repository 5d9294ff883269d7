"""A local serving fleet for as long as a ``with`` block: the serving Tritons ``model-release up`` starts.

Each server is ``python -m model_release.serve.local_server`` (a local Triton in explicit mode on its
own model repository, bound to 127.0.0.1, metrics and p99 summaries on), as ``up`` supervises them;
the fleet file names them for one channel, so the release DAG's rollout task finds them through
``$MODEL_RELEASE_FLEET``. Leaving the block stops every process the fleet started, whatever happened
(each server's process group, then any process still marked with the fleet's own id)::

    with LocalFleet(Path(".work/demo/serving")) as fleet:
        env = {FLEET_ENV: str(fleet.fleet_file)}
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from ..errors import ServiceUnavailable
from ..serve.fleet import Fleet, Server, write_fleet
from ..serve.local_server import read_info
from . import procs

#: seconds a server may take to become ready (a local Triton is ready in 2-5 s on an idle machine)
READY_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0


class LocalFleet(procs.StartedOnEnter):
    """``count`` serving Tritons under ``root`` (``serve-1``, ``serve-2``, ...) for ``channel``.

    Attributes:
        fleet: the servers as the roll-out and the watch see them (set once started).
        fleet_file: the fleet file (``root/fleet.json``) for ``$MODEL_RELEASE_FLEET``.
    """

    def __init__(self, root: Path, *, channel: str = "production", count: int = 2) -> None:
        self.root = Path(root).resolve()
        self.channel, self.count = channel, count
        self.fleet_file = self.root / "fleet.json"
        self.fleet: Fleet | None = None
        self._id = f"fleet-{uuid.uuid4().hex[:12]}"  # marks every process this fleet starts, and only those
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> Fleet:
        """Start the servers side by side, wait until each is ready, write the fleet file."""
        names = [f"serve-{i}" for i in range(1, self.count + 1)]
        for name in names:
            folder = self.root / name
            argv = [sys.executable, "-m", "model_release.serve.local_server", "--name", name,
                    "--repository", str(folder / "models"), "--info", str(folder / "server.json")]
            self._procs.append(procs.spawn(argv, env=dict(os.environ), stack_id=self._id,
                                           log_path=folder / "server.log", cwd=self.root))
        servers = [self._wait_ready(name, proc) for name, proc in zip(names, self._procs)]
        self.fleet = Fleet(self.channel, tuple(servers))
        write_fleet(self.fleet_file, {self.channel: servers})
        return self.fleet

    def _wait_ready(self, name: str, proc: subprocess.Popen[bytes]) -> Server:
        info, log = self.root / name / "server.json", self.root / name / "server.log"
        deadline = time.monotonic() + READY_TIMEOUT
        while not info.is_file():
            if proc.poll() is not None:
                raise ServiceUnavailable(f"serving Triton {name} exited with code {proc.returncode} while starting; "
                                         f"its log is {log}")
            if time.monotonic() > deadline:
                raise ServiceUnavailable(f"serving Triton {name} was not ready within {READY_TIMEOUT:.0f} s; its log is {log}")
            time.sleep(0.2)
        return read_info(info)

    def stop(self) -> None:
        """Stop every server (SIGTERM to its group, SIGKILL after a while), then anything still marked as ours."""
        for proc in reversed(self._procs):
            procs.stop_group(proc, timeout=STOP_TIMEOUT)
        self._procs.clear()
        procs.sweep(self._id)
