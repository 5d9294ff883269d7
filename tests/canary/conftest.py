"""Fixtures for the canary tests: one trained iris model per session, one served repository per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from model_release.triton.shim import auto_complete_needed, prepare_canary_repository
from model_release.triton.local import NO_AUTO_COMPLETE, LocalTriton, runtime_venv

from .support import train_iris, write_leaf, write_pipeline


@pytest.fixture(scope="session")
def iris(tmp_path_factory: pytest.TempPathFactory):
    """(onnx path, golden inputs, native reference outputs) of a LogisticRegression on iris."""
    return train_iris(tmp_path_factory.mktemp("iris-train"))


@pytest.fixture(scope="session")
def iris_repository(tmp_path_factory: pytest.TempPathFactory, iris) -> Path:
    """A classifier repository with pipelines over one ONNX leaf: iris (good), iris_flip (the
    postprocess flips every 5th row's label), iris_broken (the postprocess fails to load),
    iris_slow (sleeps 25 ms per batch) and iris_kill (kills the server during the load phase)."""
    onnx_path, _, _ = iris
    repo = tmp_path_factory.mktemp("iris-repo") / "repository"
    write_leaf(repo, onnx_path)
    write_pipeline(repo, "iris")
    write_pipeline(repo, "iris_flip", flip_every=5)
    write_pipeline(repo, "iris_broken", fail_on_load=True)
    write_pipeline(repo, "iris_slow", sleep_ms=25)  # the same answers, 25 ms later
    write_pipeline(repo, "iris_kill", kill_after=60)  # takes the server down at its 60th batch (in the load phase)
    return repo


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, iris_repository: Path) -> Iterator[LocalTriton]:
    """One real tritonserver over a shimmed copy of ``iris_repository``, explicit model control; without
    auto-complete when the copy does not need it, as the canary runs its own (canary/serve.py)."""
    if not (runtime_venv() / "bin" / "python").exists():
        pytest.fail(f"the runtime venv {runtime_venv()} is missing: run `bash infra/local/setup.sh`")
    work = tmp_path_factory.mktemp("served")
    copy = prepare_canary_repository(iris_repository, work / "repository")
    args = [] if auto_complete_needed(copy.path) else [NO_AUTO_COMPLETE]
    with LocalTriton(copy.path, work_dir=work / "server", ready_timeout=60, server_args=args) as triton:
        yield triton
