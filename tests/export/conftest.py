"""One real SQLite MLflow per test session for the export tests, and the models registered in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .models import Registry


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    return Registry(tmp_path_factory.mktemp("mlflow-export"))


@pytest.fixture(scope="session")
def breast_cancer(registry: Registry) -> tuple[str, object, object]:
    """A scaled logistic regression pipeline, registered as "bc-classifier"@candidate."""
    from .models import sklearn_classifier_pipeline

    model, x = sklearn_classifier_pipeline()
    registry.log("sklearn", model, "bc-classifier", input_example=x[:100])
    return "bc-classifier", model, x


@pytest.fixture
def ws_root(tmp_path: Path) -> Path:
    return tmp_path / "workspace"
