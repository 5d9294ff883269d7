"""One real SQLite MLflow per test session for the intake tests."""

from __future__ import annotations

import pytest

from tests.export.models import Registry


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    return Registry(tmp_path_factory.mktemp("mlflow-intake"))
