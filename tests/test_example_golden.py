"""The example specs' golden files are held out: no row the examples train on, and the target the spec names.

The demo (``releases/iris.yaml``, models from :func:`model_release.local.demo.fit_iris`) and README's
"Using it" (``releases/wine.yaml``, the model from ``examples/register_wine.py``) each ship a golden
file of rows their models never saw, with the ground truth in the column ``golden.target`` names;
the canary's quality gates score every release on it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from model_release.local import demo
from model_release.spec import load_spec
from model_release.spec.sections import DEFAULT_MIN_GOLDEN_ROWS

from .conftest import PROJECT

RELEASES = PROJECT / "releases"


def _register_wine() -> ModuleType:
    spec = importlib.util.spec_from_file_location("register_wine", PROJECT / "examples" / "register_wine.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the split; registers nothing outside __main__
    return module


def _iris_training_rows() -> np.ndarray:
    return demo.fit_iris(c=1.0)[1]  # the rows every demo model is fitted on


def _wine_training_rows() -> np.ndarray:
    return _register_wine().split()[0]


def _rows(x: np.ndarray) -> set[bytes]:
    return {np.asarray(row, dtype=np.float32).tobytes() for row in x}


EXAMPLES: dict[str, tuple[str, Callable[[], np.ndarray]]] = {
    "iris": ("iris.yaml", _iris_training_rows),
    "wine": ("wine.yaml", _wine_training_rows),
}


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_golden_file_shares_no_row_with_the_training_rows(example: str) -> None:
    spec_file, training = EXAMPLES[example]
    spec = load_spec(RELEASES / spec_file)
    assert spec.golden.source == "file" and spec.golden.path is not None
    golden = np.load(RELEASES / spec.golden.path)
    (name,) = [k for k in golden.files if k != spec.golden.target]
    x, train = golden[name], training()
    assert x.dtype == np.float32 and x.shape[1] == train.shape[1]
    assert len(_rows(x)) == len(x), "a golden row repeated"
    assert not _rows(x) & _rows(train), f"{example}: golden rows the model trains on"


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_golden_file_holds_the_target_the_spec_names_with_every_label_gated(example: str) -> None:
    spec = load_spec(RELEASES / EXAMPLES[example][0])
    golden = np.load(RELEASES / str(spec.golden.path))
    assert spec.golden.target in golden.files
    target = golden[str(spec.golden.target)]
    labels, counts = np.unique(target, return_counts=True)
    assert sorted(labels.tolist()) == sorted(spec.repository.labels or [])
    assert counts.min() >= spec.canary.classes.min_support, "every class gated, none only shown"
    assert len(target) >= spec.golden.min_rows == DEFAULT_MIN_GOLDEN_ROWS  # the default, not lowered


def test_the_shipped_files_are_what_the_examples_write_today(tmp_path: Path) -> None:
    """A changed split without a regenerated file would put training rows in the golden set."""
    iris, wine = demo.write_iris_golden(tmp_path / "iris.npz"), _register_wine().write_golden(tmp_path / "wine.npz")
    for written, shipped in ((iris, RELEASES / "iris-golden.npz"), (wine, RELEASES / "wine-golden.npz")):
        a, b = np.load(written), np.load(shipped)
        assert a.files == b.files
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])


def test_the_demo_trains_on_the_rows_the_split_keeps_for_training() -> None:
    x_train, y_train, x_golden, _ = demo.iris_split()
    model, x, y = demo.fit_iris(c=1.0, noise=0.4)
    np.testing.assert_array_equal(x, x_train)
    assert len(x) + len(x_golden) == 149 and len(x_golden) == demo.GOLDEN_ROWS  # iris's 150 rows, its repeated one once
    assert (y != y_train).sum() > 0  # the noisy labels are the training rows' own
    assert model.n_features_in_ == 4
