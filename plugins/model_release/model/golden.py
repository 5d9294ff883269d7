"""The golden set: the inputs every gate replays, checked against the model's signature.

It comes from a file named in the spec (``.npz`` or ``.parquet``) or from the input example logged
with the model. It is read in batches of ``golden.batch_rows`` and cut at ``golden.rows`` rows, so
memory follows the batch size, not the file's size. Every batch is checked against the intake's
tensor specs (names, dims, dtypes) and cast to the signature's dtype; a column that disagrees is
refused with its name, what was expected and what was found.

:class:`NpzWriter` and :func:`iter_npz` write and read ``.npz`` files in batches too (plain
``np.load`` reads what the writer writes).
"""

from __future__ import annotations

import math
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .dtypes import numpy_from_triton
from ..errors import IntakeError, SpecError
from ..spec import ReleaseSpec
from ..types import IntakeResult, TensorSpec

Batch = dict[str, np.ndarray]

#: a golden.slices column's array in truth.npz is named this prefix and the column's name
SLICE_PREFIX = "slice."
#: a golden.slices column of more distinct values than this is refused: it names no slices but rows
#: (an id, a timestamp), and each value's gates would share the confidence with all the others
MAX_SLICE_VALUES = 100


def golden_origin(spec: ReleaseSpec) -> str:
    """Where the golden set comes from, for messages: a path or ``the logged input example``."""
    if spec.golden.source == "file" and spec.golden.path:
        return str(spec.resolve_path(spec.golden.path))
    return "the logged input example"


def iter_golden(spec: ReleaseSpec, intake: IntakeResult, *, batch_rows: int | None = None) -> Iterator[Batch]:
    """Yield the golden set in batches keyed by the intake's (Triton) input names.

    Args:
        spec: the release spec (``golden.source``, ``path``, ``rows``, ``batch_rows``).
        intake: the intake result whose ``inputs`` the batches must match.
        batch_rows: overrides ``spec.golden.batch_rows``.

    Yields:
        ``{input name: array}`` with the signature's dtype and dims, at most ``batch_rows`` rows.

    Raises:
        SpecError: the golden file is missing, unreadable, or disagrees with the signature.
        IntakeError: the model has no input example, or it disagrees with the signature.
    """
    origin = golden_origin(spec)
    error: type[SpecError] | type[IntakeError] = SpecError if spec.golden.source == "file" else IntakeError
    produced = 0
    for batch in _raw_batches(spec, intake, batch_rows or spec.golden.batch_rows):
        conformed = conform(_inputs_of(batch, spec, intake), intake.inputs, origin=origin, error=error)
        if not spec.golden.allow_nonfinite_inputs:
            _refuse_nonfinite(conformed, produced, origin, spec, error)
        yield conformed
        produced += len(next(iter(batch.values()))) if batch else 0
    if produced == 0:
        raise error(f"golden set {origin} has no rows; give at least one row of model inputs")


def _inputs_of(batch: Batch, spec: ReleaseSpec, intake: IntakeResult) -> Batch:
    """The batch's columns that may be inputs: not the target, not a slice column (unless an input has its name)."""
    names = {n for s in intake.inputs for n in (s.name, s.original_name)}
    other = {spec.golden.target, *spec.golden.slices} - names
    return {k: v for k, v in batch.items() if k not in other}


def check_golden(spec: ReleaseSpec, intake: IntakeResult) -> int:
    """Read the whole golden set once, before anything is converted; return its row count.

    Checks every batch against the signature, the inputs for NaN/Inf, the target column when the
    spec names one, and that there are at least ``golden.min_rows`` rows.

    Raises:
        SpecError, IntakeError: as :func:`iter_golden` and :func:`iter_targets`, or too few rows.
    """
    rows = sum(len(next(iter(batch.values()))) for batch in iter_golden(spec, intake))
    if rows < spec.golden.min_rows:
        raise SpecError(
            f"golden set {golden_origin(spec)} has {rows} rows, fewer than golden.min_rows {spec.golden.min_rows}: "
            f"too few to judge a model. Supply more rows (a larger golden file, or a larger logged input example; "
            f"golden.rows is {spec.golden.rows}), or lower golden.min_rows in {spec.where} (the report records it)"
        )
    if spec.golden.target is not None:
        for _ in iter_targets(spec, intake):
            pass
    if spec.golden.slices:
        slice_values(spec, intake)
    return rows


