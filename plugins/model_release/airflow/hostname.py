"""``[core] hostname_callable`` for workers that share a host: the worker's own name.

Airflow records the hostname of the worker that ran each task instance. Two Celery workers on one
machine (the distributed stack of ``model_release.local.distributed``) would both record the
machine's name; with ``MODEL_RELEASE_WORKER_NAME`` set, each records its own. Elsewhere this is
the fully qualified domain name, as Airflow's default.
"""

from __future__ import annotations

import os
import socket


def worker_hostname() -> str:
    return os.environ.get("MODEL_RELEASE_WORKER_NAME") or socket.getfqdn()
