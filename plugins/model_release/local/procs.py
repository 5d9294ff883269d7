"""The processes of a local stack: started marked, found by their mark, stopped by pid or by group.

Every process the stack starts gets ``MODEL_RELEASE_STACK_ID=<id>`` in its environment, and
every process those start (Airflow's task runners, a canary's Triton, uvicorn workers) inherits
it. So the stack's processes can be found again from ``/proc`` after a restart of the supervisor
or a crash, and ``model-release down`` can prove that none is left. Only processes that carry this
stack's id are ever signalled, each by its pid.

:func:`stop_group` is the one "SIGTERM the group, wait, SIGKILL" of the package: the moto child,
``model-release up``'s services, the local Triton and the distributed stack's processes all lead
a process group of their own (``start_new_session``) and are stopped through it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: the environment variable that marks a process as belonging to one stack
MARKER = "MODEL_RELEASE_STACK_ID"


def marked_env(env: dict[str, str], stack_id: str) -> dict[str, str]:
    """``env`` with the stack's mark, kept readable for the process's whole life.

    Airflow names its processes with ``setproctitle`` ("airflow api_server -- host:..."), which on
    Linux writes a title longer than the command line over the memory that ``/proc/PID/environ``
    reads: the mark was gone, so :func:`marked` could not find the api-server, and after a
    supervisor that died, ``model-release down`` left it running. ``SPT_NOENV`` (setproctitle's own
    switch) keeps the environment and truncates such a title to the command line's length instead.
    """
    return {**env, MARKER: stack_id, "SPT_NOENV": "1"}


def spawn(argv: list[str], *, env: dict[str, str], stack_id: str, log_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, marked with ``stack_id``, its output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv, env=marked_env(env, stack_id), cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
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
    """Stop every process still marked with ``stack_id``; returns the pids that were found, in either look."""
    found = marked(stack_id)
    if not found:
        return []
    stop(found, timeout=timeout)
    # a process may have started a child while it was being stopped, or been missed by the first look
    again = marked(stack_id)
    stop(again, timeout=5.0)
    return sorted({*found, *again})


def group_members(pgid: int) -> list[int]:
    """The live processes (zombies left out) of process group ``pgid`` (Linux /proc; empty where there is none)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def stop_group(proc: subprocess.Popen[Any], *, timeout: float, sig: int = signal.SIGTERM, leader_only: bool = False,
               kill_rest: bool = False, on_kill: Callable[[], None] | None = None, settle: float = 10.0) -> bool:
    """Stop a process that leads its own process group: ``sig``, wait, then SIGKILL the group.

    Args:
        proc: the group's leader (started with ``start_new_session=True``).
        timeout: seconds to wait for the leader to exit after ``sig``.
        sig: the first signal (SIGTERM; SIGINT is Postgres's fast shutdown).
        leader_only: send ``sig`` to the leader alone (a server that shuts its children down itself).
        kill_rest: SIGKILL the group even when the leader exited in time, for members that outlive
            it (a python backend stub, a pool child); also when the leader had exited already.
        on_kill: called before the SIGKILL when the leader did not exit within ``timeout``.
        settle: at most this many seconds waiting for the group to be gone after the SIGKILL.

    Returns:
        True when the leader did not exit within ``timeout`` and was killed.
    """
    if proc.poll() is not None and not kill_rest:
        return False
    killed = False
    if proc.poll() is None:
        try:
            if leader_only:
                proc.send_signal(sig)
            else:
                os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            killed = True
            if on_kill is not None:
                on_kill()
    if killed or kill_rest:
        _kill_group(proc, settle)
    return killed


def _kill_group(proc: subprocess.Popen[Any], settle: float) -> None:
    """SIGKILL ``proc``'s group until none of it is left (at most ``settle`` seconds), reaping the leader."""
    deadline = time.monotonic() + settle
    while True:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
        if not group_members(proc.pid) or time.monotonic() > deadline:
            break
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()) or 0.05)
    except subprocess.TimeoutExpired:
        pass


class StartedOnEnter:
    """A context manager for what starts processes: ``with X(...) as x`` starts it, and stops whatever did
    start when starting fails part-way (a Ctrl-C included); leaving the block stops it.

    Subclasses define ``start()`` and ``stop()``; ``stop()`` must be safe to call on a half-started object.
    """

    def start(self) -> object:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self):  # noqa: ANN204 - the subclass's own type
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