def write_truth(spec: ReleaseSpec, intake: IntakeResult, path: Path) -> int:
    """Write the ground truth as ``path``, an .npz: ``target``, and ``slice.<column>`` (text) per golden.slices column.

    Returns:
        its rows.
    """
    slices = {SLICE_PREFIX + c: v for c, v in slice_values(spec, intake).items()}
    with NpzWriter(path) as writer:
        start = 0
        for values in iter_targets(spec, intake):
            writer.append({"target": values, **{k: v[start:start + len(values)] for k, v in slices.items()}})
            start += len(values)
    return writer.rows


def slice_values(spec: ReleaseSpec, intake: IntakeResult) -> dict[str, np.ndarray]:
    """Each ``golden.slices`` column's value on every golden row, as text.

    Raises:
        SpecError: the file has no such column, it is not one value per row, it holds floating-point
            numbers (no categories), or more than :data:`MAX_SLICE_VALUES` distinct values.
    """
    if not spec.golden.slices:
        return {}
    origin = golden_origin(spec)
    parts: dict[str, list[np.ndarray]] = {c: [] for c in spec.golden.slices}
    for batch in _raw_batches(spec, intake, spec.golden.batch_rows):
        for column in spec.golden.slices:
            parts[column].append(_slice_batch(batch, column, origin, spec))
    out = {c: np.concatenate(p) if p else np.empty(0, dtype=str) for c, p in parts.items()}
    for column, values in out.items():
        distinct = len(np.unique(values))
        if distinct > MAX_SLICE_VALUES:
            raise SpecError(
                f"golden set {origin}: slice column {column!r} (golden.slices in {spec.where}) has {distinct} distinct "
                f"values, more than {MAX_SLICE_VALUES}: a slice column names categories (a region, a device), not rows; "
                "name a coarser column"
            )
    return out


def _slice_batch(batch: Batch, column: str, origin: str, spec: ReleaseSpec) -> np.ndarray:
    """One batch of a slice column as text, checked."""
    if column not in batch:
        raise SpecError(f"golden set {origin} has no slice column {column!r} (golden.slices in {spec.where}); "
                        f"its columns: {sorted(batch)}")
    values = np.asarray(batch[column])
    if values.ndim > 1 and values.shape[1:] == (1,):
        values = values.reshape(-1)
    if values.ndim != 1 or values.dtype.kind not in "biuUSO":
        what = f"dtype {values.dtype}" if values.ndim == 1 else f"{list(values.shape[1:])} values per row"
        raise SpecError(f"golden set {origin}: slice column {column!r} has {what}; a slice column holds one "
                        "category per row: strings, integers or booleans")
    return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values.tolist()], dtype=str)


def _refuse_nonfinite(batch: Batch, offset: int, origin: str, spec: ReleaseSpec, error: type[Exception]) -> None:
    """NaN or infinite golden inputs are refused (the rule), unless the spec says the model takes them."""
    for name, arr in batch.items():
        if arr.dtype.kind != "f":
            continue
        bad = np.flatnonzero(~np.isfinite(arr).reshape(len(arr), -1).all(axis=1))
        if bad.size:
            raise error(
                f'golden set {origin}: input "{name}" is NaN or infinite on {bad.size} row(s) of this batch, first '
                f"{(bad + offset)[:10].tolist()}; golden inputs must be finite, so that every gate compares numbers. "
                f"Clean those rows, or set golden.allow_nonfinite_inputs: true in {spec.where} for a model that takes "
                "missing values (tree ensembles do)"
            )


def _raw_batches(spec: ReleaseSpec, intake: IntakeResult, size: int) -> Iterator[Batch]:
    """The golden set's columns as stored (the target column included), at most ``golden.rows`` rows."""
    limit = spec.golden.rows
    if spec.golden.source == "file":
        path = golden_file(spec)
        if path.suffix == ".parquet":
            inputs = {n for s in intake.inputs for n in (s.name, s.original_name)}
            return _iter_parquet(path, size, limit, intake.inputs,
                                 exclude=({spec.golden.target} - {None}) | (set(spec.golden.slices) - inputs))
        return iter_npz(path, size, limit=limit)
    return _iter_example(intake, size, limit)


