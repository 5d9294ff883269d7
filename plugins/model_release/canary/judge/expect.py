"""An expectation suite over the canary's outputs, in great-expectations' terms, and two ways to run it.

For a classifier: no nulls, every probability in [0, 1], each row's probabilities summing to 1
within :data:`ROW_SUM_TOLERANCE`, every label in the label set. For other shapes: no nulls in any
numeric output.

The suite is data (:func:`suite_for`): great-expectations' expectation types and kwargs, written
into the report as great-expectations writes a suite, so it reads and re-runs as one. It is run by
one of two engines, chosen by ``canary.expectations_engine``:

- ``native`` (the default): the three expectation types with great-expectations' semantics for a
  pandas batch, evaluated with numpy. Nulls (``None``, NaN) fail ``not_be_null`` and are left out
  of ``be_between`` and ``be_in_set`` (great-expectations' map expectations ignore them); bounds are
  inclusive; ``element_count`` counts every row; the unexpected values are listed in row order.
  ``tests/canary/test_expectations_parity.py`` runs both engines on the same outputs and requires
  the same results.
- ``great_expectations``: the same suite in an ephemeral great-expectations context. Importing
  great-expectations costs seconds of CPU in every process that releases (the CLI, each Airflow
  task), which is why it is not the default.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...model.roles import LABEL, PROBABILITIES

#: how far a row of class probabilities may sum from 1 (float32 softmax rounding is ~1e-7 per class)
ROW_SUM_TOLERANCE = 1e-4
#: at most this many element columns per output go into the frame
MAX_COLUMNS_PER_OUTPUT = 64
#: the suite's name, in the report and in great-expectations
SUITE_NAME = "canary-outputs"
#: how many unexpected values a result keeps (great-expectations' SUMMARY format keeps 20; the report shows 5)
EXAMPLES = 5
#: great-expectations' SUMMARY result format: the first this many unexpected values
_PARTIAL = 20

NOT_NULL = "expect_column_values_to_not_be_null"
BETWEEN = "expect_column_values_to_be_between"
IN_SET = "expect_column_values_to_be_in_set"
#: the engines ``canary.expectations_engine`` names
ENGINES = ("native", "great_expectations")


def output_columns(outputs: Mapping[str, np.ndarray], *, classifier: bool) -> dict[str, np.ndarray]:
    """Flatten outputs into one column per element (``name[i]``), plus derived classifier columns.

    Numeric columns are float64 arrays; a string output's first element per row is an object array
    of ``str`` (``None`` where the value is None).
    """
    columns: dict[str, np.ndarray] = {}
    for name, array in outputs.items():
        a = np.asarray(array)
        flat = a.reshape(a.shape[0], int(np.prod(a.shape[1:]))) if a.ndim > 1 else a.reshape(-1, 1)
        if flat.dtype.kind in "SO":
            values = [v.decode() if isinstance(v, bytes) else (None if v is None else str(v)) for v in flat[:, 0]]
            columns[name] = np.array(values, dtype=object)
            continue
        if flat.dtype.kind not in "fiub":
            continue
        for i in range(min(flat.shape[1], MAX_COLUMNS_PER_OUTPUT)):
            columns[f"{name}[{i}]" if flat.shape[1] > 1 or a.ndim > 1 else name] = flat[:, i].astype(np.float64)
        if classifier and name == PROBABILITIES:
            columns["probabilities_row_sum"] = flat.astype(np.float64).sum(axis=1)
    return columns


def suite_for(columns: list[str], *, classifier: bool, label_set: list[str] | None) -> list[dict[str, Any]]:
    """The expectations over these columns: ``{"type", "kwargs"}`` each, as great-expectations names them."""
    suite: list[dict[str, Any]] = []
    for column in columns:  # grouped by column, in the order great-expectations reports its results
        suite.append({"type": NOT_NULL, "kwargs": {"column": column}})
        if not classifier:
            continue
        if column.startswith("probabilities["):
            suite.append({"type": BETWEEN, "kwargs": {"column": column, "min_value": 0.0, "max_value": 1.0}})
        elif column == "probabilities_row_sum":
            suite.append({"type": BETWEEN, "kwargs": {"column": column, "min_value": 1.0 - ROW_SUM_TOLERANCE,
                                                      "max_value": 1.0 + ROW_SUM_TOLERANCE}})
        elif column == LABEL and label_set:
            suite.append({"type": IN_SET, "kwargs": {"column": column, "value_set": list(label_set)}})
    return suite


def suite_document(suite: list[dict[str, Any]]) -> dict[str, Any]:
    """The suite as great-expectations serialises an ExpectationSuite (``name``, ``expectations``, ``meta``)."""
    return {"name": SUITE_NAME, "expectations": [{"type": e["type"], "kwargs": dict(e["kwargs"])} for e in suite],
            "meta": {"written_by": "model-release canary"}}


def run_expectations(
    outputs: Mapping[str, np.ndarray], *, classifier: bool, label_set: list[str] | None, engine: str = "native"
) -> dict[str, Any]:
    """Validate the outputs; return ``{"passed", "results": [...], "seconds", "engine", "suite"}``.

    Each result names the expectation, its column, whether it passed, how many rows failed and a few
    of the failing values. ``engine`` is one of :data:`ENGINES`.
    """
    if engine not in ENGINES:
        raise ValueError(f"expectations engine {engine!r} is not one of {', '.join(ENGINES)}; "
                         "set canary.expectations_engine to one of them")
    t0 = time.perf_counter()
    columns = output_columns(outputs, classifier=classifier)
    suite = suite_for(list(columns), classifier=classifier, label_set=label_set)
    if engine == "native":
        results, version = [_native(columns, e) for e in suite], "native (great_expectations semantics)"
    else:
        results, version = _with_great_expectations(columns, suite)
    return {
        "passed": all(r["success"] for r in results),
        "results": results,
        "seconds": round(time.perf_counter() - t0, 3),
        "engine": version,
        "suite": suite_document(suite),
    }


def failures(expectations: Mapping[str, Any]) -> list[str]:
    """One sentence per failed expectation."""
    out = []
    for r in expectations.get("results", []):
        if not r["success"]:
            out.append(
                f"expectation {r['expectation']} on column {r['column']!r} {r['kwargs'] or ''} failed on "
                f"{r['unexpected_count']} of {r['rows']} rows (e.g. {r['unexpected_examples']})"
            )
    return out


def _nulls(values: np.ndarray) -> np.ndarray:
    """Where pandas' ``isnull`` is true: NaN in a float column; None or a float NaN in an object column."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    return np.array([v is None or (isinstance(v, float) and v != v) for v in values], dtype=bool)


