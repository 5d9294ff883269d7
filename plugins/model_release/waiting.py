"""Waiting for something to be ready: the one poll every wait of model-release uses.

:func:`wait_until` calls a check until it says ready, a deadline passes, or the caller is asked to
stop; the error names what was awaited, for how long, the last reason and the log to read. The local
stack's start-up (``model-release up``) and ``model-release fleet status --wait`` use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .errors import ServiceUnavailable

#: seconds between two checks: each is a GET or three on 127.0.0.1 (a refused connection while a service
#: starts), and ``up`` waits for its services one after another, so a second's poll lost up to a second at
#: each wait
POLL_S = 0.2


def wait_until(check: Callable[[], str | None], *, what: str, timeout: float, stopping: Callable[[], bool],
               log: Path | None = None, sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic) -> None:
    """Call ``check`` until it returns None (ready); it returns the reason it is not ready yet, or raises to give up.

    Raises:
        ServiceUnavailable: not ready within ``timeout`` seconds, with the last reason and the log to read.
    """
    deadline = clock() + timeout
    reason = "not checked yet"
    while not stopping():
        reason = check() or ""
        if not reason:
            return
        if clock() > deadline:
            break
        sleep(POLL_S)
    if stopping():
        raise ServiceUnavailable(f"{what}: start-up interrupted")
    where = f"; its log is {log}" if log else ""
    raise ServiceUnavailable(f"{what} was not ready after {timeout:.0f} s ({reason}){where}")