def golden_file(spec: ReleaseSpec) -> Path:
    """The golden file the spec names.

    Raises:
        SpecError: it does not exist.
    """
    path = spec.resolve_path(spec.golden.path or "")
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise SpecError(f"golden.path {str(path)!r} {what}; name an .npz or .parquet file of model inputs")
    return path


def check_golden_file(spec: ReleaseSpec) -> Path:
    """The golden file exists and reads as what its name says, checked before any stage runs.

    Only what needs no model: an ``.npz`` file is a zip of ``.npy`` arrays whose headers are
    readable, whose data is as long as their headers say and whose row counts agree; a
    ``.parquet`` file has a readable footer. The columns are checked against the model's
    signature at export (:func:`check_golden`), once the signature is known.

    Raises:
        SpecError: it is missing or not what its name says (the message names the file and why).
    """
    path = golden_file(spec)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            pq.ParquetFile(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds
            raise SpecError(f"golden.path {str(path)!r} is not a readable parquet file ({exc})") from None
        return path
    with _open_npz(path) as (_, readers):
        _row_count(path, readers)
    return path


def iter_targets(spec: ReleaseSpec, intake: IntakeResult, *, batch_rows: int | None = None) -> Iterator[np.ndarray]:
    """The ground-truth column (``golden.target``), batch by batch, row for row with :func:`iter_golden`.

    Raises:
        SpecError: the spec names no target, the file has no such column, it is not one value per
            row, or a numeric target is NaN or infinite.
    """
    target = spec.golden.target
    if target is None:
        raise SpecError("golden.target is not set; name the golden file's ground-truth column")
    origin = golden_origin(spec)
    start = 0
    for batch in _raw_batches(spec, intake, batch_rows or spec.golden.batch_rows):
        if target not in batch:
            raise SpecError(
                f"golden set {origin} has no target column {target!r} (golden.target in {spec.where}); "
                f"its columns: {sorted(batch)}"
            )
        values = np.asarray(batch[target])
        if values.ndim > 1 and values.shape[1:] == (1,):
            values = values.reshape(-1)
        if values.dtype.kind == "f":
            bad = np.flatnonzero(~np.isfinite(values).reshape(len(values), -1).all(axis=1))
            if bad.size:
                raise SpecError(
                    f"golden set {origin}: target column {target!r} is NaN or infinite on rows "
                    f"{(bad + start)[:10].tolist()}{' ...' if bad.size > 10 else ''}; ground truth must be a value"
                )
        if values.dtype.kind not in "biufUSO":
            raise SpecError(f"golden set {origin}: target column {target!r} has dtype {values.dtype}; use numbers or strings")
        start += len(values)
        yield values


def conform(columns: Mapping[str, np.ndarray], specs: list[TensorSpec], *, origin: str, error: type[Exception] = SpecError) -> Batch:
    """Check one batch against the tensor specs and cast it to their dtypes.

    A column is found by its Triton name or its name in the signature. A ``[N]`` column fills a
    ``[1]`` input. Integers widen to floats and floats narrow to floats of another width; any other
    change of kind (strings for numbers, floats for integers) is refused.
    """
    out: Batch = {}
    rows: int | None = None
    for spec in specs:
        arr = columns.get(spec.name)
        if arr is None and spec.original_name in columns:
            arr = columns[spec.original_name]
        if arr is None and len(specs) == 1 and len(columns) == 1:
            arr = next(iter(columns.values()))
        want = f"{spec.datatype} with dims {list(spec.dims)}"
        if arr is None:
            raise error(
                f'golden set {origin}: no column "{spec.original_name}" (expected {want} from the model\'s signature); '
                f"it has {sorted(columns)}"
            )
        arr = np.asarray(arr)
        if arr.ndim == len(spec.dims) and spec.dims == (1,):
            arr = arr.reshape(-1, 1)
        got_dims = tuple(arr.shape[1:])
        if len(got_dims) != len(spec.dims) or any(w not in (-1, g) for w, g in zip(spec.dims, got_dims)):
            raise error(
                f'golden set {origin}: column "{spec.original_name}" has dims {list(got_dims)} per row, expected {want} '
                "from the model's signature; fix the golden set or log the model with a matching signature"
            )
        out[spec.name] = _cast(arr, spec, origin, want, error)
        if rows is not None and arr.shape[0] != rows:
            raise error(f'golden set {origin}: column "{spec.original_name}" has {arr.shape[0]} rows where others have {rows}')
        rows = arr.shape[0]
    return out


def _cast(arr: np.ndarray, spec: TensorSpec, origin: str, want: str, error: type[Exception]) -> np.ndarray:
    if spec.datatype == "BYTES":
        if arr.dtype.kind in "USO":
            return arr.astype(object) if arr.dtype.kind != "O" else arr
    else:
        target = numpy_from_triton(spec.datatype)
        kind, tkind = arr.dtype.kind, target.kind
        # same dtype, ints (or bools) to ints or floats, floats to floats of another width
        if arr.dtype == target or (kind in "biu" and tkind in "iuf") or (kind == "f" and tkind == "f"):
            return arr.astype(target, copy=False)
    raise error(
        f'golden set {origin}: column "{spec.original_name}" has dtype {arr.dtype} ({_kind_name(arr.dtype)}), expected {want} '
        "from the model's signature; cast the column in the golden set"
    )


def _kind_name(dtype: np.dtype) -> str:
    return {"f": "floating point", "i": "integer", "u": "unsigned integer", "b": "boolean", "U": "string", "S": "bytes", "O": "object"}.get(
        dtype.kind, dtype.kind
    )


def _iter_example(intake: IntakeResult, size: int, limit: int) -> Iterator[Batch]:
    from .mlmodel import read_mlmodel

    try:
        example = _plain_ndarray_example(intake.model_dir)
        if example is None:
            example = read_mlmodel(intake.model_dir).load_input_example(intake.model_dir)
    except Exception as exc:  # noqa: BLE001 - MLflow raises several kinds here
        raise IntakeError(f'model "{intake.model_name}" version {intake.version}: its input example could not be read ({exc})') from exc
    if example is None:
        raise IntakeError(
            f'model "{intake.model_name}" version {intake.version} has no logged input example to use as the golden set; '
            "log it with input_example=X[:100] or set golden.source: file with golden.path (an .npz or .parquet file)"
        )
    columns = _columns_of(example, intake.inputs)
    n = min(len(next(iter(columns.values()))), limit)
    for start in range(0, n, size):
        yield {k: v[start : min(start + size, n)] for k, v in columns.items()}


def _plain_ndarray_example(model_dir: str) -> np.ndarray | None:
    """A single-tensor example saved as a plain JSON list, read without MLflow (no import, no per-row copies).

    Returns None for every other layout (MLflow's own loader reads those).
    """
    import json

    from .mlmodel import input_example_info

    info = input_example_info((Path(model_dir) / "MLmodel").read_bytes())
    if info.get("type") != "ndarray" or not info.get("artifact_path"):
        return None
    with open(Path(model_dir) / info["artifact_path"]) as f:
        data = json.load(f)
    if not isinstance(data, list):
        return None
    arr = np.asarray(data)
    return arr if arr.dtype.kind in "biuf" else None


def _columns_of(example: Any, specs: list[TensorSpec]) -> dict[str, np.ndarray]:
    import pandas as pd

    if isinstance(example, pd.DataFrame):
        return {str(c): example[c].to_numpy() for c in example.columns}
    if isinstance(example, dict):
        return {str(k): np.asarray(v) for k, v in example.items()}
    if isinstance(example, list | tuple) and len(example) == len(specs):
        return {s.name: np.asarray(v) for s, v in zip(specs, example)}
    return {specs[0].name: np.asarray(example)}


def _iter_parquet(path: Path, size: int, limit: int, specs: list[TensorSpec], exclude: set[str] | frozenset[str] = frozenset()) -> Iterator[Batch]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds
        raise SpecError(f"golden.path {str(path)!r} is not a readable parquet file ({exc})") from exc
    names = pf.schema_arrow.names
    features = [n for n in names if n not in exclude]
    # one tensor input with F features may come as F scalar columns (the target column aside)
    stack = len(specs) == 1 and specs[0].name not in names and specs[0].original_name not in names and len(features) > 1
    produced = 0
    for record in pf.iter_batches(batch_size=size):
        if produced >= limit:
            break
        take = min(record.num_rows, limit - produced)
        cols = {n: _arrow_column(record.column(n).slice(0, take)) for n in names}
        if stack:
            cols = {specs[0].name: np.stack([cols[n] for n in features], axis=1), **{n: cols[n] for n in exclude if n in cols}}
        produced += take
        yield cols


def _arrow_column(col: Any) -> np.ndarray:
    import pyarrow as pa

    if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type) or pa.types.is_large_list(col.type):
        return np.stack([np.asarray(v) for v in col.to_pylist()]) if len(col) else np.empty((0,))
    return col.to_numpy(zero_copy_only=False)


