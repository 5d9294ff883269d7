"""Intake against a real SQLite MLflow: resolving, lineage, tensor specs, and every refusal's message."""

from __future__ import annotations

import numpy as np
import pytest

from model_release.errors import IntakeError
from model_release.intake.stage import content_digest, schema_to_specs
from model_release.pipeline import Services, run_intake
from model_release.model.mlmodel import triton_name
from model_release.types import IntakeResult, TensorSpec
from model_release.workspace import Workspace
from tests.export.models import Registry, iris, make_spec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def iris_versions(registry: Registry) -> list[str]:
    """Two versions of "iris-lr": v1 (C=1) and v2 (C=0.1); alias candidate -> v1, production -> v2."""
    from sklearn.linear_model import LogisticRegression

    x, y = iris()
    versions = []
    for c in (1.0, 0.1):
        model = LogisticRegression(C=c, max_iter=500).fit(x, y)
        versions.append(registry.log("sklearn", model, "iris-lr", alias=None, input_example=x[:10],
                                     params={"C": c}, metrics={"accuracy": float(model.score(x, y))}))
    registry.client.set_registered_model_alias("iris-lr", "candidate", versions[0])
    registry.client.set_registered_model_alias("iris-lr", "production", versions[1])
    return versions


def intake_of(registry: Registry, tmp_path, release: str = "r1", **model) -> IntakeResult:
    spec = make_spec(model.pop("name", "iris-lr"), **model)
    return run_intake(spec, Workspace(release, root=tmp_path), Services(tracking_uri=registry.uri))


def test_alias_resolves_to_one_version_with_lineage(registry, iris_versions, tmp_path):
    result = intake_of(registry, tmp_path, alias="candidate")

    mv = registry.client.get_model_version("iris-lr", iris_versions[0])
    assert (result.model_name, result.version, result.alias) == ("iris-lr", iris_versions[0], "candidate")
    assert result.run_id == mv.run_id and result.source == mv.source
    assert result.params == {"C": "1.0"}
    assert 0.9 < result.metrics["accuracy"] <= 1.0
    assert result.flavor == "sklearn" and result.classes == [0, 1, 2]
    assert result.inputs == [TensorSpec("input", "FP64", (4,))]
    assert result.outputs == [TensorSpec("output", "INT64", ())]
    assert result.content_digest == content_digest(tmp_path / "r1" / "intake" / "model")
    assert (tmp_path / "r1" / "intake" / "model" / "MLmodel").is_file()
    assert Workspace("r1", root=tmp_path).load_result("intake", IntakeResult) == result


def test_version_number_and_a_moved_alias(registry, iris_versions, tmp_path):
    first = intake_of(registry, tmp_path, "a", alias="candidate")
    registry.client.set_registered_model_alias("iris-lr", "candidate", iris_versions[1])
    try:
        moved = intake_of(registry, tmp_path, "b", alias="candidate")
    finally:
        registry.client.set_registered_model_alias("iris-lr", "candidate", iris_versions[0])
    by_number = intake_of(registry, tmp_path, "c", version=int(iris_versions[0]))

    assert (first.version, moved.version) == (iris_versions[0], iris_versions[1])
    assert moved.content_digest != first.content_digest
    assert by_number.version == iris_versions[0] and by_number.alias is None
    assert by_number.content_digest == first.content_digest  # same immutable version, same files


def test_unknown_model_lists_close_names(registry, iris_versions, tmp_path):
    with pytest.raises(IntakeError, match=r"unknown model \"iris-rl\": no registered model has that name; did you mean 'iris-lr'\?"):
        intake_of(registry, tmp_path, name="iris-rl", alias="candidate")


def test_unknown_alias_lists_the_model_aliases(registry, iris_versions, tmp_path):
    with pytest.raises(IntakeError) as err:
        intake_of(registry, tmp_path, alias="staging")
    assert str(err.value) == (
        f'intake: model "iris-lr" has no alias "staging"; its aliases: candidate (version {iris_versions[0]}), '
        f"production (version {iris_versions[1]})"
    )


def test_unknown_version_lists_the_versions(registry, iris_versions, tmp_path):
    with pytest.raises(IntakeError) as err:
        intake_of(registry, tmp_path, version=99)
    assert str(err.value) == f'intake: model "iris-lr" has no version 99; its versions: {", ".join(iris_versions)}'


def test_model_without_signature_says_how_to_log_one(registry, tmp_path):
    from sklearn.tree import DecisionTreeClassifier

    x, y = iris()
    registry.log("sklearn", DecisionTreeClassifier(max_depth=2).fit(x, y), "no-signature",
                 skops_trusted_types=["sklearn.tree._tree.Tree"])
    with pytest.raises(IntakeError) as err:
        intake_of(registry, tmp_path, name="no-signature", alias="candidate")
    assert 'model "no-signature" version 1 has no signature' in str(err.value)
    assert "infer_signature" in str(err.value) and "input_example" in str(err.value)


def test_unsupported_flavor_lists_the_supported_ones(registry, tmp_path):
    import mlflow.pyfunc
    from mlflow.models import infer_signature

    class Doubler(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):  # noqa: ANN001, ARG002
            return model_input * 2

    x = np.ones((3, 2))
    registry.log("pyfunc", Doubler(), "pyfunc-only", signature=infer_signature(x, x))
    with pytest.raises(IntakeError) as err:
        intake_of(registry, tmp_path, name="pyfunc-only", alias="candidate")
    assert "has flavor(s) ['python_function'], none of which can be exported to ONNX" in str(err.value)
    assert "supported flavors: sklearn, pytorch, onnx, xgboost, lightgbm" in str(err.value)


