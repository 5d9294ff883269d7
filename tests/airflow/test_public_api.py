"""What users' DAG files import from ``model_release.airflow`` exists, and costs a DAG parse no heavy library.

Every DAG file pays its imports at every parse (the dag-processor's, and each task's on its worker):
``import model_release.airflow`` imports nothing at all until a name is used, and the public names
bring Airflow's SDK and the hooks, never MLflow, ONNX, torch or scikit-learn (the task bodies import
those when they run). Checked in a fresh interpreter, so no other test's imports count.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: what a DAG file of a user writes (README, "Your own DAG"; examples/release_wine_dag.py)
PUBLIC = ["release_task_group", "ReleaseStartOperator", "IntakeOperator", "ExportOperator", "TensorRTOperator",
          "AssembleOperator", "CanaryOperator", "PromoteOperator", "RolloutOperator", "ReleaseFinishOperator",
          "RollbackOperator", "MlflowHook", "ModelStoreHook", "TritonCanaryHook", "channel_asset"]
HEAVY = ["mlflow", "onnx", "onnxruntime", "torch", "sklearn", "tensorrt", "great_expectations", "numpy"]

_PROBE = """
import json, sys
public, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
import model_release.airflow as api
bare = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy + ["airflow"]})
from airflow.sdk import BaseHook, BaseOperator
def kind(obj):
    if isinstance(obj, type):
        return "operator" if issubclass(obj, BaseOperator) else "hook" if issubclass(obj, BaseHook) else "class"
    return "function" if callable(obj) else type(obj).__name__
names = {name: kind(getattr(api, name)) for name in public}
from model_release.airflow import release_task_group, IntakeOperator  # as a DAG file writes it
print(json.dumps({"bare": bare, "names": names, "all": sorted(api.__all__),
                  "heavy": sorted(m for m in heavy if m in sys.modules)}))
"""


@pytest.fixture(scope="module")
def probe() -> dict:
    ran = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(PUBLIC), json.dumps(HEAVY)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(ran.stdout.strip().splitlines()[-1])


def test_importing_the_package_imports_neither_airflow_nor_a_heavy_library(probe) -> None:
    assert probe["bare"] == []


def test_every_name_users_dags_import_exists_and_is_public(probe) -> None:
    assert sorted(probe["names"]) == sorted(PUBLIC) == probe["all"]
    expected = {n: "operator" if n.endswith("Operator") else "hook" if n.endswith("Hook") else "function" for n in PUBLIC}
    assert probe["names"] == expected


def test_the_public_names_import_no_heavy_library(probe) -> None:
    assert probe["heavy"] == [], f"a DAG file that uses model_release.airflow now imports {probe['heavy']} at parse time"


def test_an_unknown_name_says_which_names_there_are() -> None:
    import model_release.airflow as api

    with pytest.raises(AttributeError, match=r"has no attribute 'ReleaseOperator'; its public names are AssembleOperator, "):
        api.ReleaseOperator  # noqa: B018


def test_building_the_release_assets_loads_no_provider() -> None:
    """The Assets' x- scheme keeps Airflow from loading every provider's URI handlers (boto3 with them) at parse time."""
    probe = ("import sys\n"
             "from model_release.airflow.dags import channel_asset, registry_asset\n"
             "a, r = channel_asset('production'), registry_asset('iris')\n"
             "print(a.uri, r.uri, 'airflow.providers.amazon.aws.hooks' in sys.modules, 'boto3' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["x-model-release://channels/production", "x-model-release://registry/iris", "False", "False"]
