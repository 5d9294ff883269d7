"""The same wheel beside the oldest Airflow 3 and MLflow 3 its ranges claim: the DAG-integrity tests and one
release pass there.

The venv is resolved by uv with ``apache-airflow`` and ``mlflow`` at the floors pyproject.toml declares and
everything else as it stood a week after that Airflow's release (``--exclude-newer``), the set a team on that
Airflow would have installed with its constraint file; a later release of a library cannot break this test.
The first run downloads what uv's cache lacks (about 500 MB); later runs install from the cache. MLflow runs
as a server of the venv's own version (a newer MLflow's SQLite schema would not open in an older one).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from model_release.local.http import answers
from model_release.local.ports import free_port
from model_release.local.procs import spawn, stop_group, sweep
from model_release.local.stack import EmbeddedStack

from tests.conftest import PROJECT

from .conftest import Dist, Venv, make_venv
from .release import failure, release_wine, serving

pytestmark = [pytest.mark.package, pytest.mark.integration, pytest.mark.dags, pytest.mark.slow, pytest.mark.timeout(1800)]

#: a week after the Airflow floor's release (3.2.0: 2026-04-07): what its constraint file would have held
RESOLVED_AS_OF = "2026-04-15T00:00:00Z"


def floor(name: str) -> str:
    """The oldest version pyproject.toml's range for ``name`` admits (its ``>=``)."""
    deps = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(Requirement(d.split("#")[0]).specifier for d in deps if Requirement(d.split("#")[0]).name == name)
    return next(s.version for s in spec if s.operator == ">=")


@pytest.fixture(scope="module")
def oldest(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("oldest")
    venv = make_venv(base / "venv", base / "user", str(dist.wheel), f"apache-airflow=={floor('apache-airflow')}",
                     f"mlflow=={floor('mlflow')}", "pytest>=8", "pytest-xdist", "pytest-timeout",
                     offline=False, constraints=None, timeout=900, exclude_newer=RESOLVED_AS_OF)
    versions = venv.run(venv.python, "-c", "from importlib.metadata import version as v; "
                        "print(v('apache-airflow'), v('mlflow'))").stdout.split()
    assert versions == [floor("apache-airflow"), floor("mlflow")], versions
    return venv


@contextmanager
def mlflow_server(venv: Venv, folder: Path) -> Iterator[str]:
    """``mlflow server`` of the venv's MLflow on 127.0.0.1 (SQLite, local artifacts); its URL."""
    import time

    folder.mkdir(parents=True)
    port, tag = free_port(), f"oldest-mlflow-{free_port()}"
    argv = [str(venv.bin("mlflow")), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}", "--artifacts-destination", str(folder / "artifacts")]
    proc = spawn(argv, env=venv.env(), stack_id=tag, log_path=folder / "mlflow.log", cwd=folder)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while answers(f"{url}/health") != 200:
            assert proc.poll() is None and time.monotonic() < deadline, (folder / "mlflow.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        stop_group(proc, timeout=20)
        sweep(tag)


def test_the_dag_integrity_tests_pass_beside_the_oldest_airflow_and_mlflow(oldest: Venv) -> None:
    """The clone's tests/dags, run by the oldest venv's pytest: the package and Airflow come from the venv."""
    run = subprocess.run([str(oldest.python), "-m", "pytest", "tests/dags/test_dag_integrity.py", "-q", "-p", "no:cacheprovider"],
                         cwd=PROJECT, env=oldest.env(), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and " failed" not in run.stdout


def test_one_release_beside_the_oldest_airflow_and_mlflow(oldest: Venv, tmp_path: Path) -> None:
    with EmbeddedStack(tmp_path / "stack") as stack, serving(stack, tmp_path / "serving", "wine-oldest") as fleet, \
            mlflow_server(oldest, (tmp_path / "mlflow")) as tracking:
        done = release_wine(oldest, stack, fleet, prefix="wine-oldest", tracking=tracking)
    run = done["run"]
    assert run.returncode == 0 and run.stdout.strip().splitlines()[-1] == "run state: success", failure(run)
    assert done["pointer"] is not None and done["alias"] == "1"
    assert done["served"] is not None and done["served"] >= 0.9, done["served"]
    print(f"\n[package] released beside apache-airflow {floor('apache-airflow')} and mlflow {floor('mlflow')} "
          f"({sys.version.split()[0]})")
