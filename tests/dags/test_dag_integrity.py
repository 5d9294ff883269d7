"""Every DAG file imports cleanly, quickly, and without the heavy frameworks."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT

DAG_FILES = sorted((PROJECT / "dags").glob("*.py"))

# One interpreter imports Airflow once, then imports each DAG file in a child forked from it: a child
# starts where a fresh interpreter that ran `import airflow.sdk` would, so a file sees no module another
# file imported (the heavy-framework check stays per file), and Airflow's import is paid once, not per file.
_PROBE = """
import importlib.util, json, os, sys, time, traceback
import airflow.sdk  # Airflow's own import is not the DAG file's cost: "seconds" is what the file adds


def describe(path):
    t = time.perf_counter()
    spec = importlib.util.spec_from_file_location("dagfile", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from airflow.sdk import DAG
    dags = [v for v in vars(mod).values() if isinstance(v, DAG)]
    return {
        "dags": [d.dag_id for d in dags],
        "tasks": {d.dag_id: sorted(d.task_ids) for d in dags},
        "queues": {d.dag_id: {t.task_id: t.queue for t in d.tasks} for d in dags},
        "docs": {d.dag_id: bool(d.doc_md) for d in dags},
        "upstream": {d.dag_id: {t.task_id: sorted(t.upstream_task_ids) for t in d.tasks} for d in dags},
        "outlets": {d.dag_id: {t.task_id: [f"{type(o).__name__}:{o.name}" for o in t.outlets] for t in d.tasks} for d in dags},
        "schedules": {d.dag_id: d.schedule if d.schedule is None or isinstance(d.schedule, str)
                      else [a.name for a in d.schedule] if isinstance(d.schedule, (list, tuple)) else str(d.schedule)
                      for d in dags},
        "heavy": sorted(m for m in ("torch", "onnxruntime", "tensorrt", "great_expectations", "skl2onnx") if m in sys.modules),
        "seconds": time.perf_counter() - t,
    }


for path in sys.argv[1:]:
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one DAG file, its answer through the pipe
        os.close(read)
        try:
            answer = {"info": describe(path)}
        except BaseException:
            answer = {"error": traceback.format_exc()}
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    answer = json.loads(text) if text else {"error": f"the probe of {path} exited with {status} and said nothing"}
    print(json.dumps({"path": path, **answer}))
"""


@functools.cache
def _probes() -> dict[str, dict]:
    """Each DAG file's answer (``info`` or ``error``), by file name: one probe for the module."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, *map(str, DAG_FILES)], capture_output=True, text=True,
                          timeout=120 * len(DAG_FILES), cwd=PROJECT)
    assert proc.returncode == 0, f"the DAG probe failed:\n{proc.stderr[-3000:]}"
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"path": ')]
    return {Path(a["path"]).name: a for a in answers}


def _probe(path: Path) -> dict:
    answer = _probes().get(path.name)
    assert answer is not None, f"the DAG probe gave no answer for {path.name}"
    assert "info" in answer, f"{path.name} failed to import:\n{answer['error'][-3000:]}"
    return answer["info"]


def test_there_are_dag_files() -> None:
    assert DAG_FILES, "dags/ holds no DAG file"


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_dag_file_imports_without_heavy_frameworks(path: Path) -> None:
    info = _probe(path)
    assert info["dags"], f"{path.name} defines no DAG"
    assert info["heavy"] == [], f"parsing {path.name} imported {info['heavy']}; import them inside the task instead"


RELEASE_TASKS = sorted(["start", "intake", "export", "tensorrt", "assemble", "canary", "promote", "rollout", "finish"])


def test_release_dag_shape() -> None:
    info = _probe(PROJECT / "dags" / "model_release.py")
    assert info["tasks"]["model_release"] == RELEASE_TASKS
    assert info["queues"]["model_release"]["tensorrt"] == "gpu"
    assert info["queues"]["model_release"]["export"] != "gpu"
    assert all(info["docs"].values()), "every DAG has doc_md"
    # finish settles the ledger after the roll-out, so a rejection by the watch is the run's verdict
    assert info["upstream"]["model_release"]["finish"] == ["promote", "rollout", "start"]
    # promote emits the channel's Asset event; rollout only through its alias (a rollback by the watch)
    assert info["outlets"]["model_release"]["promote"] == ["Asset:model_release_channel_production"]
    assert info["outlets"]["model_release"]["rollout"] == ["AssetAlias:model_release_channel_production_watch_rollbacks"]


