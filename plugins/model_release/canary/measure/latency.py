"""Latency under load: the load phase of the candidate (and the champion beside it) and where its time goes.

:func:`load_phase` runs :func:`~.load.measure` over the candidate's entry model and, when a
served champion was replayed, the champion's, alternating windows; :func:`where_time_goes`
turns the server's statistics of the windows used into per-model figures: requests, rows and
batches, mean request time, queueing and compute, and for a model that calls others (an ensemble,
a BLS step) its *own* time: its request time minus the requests it made, which Triton counts in
the called models while their wall-clock time is inside the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ...spec import LoadSpec
from ...spec.paired import DEFAULT_CONFIDENCE
from ...triton.requester import TritonRequester, request_batches
from ...triton.server import EntryModel, TritonServer
from .load import LoadRunner, Measurement, measure, paired_ratios

CANDIDATE, CHAMPION = "candidate", "champion"


def load_runner(url: str, server: TritonServer, entries: Mapping[str, EntryModel], golden: Mapping[str, np.ndarray],
                load: LoadSpec, *, alive: Callable[[], str | None] | None = None) -> LoadRunner:
    """A runner whose targets are ``entries`` (name -> entry model), fed from golden rows."""

    def connect(target: str) -> TritonRequester:
        entry = entries[target]
        rows = min(load.batch_rows, entry.max_batch_size) if entry.max_batch_size > 0 else load.batch_rows
        batches = request_batches({k: golden[k] for k in entry.inputs}, rows)
        return TritonRequester(url, entry.name, entry.inputs, list(entry.outputs), batches, load.request_timeout_s)

    return LoadRunner(connect, concurrency=load.concurrency, batch_rows=load.batch_rows, statistics=server.statistics,
                      alive=alive)


def load_phase(runner: LoadRunner, targets: list[str], load: LoadSpec, *, confidence: float = DEFAULT_CONFIDENCE,
               progress: Callable[[str], None] | None = None) -> dict[str, Measurement]:
    """The gate's measurement of ``targets`` (``candidate`` first), alternating window by window.

    With the champion among them, settled windows are not enough to stop: while the window pairs so
    far leave a ratio gate inconclusive at ``confidence`` (``canary.confidence``, :func:`ratios_decided`),
    the phase keeps measuring, within ``load.budget_s``, since more pairs are what would decide it.
    """
    return measure(runner, targets, warmup_s=load.warmup_s, window_s=load.window_s, stable_windows=load.stable_windows,
                   stability=load.stability, budget_s=load.budget_s, progress=progress,
                   decided=(lambda measured: ratios_decided(measured, load, confidence)) if CHAMPION in targets else None)


def ratios_decided(measured: Mapping[str, Measurement], load: LoadSpec, confidence: float = DEFAULT_CONFIDENCE) -> bool:
    """Whether the window pairs measured so far decide both ratio gates (each passes or blocks) at ``confidence``."""
    from ..judge.latency_ratio import ratio_gate
    from ..judge.outcome import INCONCLUSIVE

    if CHAMPION not in measured:
        return True
    paired = paired_ratios(measured[CANDIDATE], measured[CHAMPION])
    p99 = ratio_gate("load.p99_ratio", paired.get("p99_ratios", []), load.max_p99_ratio, setting="canary.load.max_p99_ratio",
                     confidence=confidence)
    tput = ratio_gate("load.throughput_ratio", paired.get("throughput_ratios", []), load.min_throughput_ratio,
                      higher_is_worse=False, setting="canary.load.min_throughput_ratio", confidence=confidence)
    return INCONCLUSIVE not in (p99.outcome, tput.outcome)


def where_time_goes(measurement: Measurement, used: int, calls: Mapping[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Per-model figures over the windows used (see the module docstring)."""
    total: dict[str, dict[str, float]] = {}
    for window in measurement.settled(used):
        for model, delta in window.stats.items():
            entry = total.setdefault(model, {})
            for key, value in delta.items():
                entry[key] = entry.get(key, 0) + value
    out: dict[str, dict[str, Any]] = {}
    for model, t in sorted(total.items()):
        n = t.get("success_count", 0)
        if not n:
            continue
        compute = t.get("compute_input_ns", 0) + t.get("compute_infer_ns", 0) + t.get("compute_output_ns", 0)
        figures: dict[str, Any] = {
            "requests": int(n), "rows": int(t.get("inference_count", 0)), "batches": int(t.get("execution_count", 0)),
            "request_ms": t.get("success_ns", 0) / n / 1e6, "queue_ms": t.get("queue_ns", 0) / n / 1e6,
            "compute_ms": compute / n / 1e6,
        }
        callees = [c for c in calls.get(model, []) if c in total]
        if callees:
            nested = sum(total[c].get("success_ns", 0) for c in callees)
            figures["calls"] = callees
            figures["own_ms"] = max(0.0, (t.get("success_ns", 0) - nested) / n / 1e6)
        out[model] = figures
    return out
