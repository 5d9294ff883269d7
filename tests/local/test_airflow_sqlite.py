"""The local stack's Airflow waits out a SQLite write lock held past sqlite3's 5 s default.

CI once lost a whole `model-release up` to it: the api-server answered ``POST /api/v2/pools`` with 500
"Database error" while another process held the file's lock. Here Airflow's own engine
(``airflow.settings``, configured from the environment the stack gives its services) writes while
another process holds ``BEGIN EXCLUSIVE`` for 7 s: with the stack's environment the write waits and
lands; without its two connect-args variables the same write fails after 5 s, so the test can fail.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from model_release.local import airflow_sqlite
from model_release.local.stack_folder import Layout, load_config, stack_env

pytestmark = pytest.mark.integration  # an Airflow import per process; about 9 s of wall time

HOLD_S = 7.0  # past sqlite3's 5 s default, well inside the stack's wait

_WRITE_WHILE_LOCKED = """
import subprocess, sys, time
from airflow import settings
from sqlalchemy import text

db, hold = sys.argv[1], sys.argv[2]
holder = subprocess.Popen([sys.executable, "-c", (
    "import sqlite3, sys, time\\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None)\\n"
    "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True)\\n"
    "time.sleep(float(sys.argv[2])); c.execute('COMMIT')\\n"), db, hold], stdout=subprocess.PIPE, text=True)
assert holder.stdout.readline().strip() == "locked"
t0 = time.monotonic()
try:
    with settings.engine.begin() as conn:
        conn.execute(text("INSERT INTO probe VALUES (1)"))
    print(f"written {time.monotonic() - t0:.1f}")
except Exception as exc:
    print(f"failed {time.monotonic() - t0:.1f} {type(exc).__name__}: {str(exc).splitlines()[0]}")
holder.wait()
"""


def _start(env: dict[str, str], db: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _WRITE_WHILE_LOCKED, str(db), str(HOLD_S)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> tuple[str, float, str]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    word, seconds, *rest = out.strip().splitlines()[-1].split(" ", 2)
    return word, float(seconds), " ".join(rest)


def test_the_stack_s_airflow_waits_out_a_sqlite_lock_that_sqlite3_s_default_gives_up_on(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "stack")
    env = {**os.environ, **stack_env(layout, load_config(layout)[0])}
    assert {k: env[k] for k in airflow_sqlite.ENV} == airflow_sqlite.ENV
    without = {k: v for k, v in env.items() if k not in airflow_sqlite.ENV}
    without["AIRFLOW_HOME"] = str(tmp_path / "default-home")  # a file of its own: each holder locks its own
    dbs = []
    for home in (env["AIRFLOW_HOME"], without["AIRFLOW_HOME"]):
        Path(home).mkdir(parents=True)
        dbs.append(Path(home) / "airflow.db")  # where Airflow's default SQLite connection points
        with sqlite3.connect(dbs[-1]) as conn:
            conn.execute("CREATE TABLE probe (x INTEGER)")
    waiting, default = _start(env, dbs[0]), _start(without, dbs[1])  # at once: two Airflow imports in parallel
    word, seconds, why = _result(default)
    assert word == "failed" and "database is locked" in why and seconds < HOLD_S - 1, (word, seconds, why)
    word, seconds, why = _result(waiting)
    assert word == "written" and HOLD_S - 2 < seconds < airflow_sqlite.LOCK_WAIT_S, (word, seconds, why)
    counts = []
    for db in dbs:
        with sqlite3.connect(db) as conn:
            counts.append(conn.execute("SELECT count(*) FROM probe").fetchone()[0])
    assert counts == [1, 0]  # through Airflow's engine, into the file Airflow's home names