def test_one_scheduled_dag_per_spec_with_the_specs_schedule() -> None:
    info = _probe(PROJECT / "dags" / "model_release_scheduled.py")
    specs = sorted(p.stem for p in (PROJECT / "releases").glob("*.yaml"))
    assert sorted(info["dags"]) == sorted({f"model_release__{s}" for s in specs})
    assert info["tasks"]["model_release__iris"] == RELEASE_TASKS
    assert info["queues"]["model_release__iris"]["tensorrt"] == "gpu"
    iris = info["schedules"]["model_release__iris"]  # the registry Asset or releases/iris.yaml's @daily
    assert "AssetOrTimeSchedule" in iris and "model_release_registry_iris" in iris, iris
    # Airflow 3.3 writes @daily as its cron expression; 3.2 (the oldest the package claims, tests/package) keeps it
    assert "expression='0 0 * * *'" in iris or "expression='@daily'" in iris, iris
    assert info["seconds"] < 10, f"generating the scheduled DAGs took {info['seconds']:.1f} s beyond importing Airflow"


def test_rollback_and_downstream_dags() -> None:
    rollback = _probe(PROJECT / "dags" / "model_release_rollback.py")
    assert rollback["tasks"]["model_release_rollback"] == ["rollback"]
    downstream = _probe(PROJECT / "dags" / "model_release_downstream.py")
    assert downstream["schedules"]["model_release_downstream_example"] == ["model_release_channel_production"]
    assert all(rollback["docs"].values()) and all(downstream["docs"].values())


def test_the_core_never_imports_airflow() -> None:
    """The dependency direction of DESIGN.md: core stage modules <- model_release.airflow <- dags/."""
    import ast

    package = PROJECT / "plugins" / "model_release"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if (package / "airflow") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            offenders += [f"{path.relative_to(PROJECT)}:{node.lineno} imports {n}" for n in names if n == "airflow" or n.startswith("airflow.")]
    assert offenders == []


def core_imports(folder: Path) -> list[str]:
    """Every import in ``folder``'s DAG files of model-release outside ``model_release.airflow``
    (at module level, inside tasks and under ``TYPE_CHECKING`` alike)."""
    import ast

    offenders = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] if node.module != "model_release" else [f"model_release.{a.name}" for a in node.names]
            else:
                continue
            offenders += [(path.name, node.lineno, n) for n in names
                          if (n == "model_release" or n.startswith("model_release."))
                          and n != "model_release.airflow" and not n.startswith("model_release.airflow.")]
    return [f"{name}:{line} imports {module}" for name, line, module in sorted(offenders)]


def test_dag_files_reach_the_core_only_through_model_release_airflow() -> None:
    """The dependency direction of DESIGN.md, from the other end: dags/ -> model_release.airflow -> the core."""
    offenders = core_imports(PROJECT / "dags")
    assert offenders == [], "give model_release.airflow (e.g. airflow/dagfiles.py) what these DAG files need: " + "; ".join(offenders)


def test_the_dag_import_check_finds_a_direct_core_import(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("from model_release.airflow.dags import channel_asset\nimport model_release.airflow\n")
    (tmp_path / "bad.py").write_text(
        "from model_release.names import NAME\n"
        "def task():\n    import model_release.spec\n"
        "from model_release import errors, airflow\n"
    )
    assert core_imports(tmp_path) == ["bad.py:1 imports model_release.names", "bad.py:3 imports model_release.spec",
                                      "bad.py:4 imports model_release.errors"]


def test_a_spec_that_does_not_validate_becomes_no_scheduled_dag(tmp_path: Path, caplog) -> None:
    from model_release.airflow.dagfiles import airflow_schedule, scheduled_specs

    (tmp_path / "good.yaml").write_text("name: good\nschedule: 30m\nmodel: {name: iris-classifier, alias: candidate}\n")
    (tmp_path / "bad.yaml").write_text("name: bad\nmodel: {name: iris-classifier}\n")
    with caplog.at_level("ERROR", logger="model_release.airflow.dagfiles"):
        found = scheduled_specs(tmp_path)
    assert [(p.name, s.name) for p, s in found] == [("good.yaml", "good")]
    assert airflow_schedule(found[0][1]).timetable.delta.total_seconds() == 1800  # or the registry Asset
    assert len(caplog.records) == 1 and "no scheduled DAG for" in caplog.text and "bad.yaml" in caplog.text
    assert "give exactly one of model.alias" in caplog.text
