"""An expectation suite over the canary's outputs, run with great-expectations (ephemeral context).

For a classifier: no nulls, every probability in [0, 1], each row's probabilities summing to 1
within :data:`ROW_SUM_TOLERANCE`, every label in the label set. For other shapes: no nulls in any
numeric output. great_expectations costs seconds to import, so it is imported inside
:func:`run_expectations`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...roles import LABEL, PROBABILITIES

#: how far a row of class probabilities may sum from 1 (float32 softmax rounding is ~1e-7 per class)
ROW_SUM_TOLERANCE = 1e-4
#: at most this many element columns per output go into the frame
MAX_COLUMNS_PER_OUTPUT = 64


def output_frame(outputs: Mapping[str, np.ndarray], *, classifier: bool):  # -> pandas.DataFrame
    """Flatten outputs into one column per element (``name[i]``), plus derived classifier columns."""
    import pandas as pd

    columns: dict[str, Any] = {}
    for name, array in outputs.items():
        a = np.asarray(array)
        flat = a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(-1, 1)
        if flat.dtype.kind in "SO":
            columns[name] = [v.decode() if isinstance(v, bytes) else (None if v is None else str(v)) for v in flat[:, 0]]
            continue
        if flat.dtype.kind not in "fiub":
            continue
        for i in range(min(flat.shape[1], MAX_COLUMNS_PER_OUTPUT)):
            columns[f"{name}[{i}]" if flat.shape[1] > 1 or a.ndim > 1 else name] = flat[:, i].astype(np.float64)
        if classifier and name == PROBABILITIES:
            columns["probabilities_row_sum"] = flat.astype(np.float64).sum(axis=1)
    return pd.DataFrame(columns)


def run_expectations(
    outputs: Mapping[str, np.ndarray], *, classifier: bool, label_set: list[str] | None
) -> dict[str, Any]:
    """Validate the outputs; return ``{"passed", "results": [...], "seconds"}``.

    Each result names the expectation, its column, whether it passed, how many rows failed and a few
    of the failing values.
    """
    import great_expectations as gx

    t0 = time.perf_counter()
    frame = output_frame(outputs, classifier=classifier)
    context = gx.get_context(mode="ephemeral")
    _quiet(context)
    asset = context.data_sources.add_pandas("canary").add_dataframe_asset("outputs")
    batch = asset.add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": frame})
    suite = gx.ExpectationSuite(name="canary-outputs")
    E = gx.expectations
    for column in frame.columns:
        suite.add_expectation(E.ExpectColumnValuesToNotBeNull(column=column))
        if classifier and column.startswith("probabilities["):
            suite.add_expectation(E.ExpectColumnValuesToBeBetween(column=column, min_value=0.0, max_value=1.0))
    if classifier and "probabilities_row_sum" in frame.columns:
        suite.add_expectation(
            E.ExpectColumnValuesToBeBetween(
                column="probabilities_row_sum", min_value=1.0 - ROW_SUM_TOLERANCE, max_value=1.0 + ROW_SUM_TOLERANCE
            )
        )
    if classifier and label_set and LABEL in frame.columns:
        suite.add_expectation(E.ExpectColumnValuesToBeInSet(column=LABEL, value_set=list(label_set)))
    validation = batch.validate(suite, result_format="SUMMARY")
    results = []
    for r in validation.results:
        kwargs = {k: v for k, v in r.expectation_config.kwargs.items() if k not in ("batch_id",)}
        results.append({
            "expectation": r.expectation_config.type,
            "column": kwargs.pop("column", None),
            "kwargs": kwargs,
            "success": bool(r.success),
            "rows": r.result.get("element_count"),
            "unexpected_count": r.result.get("unexpected_count"),
            "unexpected_examples": [_plain(v) for v in (r.result.get("partial_unexpected_list") or [])[:5]],
        })
    return {
        "passed": bool(validation.success),
        "results": results,
        "seconds": round(time.perf_counter() - t0, 3),
        "engine": f"great_expectations {gx.__version__}",
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


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value.item() if hasattr(value, "item") else value


def _quiet(context: Any) -> None:
    """Turn off great-expectations' progress bars (they go to stderr); harmless if the API moves."""
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except Exception:  # noqa: BLE001 - cosmetic only
        pass