def _native(columns: Mapping[str, np.ndarray], expectation: Mapping[str, Any]) -> dict[str, Any]:
    kwargs = dict(expectation["kwargs"])
    values = columns[kwargs["column"]]
    nulls = _nulls(values)
    kind = expectation["type"]
    if kind == NOT_NULL:
        unexpected = nulls
    else:
        present = values[~nulls]
        if kind == BETWEEN:
            inside = (present >= kwargs["min_value"]) & (present <= kwargs["max_value"])
        elif kind == IN_SET:
            allowed = set(kwargs["value_set"])
            inside = np.array([v in allowed for v in present], dtype=bool)
        else:
            raise ValueError(f"the native engine has no expectation {kind!r}; valid: {NOT_NULL}, {BETWEEN}, {IN_SET}")
        unexpected = np.zeros(len(values), dtype=bool)
        unexpected[np.flatnonzero(~nulls)[~inside]] = True
    count = int(unexpected.sum())
    # great-expectations lists a null as NaN, whether the column held None or NaN
    examples = [np.nan if null else v for v, null in zip(values[unexpected][:_PARTIAL], nulls[unexpected][:_PARTIAL])]
    return _result(kind, kwargs, count == 0, len(values), count, examples)


def _result(kind: str, kwargs: dict[str, Any], success: bool, rows: Any, unexpected_count: Any,
            unexpected: list[Any]) -> dict[str, Any]:
    column = kwargs.pop("column", None)
    return {
        "expectation": kind,
        "column": column,
        "kwargs": kwargs,
        "success": bool(success),
        "rows": rows,
        "unexpected_count": unexpected_count,
        "unexpected_examples": [_plain(v) for v in unexpected[:EXAMPLES]],
    }


def _with_great_expectations(columns: Mapping[str, np.ndarray], suite: list[dict[str, Any]]) -> tuple[list[dict], str]:
    """Run ``suite`` in an ephemeral great-expectations context over a pandas frame of ``columns``."""
    import great_expectations as gx
    import pandas as pd

    context = gx.get_context(mode="ephemeral")
    _quiet(context)
    asset = context.data_sources.add_pandas("canary").add_dataframe_asset("outputs")
    frame = pd.DataFrame(dict(columns))
    batch = asset.add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": frame})
    classes = {NOT_NULL: gx.expectations.ExpectColumnValuesToNotBeNull, BETWEEN: gx.expectations.ExpectColumnValuesToBeBetween,
               IN_SET: gx.expectations.ExpectColumnValuesToBeInSet}
    gx_suite = gx.ExpectationSuite(name=SUITE_NAME)
    for e in suite:
        gx_suite.add_expectation(classes[e["type"]](**e["kwargs"]))
    validation = batch.validate(gx_suite, result_format="SUMMARY")
    results = []
    for r in validation.results:
        kwargs = {k: v for k, v in r.expectation_config.kwargs.items() if k not in ("batch_id",)}
        results.append(_result(r.expectation_config.type, kwargs, r.success, r.result.get("element_count"), r.result.get("unexpected_count"),
                               list(r.result.get("partial_unexpected_list") or [])))
    return results, f"great_expectations {gx.__version__}"


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    if hasattr(value, "item"):
        return _plain(value.item())
    return value


def _quiet(context: Any) -> None:
    """Turn off great-expectations' progress bars (they go to stderr); harmless if the API moves."""
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except Exception:  # noqa: BLE001 - cosmetic only
        pass
