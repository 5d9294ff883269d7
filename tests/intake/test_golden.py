"""The golden set: files (npz, parquet) read in batches, cut at golden.rows, checked against the signature."""

from __future__ import annotations

import numpy as np
import pytest

from model_release.errors import SpecError
from model_release.model.golden import NpzWriter, iter_golden, iter_npz
from model_release.types import IntakeResult, TensorSpec
from tests.export.models import make_spec


def intake_with(*inputs: TensorSpec) -> IntakeResult:
    return IntakeResult(model_name="m", version="1", alias=None, run_id=None, source="", flavor="sklearn",
                        model_dir="/nonexistent", inputs=list(inputs), outputs=[], content_digest="0")


def spec_for(path, **golden):
    return make_spec("m", golden={"source": "file", "path": str(path), **golden})


def test_npz_is_streamed_in_batches_and_cut_at_rows(tmp_path):
    x = np.arange(1000 * 3, dtype=np.float64).reshape(1000, 3)
    np.savez(tmp_path / "g.npz", input=x)
    batches = list(iter_golden(spec_for(tmp_path / "g.npz", rows=700, batch_rows=256), intake_with(TensorSpec("input", "FP32", (3,)))))

    assert [len(b["input"]) for b in batches] == [256, 256, 188]
    assert all(b["input"].dtype == np.float32 for b in batches)
    np.testing.assert_array_equal(np.concatenate([b["input"] for b in batches]), x[:700].astype(np.float32))


def test_a_fortran_ordered_array_from_a_dataframe_reads_the_same_rows_in_batches(tmp_path, monkeypatch):
    """``DataFrame.to_numpy()`` is column-major: its rows read as the C-ordered array's, batch by batch."""
    import pandas as pd

    from model_release.model import golden

    frame = pd.DataFrame(np.arange(600 * 4, dtype=np.float32).reshape(600, 4), columns=list("abcd"))
    fortran = frame.to_numpy(np.float32)
    assert fortran.flags.f_contiguous and not fortran.flags.c_contiguous  # what a user's golden file holds
    np.savez(tmp_path / "g.npz", input=fortran, label=np.arange(600) % 3)
    batches = list(iter_npz(tmp_path / "g.npz", 256))
    assert [len(b["input"]) for b in batches] == [256, 256, 88]
    np.testing.assert_array_equal(np.concatenate([b["input"] for b in batches]), frame.to_numpy())
    np.testing.assert_array_equal(np.concatenate([b["label"] for b in batches]), np.arange(600) % 3)
    monkeypatch.setattr(golden, "MAX_FORTRAN_BYTES", fortran.nbytes - 1)  # just too big to read whole
    with pytest.raises(SpecError, match='array "input" is Fortran-ordered and .*NAME=numpy.ascontiguousarray'):
        list(iter_npz(tmp_path / "g.npz", 256))
    monkeypatch.setattr(golden, "MAX_FORTRAN_BYTES", fortran.nbytes)  # just small enough
    assert sum(len(b["input"]) for b in iter_npz(tmp_path / "g.npz", 256)) == 600


def test_npz_found_by_source_name_and_int_widened_to_float(tmp_path):
    np.savez(tmp_path / "g.npz", **{"petal length": np.arange(5), "other": np.zeros(5)})
    spec = TensorSpec("petal_length", "FP64", (1,), source_name="petal length")
    (batch,) = iter_golden(spec_for(tmp_path / "g.npz"), intake_with(spec))
    assert batch["petal_length"].shape == (5, 1) and batch["petal_length"].dtype == np.float64


def test_parquet_named_columns_and_stacked_features(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"a b": np.arange(10.0), "colour": list("rgbrgbrgbr")})
    frame.to_parquet(tmp_path / "cols.parquet")
    specs = [TensorSpec("a_b", "FP64", (1,), source_name="a b"), TensorSpec("colour", "BYTES", (1,))]
    batches = list(iter_golden(spec_for(tmp_path / "cols.parquet", batch_rows=4), intake_with(*specs)))
    assert [len(b["a_b"]) for b in batches] == [4, 4, 2]
    assert batches[0]["colour"][:, 0].tolist() == ["r", "g", "b", "r"]

    pd.DataFrame({f"f{i}": np.arange(6.0) + i for i in range(4)}).to_parquet(tmp_path / "feat.parquet")
    (batch,) = iter_golden(spec_for(tmp_path / "feat.parquet"), intake_with(TensorSpec("input", "FP32", (4,))))
    np.testing.assert_array_equal(batch["input"][2], [2, 3, 4, 5])


@pytest.mark.parametrize(("columns", "spec", "message"), [
    ({"input": np.zeros((4, 5))}, TensorSpec("input", "FP32", (4,)),
     'column "input" has dims [5] per row, expected FP32 with dims [4] from the model\'s signature'),
    ({"input": np.zeros((4, 4), dtype=np.float32)}, TensorSpec("input", "INT64", (4,)),
     'column "input" has dtype float32 (floating point), expected INT64 with dims [4]'),
    ({"x": np.zeros((4, 4)), "y": np.zeros(4)}, TensorSpec("input", "FP32", (4,)),
     "no column \"input\" (expected FP32 with dims [4] from the model's signature); it has ['x', 'y']"),
    ({"input": np.array([["a"]] * 4)}, TensorSpec("input", "FP64", (1,)),
     'column "input" has dtype <U1 (string), expected FP64 with dims [1]'),
])
def test_golden_set_disagreeing_with_the_signature_is_refused(tmp_path, columns, spec, message):
    np.savez(tmp_path / "g.npz", **columns)
    with pytest.raises(SpecError) as err:
        list(iter_golden(spec_for(tmp_path / "g.npz"), intake_with(spec)))
    assert message in str(err.value) and str(tmp_path / "g.npz") in str(err.value)


def test_missing_file_and_object_arrays_are_refused(tmp_path):
    with pytest.raises(SpecError, match="golden.path .* does not exist"):
        list(iter_golden(spec_for(tmp_path / "nope.npz"), intake_with(TensorSpec("input", "FP32", (1,)))))
    np.savez(tmp_path / "obj.npz", input=np.array([{"a": 1}] * 3, dtype=object))
    with pytest.raises(SpecError, match='array "input" is an object array'):
        list(iter_npz(tmp_path / "obj.npz", 2))


def test_npz_writer_round_trips_through_np_load_and_iter_npz(tmp_path):
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(n, 2, 3)).astype(np.float32) for n in (5, 7, 1)]
    labels = [np.array(["a", "bb", "c", "d", "e"]), np.array(["ffff"] * 7), np.array(["g"])]
    with NpzWriter(tmp_path / "w.npz") as w:
        for p, lab in zip(parts, labels):
            w.append({"x": p, "label": lab, "i": np.arange(len(p))})
    with np.load(tmp_path / "w.npz", allow_pickle=False) as data:
        np.testing.assert_array_equal(data["x"], np.concatenate(parts))
        assert data["label"].tolist() == [s for lab in labels for s in lab]
        assert data["i"].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6, 0]
    again = list(iter_npz(tmp_path / "w.npz", 4))
    assert [len(b["x"]) for b in again] == [4, 4, 4, 1]
    np.testing.assert_array_equal(np.concatenate([b["x"] for b in again]), np.concatenate(parts))
    assert not list(tmp_path.glob(".npz-*")), "spill files are removed"