def iter_npz(path: str | Path, batch_rows: int, *, limit: int | None = None) -> Iterator[Batch]:
    """Read an ``.npz`` file's arrays together, ``batch_rows`` rows at a time, without loading them whole.

    Arrays must share their first dimension. Object arrays are refused (they need pickle); save
    strings as fixed-width unicode (``arr.astype(str)``).
    """
    with _open_npz(path) as (_, readers):
        total = _row_count(path, readers)
        if limit is not None:
            total = min(total, limit)
        for start in range(0, total, batch_rows):
            n = min(batch_rows, total - start)
            yield {name: r.read(n) for name, r in readers.items()}


class _open_npz:  # noqa: N801 - used as a function: ``with _open_npz(path) as (zf, readers)``
    """The zip file and a reader per ``.npy`` array in it (header checked against its data's length)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)

    def __enter__(self) -> tuple[zipfile.ZipFile, dict[str, _NpyReader]]:
        try:
            self.zf = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise SpecError(f"golden.path {self.path!r} is not a readable .npz file ({exc}); "
                            "write it with numpy.savez") from None
        try:
            readers = {}
            for info in self.zf.infolist():
                if info.filename.endswith(".npy"):
                    readers[info.filename[:-4]] = _NpyReader(self.zf, info, self.path)
        except BaseException:
            self.zf.close()
            raise
        if not readers:
            self.zf.close()
            raise SpecError(f"golden.path {self.path!r} holds no arrays; write it with numpy.savez(path, input=X)")
        return self.zf, readers

    def __exit__(self, *_: Any) -> None:
        self.zf.close()


def _row_count(path: str | Path, readers: dict[str, _NpyReader]) -> int:
    counts = {name: r.rows for name, r in readers.items()}
    if len(set(counts.values())) > 1:
        raise SpecError(
            f"golden set {path}: its arrays have different row counts {counts}; every array holds one row per "
            "example, so they must have the same length (nothing is cut to the shortest)"
        )
    return next(iter(counts.values()))


#: the largest Fortran-ordered (column-major) golden array read whole instead of streamed: a DataFrame's
#: ``to_numpy()`` of tabular rows is far below it; image or token tensors are written C-ordered by numpy
MAX_FORTRAN_BYTES = 256 << 20


class _NpyReader:
    """One ``.npy`` member of an ``.npz`` file, read a batch of rows at a time."""

    def __init__(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> None:
        name = info.filename[:-4]
        self.fp = zf.open(info)
        try:
            version = np.lib.format.read_magic(self.fp)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = reader(self.fp)
        except (ValueError, OSError, EOFError, SyntaxError, zipfile.BadZipFile) as exc:
            raise SpecError(f'golden set {path}: array "{name}" is not a readable .npy array ({exc}); '
                            "write the file with numpy.savez") from None
        if dtype.hasobject:
            raise SpecError(
                f'golden set {path}: array "{name}" is an object array; save it as an array of numbers or '
                "fixed-width strings (arr.astype(str))"
            )
        if not shape:
            raise SpecError(f'golden set {path}: array "{name}" is a scalar; give one row per example')
        if dtype.itemsize == 0:
            raise SpecError(f'golden set {path}: array "{name}" has dtype {dtype}, whose items hold no bytes')
        self.rows, self.row_shape, self.dtype = shape[0], tuple(shape[1:]), dtype
        self.row_bytes = math.prod(self.row_shape) * dtype.itemsize
        held = info.file_size - self.fp.tell()
        if held != self.rows * self.row_bytes:
            raise SpecError(
                f'golden set {path}: array "{name}" has a header saying {list(shape)} of {dtype} '
                f"({self.rows * self.row_bytes} bytes of data) but holds {held} bytes; the file is truncated or "
                "its header was altered: write it again with numpy.savez"
            )
        self.whole: np.ndarray | None = None
        self.at = 0
        if fortran:  # column-major (pandas' DataFrame.to_numpy() gives one): rows are not contiguous, so read it whole
            if held > MAX_FORTRAN_BYTES:
                raise SpecError(
                    f'golden set {path}: array "{name}" is Fortran-ordered and {held / 2**20:.1f} MiB, above the '
                    f"{MAX_FORTRAN_BYTES / 2**20:.1f} MiB read whole (its rows are not contiguous, so it cannot be streamed); "
                    "save it C-ordered: numpy.savez(path, NAME=numpy.ascontiguousarray(arr))"
                )
            data = np.frombuffer(self.fp.read(held), dtype=dtype).reshape(shape, order="F")
            self.whole = np.ascontiguousarray(data)

    def read(self, n: int) -> np.ndarray:
        if self.whole is not None:
            self.at += n
            return self.whole[self.at - n:self.at].copy()
        data = self.fp.read(n * self.row_bytes)
        return np.frombuffer(data, dtype=self.dtype).reshape((n, *self.row_shape)).copy()


class NpzWriter:
    """Write arrays to an ``.npz`` file batch by batch; memory stays at one batch.

    Numeric batches go to a spill file per array; strings (labels, small) are kept in memory and
    written as fixed-width unicode. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.rows = 0
        self._tmp = Path(tempfile.mkdtemp(prefix=".npz-", dir=self.path.parent))
        self._spill: dict[str, tuple[Any, np.dtype, tuple[int, ...], int]] = {}
        self._strings: dict[str, list[np.ndarray]] = {}

    def append(self, arrays: Mapping[str, np.ndarray]) -> None:
        for name, arr in arrays.items():
            arr = np.asarray(arr)
            if arr.dtype.kind in "USO":
                self._strings.setdefault(name, []).append(arr.astype(str))
                continue
            arr = np.ascontiguousarray(arr)
            entry = self._spill.get(name)
            if entry is None:
                entry = (open(self._tmp / f"{len(self._spill)}.bin", "wb"), arr.dtype, arr.shape[1:], 0)
            fh, dtype, row_shape, rows = entry
            if arr.dtype != dtype or arr.shape[1:] != row_shape:
                raise ValueError(f"array {name!r}: batch of {arr.dtype}{arr.shape[1:]} after {dtype}{row_shape}")
            fh.write(arr.tobytes())
            self._spill[name] = (fh, dtype, row_shape, rows + arr.shape[0])
        if arrays:
            self.rows += len(next(iter(arrays.values())))

    def close(self) -> Path:
        """Write the ``.npz`` file (atomically) and remove the spill files."""
        part = self.path.with_name(f".{self.path.name}.part")
        try:
            with zipfile.ZipFile(part, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for name, (fh, dtype, row_shape, rows) in self._spill.items():
                    fh.close()
                    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (rows, *row_shape)}
                    with zf.open(f"{name}.npy", "w", force_zip64=True) as out, open(fh.name, "rb") as src:
                        np.lib.format.write_array_header_2_0(out, header)
                        shutil.copyfileobj(src, out, 1 << 20)
                for name, parts in self._strings.items():
                    with zf.open(f"{name}.npy", "w", force_zip64=True) as out:
                        np.lib.format.write_array(out, np.concatenate(parts), allow_pickle=False)
            part.replace(self.path)
        finally:
            part.unlink(missing_ok=True)
            shutil.rmtree(self._tmp, ignore_errors=True)
        return self.path

    def discard(self) -> None:
        """Drop what was written (nothing lands at ``path``)."""
        for fh, *_ in self._spill.values():
            fh.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> NpzWriter:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()
