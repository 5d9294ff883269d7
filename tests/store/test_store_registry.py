"""MLflow follows the store: alias ``production`` and tags, against a real sqlite tracking store."""

from __future__ import annotations

import json
import os

import pytest

from model_release.errors import StoreError
from model_release.store import promote, read_channel, rollback
from model_release.store.registry import TAG_RELEASE, TAG_REPORT, MlflowFollower

from .support import make_release

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mlflow_registry(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A sqlite tracking store with model 'iris' at versions 1 and 2."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow
    import mlflow.pyfunc

    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    # the registry too: an earlier test in this worker may have exported another (since stopped) server's as
    # MLFLOW_REGISTRY_URI (mlflow.set_registry_uri does), and log_model registers the model there
    mlflow.set_registry_uri(uri)
    exp = mlflow.create_experiment("store-tests", artifact_location=(root / "artifacts").as_uri())

    class Echo(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):  # noqa: ANN001
            return model_input

    for _ in range(2):
        with mlflow.start_run(experiment_id=exp):
            mlflow.pyfunc.log_model(name="model", python_model=Echo(), pip_requirements=[], registered_model_name="iris")
    return uri


def test_promote_sets_alias_and_tags_rollback_moves_alias(kit, tmp_path, mlflow_registry):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_registry)
    follower = MlflowFollower(mlflow_registry)
    store = kit.store()
    r1 = promote(make_release(tmp_path / "v1", seed="v1", version="1"), "iris-v1", store, "production", follower=follower)
    assert r1.mlflow_alias == "production"
    assert str(client.get_model_version_by_alias("iris", "production").version) == "1"
    r2 = promote(make_release(tmp_path / "v2", seed="v2", version="2"), "iris-v2", store, "production", follower=follower)
    assert r2.mlflow_alias == "production"
    v2 = client.get_model_version_by_alias("iris", "production")
    assert str(v2.version) == "2"
    assert v2.tags[TAG_RELEASE] == "iris-v2"
    assert v2.tags[TAG_REPORT] == f"{kit.uri}/releases/iris-v2/reports/report.html"
    assert client.get_model_version("iris", "1").tags[TAG_RELEASE] == "iris-v1"

    back = rollback(store, "production", follower=follower)
    assert back.to_release == "iris-v1" and back.mlflow_alias == "production"
    assert str(client.get_model_version_by_alias("iris", "production").version) == "1"
    assert read_channel(store, "production").release_id == "iris-v1"


def test_release_without_model_section_is_refused_before_upload(kit, tmp_path, mlflow_registry):
    rel = make_release(tmp_path / "r")
    manifest = json.loads((rel / "release.json").read_text())
    del manifest["model"]
    (rel / "release.json").write_text(json.dumps(manifest))
    store = kit.store()
    with pytest.raises(StoreError, match="model.name"):
        promote(rel, "iris-x", store, "production", follower=MlflowFollower(mlflow_registry))
    assert list(store.backend.list("releases/")) == []


def test_unknown_model_version_is_reported_after_the_move(kit, tmp_path, mlflow_registry):
    store = kit.store()
    with pytest.raises(StoreError) as err:
        promote(make_release(tmp_path / "r", version="99"), "iris-99", store, "production",
                follower=MlflowFollower(mlflow_registry))
    msg = str(err.value)
    assert "now points at 'iris-99'" in msg and "'iris' v99" in msg and "idempotent" in msg
    assert read_channel(store, "production").release_id == "iris-99"
