"""The processes of a long-running local stack: started marked, found by their mark, stopped by pid.

Every process the stack starts gets ``MODEL_RELEASE_STACK_ID=<id>`` in its environment, and
every process those start (Airflow's task runners, a canary's Triton, uvicorn workers) inherits
it. So the stack's processes can be found again from ``/proc`` after a restart of the supervisor
or a crash, and ``model-release down`` can prove that none is left. Only processes that carry this
stack's id are ever signalled, each by its pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

#: the environment variable that marks a process as belonging to one stack
MARKER = "MODEL_RELEASE_STACK_ID"


def spawn(argv: list[str], *, env: dict[str, str], stack_id: str, log_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, marked with ``stack_id``, its output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv, env={**env, MARKER: stack_id}, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )


def marked(stack_id: str) -> list[int]:
    """The pids of live processes (other than this one) whose environment carries ``stack_id``."""
    needle = f"{MARKER}={stack_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0") and _state(int(entry.name)) != "Z":
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return sorted(found)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int | None) -> bool:
    """True when ``pid`` is a live process (a zombie counts as gone)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _state(pid) not in ("Z", "X")


def signal_pids(pids: Iterable[int], sig: int) -> None:
    """Send ``sig`` to each pid that still exists."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """Wait up to ``timeout`` seconds for ``pids`` to exit; returns those still alive."""
    pending = list(pids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if alive(p)]
        if pending:
            time.sleep(0.2)
    return pending


def stop(pids: Iterable[int], *, timeout: float = 20.0) -> list[int]:
    """SIGTERM ``pids``, wait ``timeout`` seconds, SIGKILL what is left; returns the pids that had to be killed."""
    pids = [p for p in pids if alive(p)]
    signal_pids(pids, signal.SIGTERM)
    left = wait_gone(pids, timeout)
    signal_pids(left, signal.SIGKILL)
    wait_gone(left, 5.0)
    return left


def sweep(stack_id: str, *, timeout: float = 20.0) -> list[int]:
    """Stop every process still marked with ``stack_id``; returns the pids that were found."""
    found = marked(stack_id)
    if found:
        stop(found, timeout=timeout)
        # a process may have started a child while it was being stopped
        stop(marked(stack_id), timeout=5.0)
    return found
