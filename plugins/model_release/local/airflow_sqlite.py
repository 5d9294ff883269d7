"""How long Airflow's processes wait for the local stack's SQLite database before they give up.

The embedded stacks keep Airflow's metadata in one SQLite file, written by the scheduler, the
dag-processor, the api-server and each task. SQLite lets one writer in at a time; Python's sqlite3
waits 5 s for the lock, then raises ``database is locked``. On a busy 2-core machine a writer
descheduled while it holds the lock can keep it longer than that, and then the api-server answers
500 "Database error" (CI saw ``POST /api/v2/pools`` fail so during ``model-release up``) and the
scheduler's heartbeat fails. Reproduced on a live stack by holding ``BEGIN EXCLUSIVE`` on the file for
8 s: the POST failed after exactly 5.0 s.

Airflow reads the connection arguments from an import path (``[database] sql_alchemy_connect_args``
and its ``_async`` twin for the api-server's async sessions): these dicts, through :data:`ENV`.
"""

from __future__ import annotations

from typing import Any

#: seconds a connection waits for SQLite's write lock (sqlite3's ``timeout``; its default is 5). Under the
#: 30 s the stack's API client waits for an answer (:class:`~.http.AirflowApi`), so a request that still
#: meets a locked file is answered 500, which ``model-release up`` asks again (:func:`~.services.ensure_canary_pool`)
LOCK_WAIT_S = 20.0

#: for the sync engine (Airflow adds ``check_same_thread`` to it); ``aiosqlite`` passes the same to sqlite3
CONNECT_ARGS: dict[str, Any] = {"timeout": LOCK_WAIT_S}
CONNECT_ARGS_ASYNC: dict[str, Any] = {"timeout": LOCK_WAIT_S}

#: the variables that give every Airflow process of a SQLite stack these arguments
ENV = {
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": f"{__name__}.CONNECT_ARGS",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": f"{__name__}.CONNECT_ARGS_ASYNC",
}
