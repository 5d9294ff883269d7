"""Project-wide test set-up: quiet, isolated state, and a check that no test leaves a process behind."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from model_release import collect_less

# Before anything imports Airflow or MLflow: keep their state out of the user's home.
# Each pytest-xdist worker gets its own (a worker inherits the controller's environment, whose
# AIRFLOW_HOME would have both workers migrate and write one SQLite database).
_INHERITED = os.environ.get("MODEL_RELEASE_TEST_STATE")
_STATE = Path(tempfile.mkdtemp(prefix="model-release-tests-"))
atexit.register(shutil.rmtree, _STATE, True)  # each process removes its own (every run left one in the temp folder)
os.environ["MODEL_RELEASE_TEST_STATE"] = str(_STATE)
if os.environ.get("AIRFLOW_HOME") is None or (_INHERITED and os.environ["AIRFLOW_HOME"].startswith(_INHERITED)):
    os.environ["AIRFLOW_HOME"] = str(_STATE / "airflow")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")

PROJECT = Path(__file__).resolve().parents[1]

#: ``--cpu-time``: the CPU each test file spent, and how busy the machine was (tests/cpu_time.py)
pytest_plugins = ["tests.cpu_time"]

# each worker holds MLflow, scikit-learn and Airflow: fewer full collections of them (model_release.GC_THRESHOLD)
collect_less()


def _children(pid: int) -> list[tuple[int, str]]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...
        comm_end = text.rfind(")")
        fields = text[comm_end + 2 :].split()
        if fields and fields[0] != "Z" and int(fields[1]) == pid:
            found.append((int(stat.parent.name), text[text.find("(") + 1 : comm_end]))
    return found


_WORKER_LEFTOVERS: list = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # noqa: ANN001 - pytest-xdist hook, in the controller
    """Collect what each xdist worker found left running (the controller's own children are the workers)."""
    _WORKER_LEFTOVERS.extend(getattr(node, "workeroutput", {}).get("leftovers", []))


def pytest_sessionfinish(session, exitstatus):  # noqa: ANN001 - pytest hook
    """Fail the run if a test left a server (moto, tritonserver, MLflow) running.

    Under pytest-xdist each worker checks its own children and hands them to the controller, which
    fails the run (a worker's own exit status is taken before this hook runs)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if getattr(session.config.option, "dist", "no") != "no" and workeroutput is None:
        leftovers = list(_WORKER_LEFTOVERS)  # the controller: its children are the workers themselves
    else:
        leftovers = [(pid, comm) for pid, comm in _children(os.getpid()) if comm not in ("pytest",)]
        if workeroutput is not None:
            workeroutput["leftovers"] = leftovers
            return
    if leftovers:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"ERROR: processes left running by the tests: {leftovers}", red=True)
        session.exitstatus = 1


def pytest_ignore_collect(collection_path, config):  # noqa: ANN001 - pytest hook
    """With ``-m serial`` (make test's second part), import only the test files that mark a test serial
    (tests/schedule.py, :func:`~tests.schedule.left_out_of_serial`)."""
    from .schedule import left_out_of_serial

    return left_out_of_serial(collection_path, config.option.markexpr) or None


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the serial tests of a "not serial" run are still among the items
def pytest_collection_modifyitems(config, items):  # noqa: ANN001 - pytest hook
    """Check the serial marks and put the heaviest test files first (tests/schedule.py); skip ``gpu``
    tests, with the reason, where this machine cannot build TensorRT plans."""
    from .schedule import check_serial_marks, heaviest_files_first

    check_serial_marks(items)
    items[:] = heaviest_files_first(items)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    from model_release.tensorrt.onnx2trt import gpu_environment

    _, missing = gpu_environment()
    if missing:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU worker with TensorRT: {missing}"))
