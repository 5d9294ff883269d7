"""golden.slices: categorical columns of the golden file, kept out of the inputs, checked, written beside the ground truth."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from model_release.canary.serve import load_golden
from model_release.errors import CanaryRejected, SpecError
from model_release.model.golden import MAX_SLICE_VALUES, SLICE_PREFIX, check_golden, iter_golden, write_truth
from model_release.types import TensorSpec

from .test_golden import intake_with, spec_for

INPUT = TensorSpec("input", "FP32", (2,))


def _golden(tmp_path, rows: int = 10, **columns):  # noqa: ANN001, ANN003, ANN202
    data = {"x": np.arange(rows * 2, dtype=np.float64).reshape(rows, 2), "y": np.arange(rows) % 3, **columns}
    np.savez(tmp_path / "g.npz", **data)
    return tmp_path / "g.npz"


def test_slice_columns_are_not_inputs_and_are_written_as_text_beside_the_target(tmp_path):
    region = np.array(["north", "south"] * 5)
    spec = spec_for(_golden(tmp_path, region=region, device=np.arange(10) % 2), target="y", slices=["region", "device"],
                    batch_rows=4)
    (x,) = {tuple(b) for b in iter_golden(spec, intake_with(INPUT))}  # the one column left is the input
    assert x == ("input",)
    assert check_golden(spec, intake_with(INPUT)) == 10
    assert write_truth(spec, intake_with(INPUT), tmp_path / "truth.npz") == 10
    with np.load(tmp_path / "truth.npz") as written:
        assert sorted(written.files) == ["slice.device", "slice.region", "target"]
        assert written["slice.region"].tolist() == region.tolist()
        assert written["slice.device"].tolist() == ["0", "1"] * 5
        assert written["target"].tolist() == (np.arange(10) % 3).tolist()


def test_a_slice_column_an_input_has_the_name_of_stays_an_input(tmp_path):
    spec = spec_for(_golden(tmp_path, input=np.zeros((10, 2)), flag=np.arange(10) % 2), target="y", slices=["flag"])
    flag = TensorSpec("flag", "INT64", (1,))
    (batch,) = iter_golden(spec, intake_with(INPUT, flag))
    assert batch["flag"][:, 0].tolist() == (np.arange(10) % 2).tolist()


def test_parquet_scalar_features_are_stacked_without_the_slice_column(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"f0": np.arange(6.0), "f1": np.arange(6.0) + 1, "y": [0, 1] * 3, "region": list("abcabc")})
    frame.to_parquet(tmp_path / "g.parquet")
    spec = spec_for(tmp_path / "g.parquet", target="y", slices=["region"])
    (batch,) = iter_golden(spec, intake_with(INPUT))
    assert batch["input"][1].tolist() == [1.0, 2.0]
    write_truth(spec, intake_with(INPUT), tmp_path / "truth.npz")
    with np.load(tmp_path / "truth.npz") as written:
        assert written["slice.region"].tolist() == list("abcabc")


@pytest.mark.parametrize(("columns", "message"), [
    ({}, "has no slice column 'region' (golden.slices in the release spec 'rel'); its columns: ['x', 'y']"),
    ({"region": np.linspace(0, 1, 10)}, "slice column 'region' has dtype float64; a slice column holds one category per row"),
    ({"region": np.zeros((10, 2), dtype=np.int64)}, "slice column 'region' has [2] values per row"),
])
def test_a_slice_column_missing_or_not_categorical_is_refused(tmp_path, columns, message):
    spec = spec_for(_golden(tmp_path, **columns), target="y", slices=["region"])
    with pytest.raises(SpecError) as err:
        check_golden(spec, intake_with(INPUT))
    assert message in str(err.value)


@pytest.mark.parametrize(("distinct", "refused"), [(MAX_SLICE_VALUES, False), (MAX_SLICE_VALUES + 1, True)])
def test_a_slice_column_of_more_distinct_values_than_the_limit_is_refused(tmp_path, distinct, refused):
    rows = MAX_SLICE_VALUES + 1
    spec = spec_for(_golden(tmp_path, rows=rows, region=np.arange(rows) % distinct), target="y", slices=["region"],
                    rows=rows)
    if not refused:
        assert check_golden(spec, intake_with(INPUT)) == rows
        return
    with pytest.raises(SpecError, match=f"slice column 'region' .* has {distinct} distinct values, more than {MAX_SLICE_VALUES}"):
        check_golden(spec, intake_with(INPUT))


def test_the_canary_reads_the_slices_written_beside_the_truth_and_refuses_a_truth_written_without_them(tmp_path):
    np.savez(tmp_path / "golden.npz", input=np.zeros((4, 2)))
    np.savez(tmp_path / "reference.npz", label=np.zeros(4))
    np.savez(tmp_path / "truth.npz", target=np.arange(4), **{SLICE_PREFIX + "region": np.array(list("abab"))})
    export = SimpleNamespace(golden_path=str(tmp_path / "golden.npz"), reference_path=str(tmp_path / "reference.npz"),
                             truth_path=str(tmp_path / "truth.npz"), composed_reference={})
    report = SimpleNamespace(golden=None)
    spec = spec_for(tmp_path / "g.npz", target="y", slices=["region"])
    golden = load_golden(spec, export, report)
    assert golden.slices["region"].tolist() == list("abab") and report.golden["slices"] == ["region"]
    np.savez(tmp_path / "truth.npz", target=np.arange(4))
    with pytest.raises(CanaryRejected, match=r"holds no golden.slices column \['region'\].*re-run the export stage"):
        load_golden(spec, export, report)
    assert load_golden(spec_for(tmp_path / "g.npz", target="y"), export, report).slices == {}
