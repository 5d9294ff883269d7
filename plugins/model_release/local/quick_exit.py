"""Run a Python console script (``airflow``, ``mlflow``) as this process, and let it end without a last sweep.

    python -m model_release.local.quick_exit /path/to/venv/bin/airflow scheduler

When a process that loaded Airflow's or MLflow's modules exits, the interpreter's final garbage
collection walks every object they made: on a 2-core machine the api-server spent 1.5-3 s of CPU
on it after the server had already finished ("Finished server process"), making no system call,
and ``model-release down`` or Ctrl-C waited for it. Here ``gc.freeze()`` is the last exit handler:
it moves every object out of that collection's reach, so the process ends as soon as its own exit
handlers have run. None of them is skipped: exit handlers run last-registered first, and this one
is registered before the script is loaded, so Airflow's and logging's (flushing its handlers) run
before it. Open files are still flushed and closed as the interpreter clears its modules.

``model-release up`` starts its Airflow services, ``airflow db migrate`` and MLflow's server
through it (:mod:`model_release.local.services`).
"""

from __future__ import annotations

import atexit
import gc
import runpy
import sys


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m model_release.local.quick_exit SCRIPT [ARG ...]  (SCRIPT: a console script's path)")
    atexit.register(gc.freeze)
    sys.argv = sys.argv[1:]  # the script sees itself as argv[0], as when it is run directly
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