def test_signature_dtype_without_triton_type_is_refused(registry, tmp_path):
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Schema
    from mlflow.types.schema import TensorSpec as MlflowTensorSpec
    from sklearn.linear_model import LinearRegression

    x, y = iris()
    signature = ModelSignature(inputs=Schema([MlflowTensorSpec(np.dtype("complex64"), (-1, 4), "z")]))
    registry.log("sklearn", LinearRegression().fit(x, y), "complex-input", signature=signature)
    with pytest.raises(IntakeError) as err:
        intake_of(registry, tmp_path, name="complex-input", alias="candidate")
    assert "input 'z': dtype 'complex64' has no Triton data type; valid: bool, float16, float32" in str(err.value)


def test_schema_to_specs_several_tensors_columns_and_names():
    from mlflow.types.schema import ColSpec, Schema
    from mlflow.types.schema import TensorSpec as MlflowTensorSpec

    tensors = Schema([MlflowTensorSpec(np.dtype("uint8"), (-1, 3, 32, 32), "image:0"),
                      MlflowTensorSpec(np.dtype("float16"), (-1, 2), "box")])
    specs, names = schema_to_specs(tensors, what="input", default_name="input")
    assert specs == [TensorSpec("image_0", "UINT8", (3, 32, 32), "image:0"), TensorSpec("box", "FP16", (2,))]
    assert names == {"image:0": "image_0"}
    (single,), _ = schema_to_specs(Schema([MlflowTensorSpec(np.dtype("int32"), (-1,))]), what="output", default_name="output")
    assert single == TensorSpec("output", "INT32", ())

    columns = Schema([ColSpec("double", "sepal length (cm)"), ColSpec("long", "count"), ColSpec("boolean", "ok"),
                      ColSpec("string", "class")])
    specs, names = schema_to_specs(columns, what="input", default_name="input")
    assert [(s.name, s.datatype, s.dims, s.source_name) for s in specs] == [
        ("sepal_length_cm", "FP64", (1,), "sepal length (cm)"), ("count", "INT64", (1,), None),
        ("ok", "BOOL", (1,), None), ("class", "BYTES", (1,), None),
    ]
    assert names == {"sepal length (cm)": "sepal_length_cm"}

    with pytest.raises(IntakeError, match=r"input 'when' has type datetime, which has no Triton data type"):
        schema_to_specs(Schema([ColSpec("datetime", "when")]), what="input", default_name="input")


def test_triton_name_is_valid_and_unique():
    taken: set[str] = set()
    assert [triton_name(n, taken) for n in ["a b", "a-b", "9lives", "ok_1", "(x)", ""]] == ["a_b", "a_b_2", "t_9lives", "ok_1", "x", "t_"]


def test_local_tracking_keeps_everything_under_its_root(tmp_path, monkeypatch):
    import mlflow
    from sklearn.linear_model import LinearRegression

    from model_release.local.mlflow import local_tracking

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    root = tmp_path / "store"
    uri = local_tracking(root)
    assert uri == f"sqlite:///{root.resolve()}/mlflow.db"
    registry = Registry(root)  # the same store, selected for this process
    x, y = iris()
    registry.log("sklearn", LinearRegression().fit(x, y), "local-only", input_example=x[:3])
    experiment = mlflow.MlflowClient(tracking_uri=uri).get_experiment_by_name("model-release")
    assert experiment.artifact_location.startswith((root / "artifacts").resolve().as_uri())
    assert list(cwd.iterdir()) == []  # no ./mlruns
    assert any((root / "artifacts").rglob("MLmodel"))


def test_a_version_whose_artifacts_were_deleted_is_an_intake_error(registry, tmp_path):
    import shutil

    from sklearn.linear_model import LogisticRegression

    x, y = iris()
    version = registry.log("sklearn", LogisticRegression(max_iter=200).fit(x, y), "iris-gone", input_example=x[:5])
    location = registry.client.get_model_version_download_uri("iris-gone", version)
    shutil.rmtree(location.removeprefix("file://").removesuffix("/artifacts"))
    with pytest.raises(IntakeError) as err:
        intake_of(registry, tmp_path, name="iris-gone", alias="candidate")
    msg = str(err.value)
    assert msg.startswith(f'intake: model "iris-gone" version {version}: its artifacts are missing')
    assert "no MLmodel file" in msg and "register the model again" in msg


def test_intake_records_the_version_source_without_credentials(registry, iris_versions, tmp_path):
    from model_release.intake.stage import resolve

    class Client:
        """The registry's client, answering with a version whose source URI carries a password."""

        def __getattr__(self, name: str):  # noqa: ANN204
            return getattr(registry.client, name)

        def get_model_version_by_alias(self, name: str, alias: str):  # noqa: ANN201
            version = registry.client.get_model_version_by_alias(name, alias)
            version._source = "https://bot:Pa55-Distinctive@artifacts.internal/m/1"
            return version

    ws = Workspace("r1", root=tmp_path)
    result = resolve(make_spec("iris-lr", alias="candidate"), ws, tracking_uri=registry.uri, client=Client())
    assert result.source == "https://***@artifacts.internal/m/1"
    ws.save_result("intake", result)
    assert "Pa55-Distinctive" not in (tmp_path / "r1" / "intake" / "intake.json").read_text()
