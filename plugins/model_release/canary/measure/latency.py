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

from ...errors import SpecError
from ...spec import LoadSpec
from ...spec.canary import batch_rows_refusal
from ...spec.paired import DEFAULT_CONFIDENCE
from ...triton.requester import TritonRequester, request_batches
from ...triton.server import EntryModel, TritonServer
from .load import LoadRunner, Measurement, measure, paired_ratios

CANDIDATE, CHAMPION = "candidate", "champion"


def load_runner(url: str, server: TritonServer, entries: Mapping[str, EntryModel], golden: Mapping[str, np.ndarray],
                load: LoadSpec, *, alive: Callable[[], str | None] | None = None) -> LoadRunner:
    """A runner whose targets are ``entries`` (name -> entry model), fed from golden rows.

    Every request carries ``canary.load.batch_rows`` rows, and those are the rows counted.

    Raises:
        SpecError: an entry model takes fewer rows per request than ``batch_rows`` (its ``max_batch_size``):
            cut, its requests would count rows never sent; nothing is sent.
    """
    for target, entry in entries.items():
        check_batch_rows(load.batch_rows, entry, target)

    def connect(target: str) -> TritonRequester:
        entry = entries[target]
        batches = request_batches({k: golden[k] for k in entry.inputs}, load.batch_rows)
        return TritonRequester(url, entry.name, entry.inputs, list(entry.outputs), batches, load.request_timeout_s)

    return LoadRunner(connect, concurrency=load.concurrency, min_requests=load.min_requests, statistics=server.statistics,
                      alive=alive)


def check_batch_rows(batch_rows: int, entry: EntryModel, target: str) -> None:
    """Refuse a load phase whose requests would carry more rows than the served ``entry`` takes.

    The spec's own check covers the candidate's repository; this one what is served (a champion
    released with a smaller ``max_batch_size``, a remote endpoint's model).
    """
    refusal = batch_rows_refusal(batch_rows, entry.max_batch_size,
                                 f"the {target}'s entry model {entry.name!r}, served with max_batch_size")
    if refusal:
        raise SpecError(refusal, stage="canary")


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
    """Whether the window pairs measured so far decide both ratio gates (each passes or blocks) at ``confidence``.

    The judge's own findings (:func:`~..judge.latency_ratio.load_ratio_findings`), so a pass on windows
    holding fewer than ``canary.load.min_requests`` requests is not decided either: the phase measures on.
    """
    from ..judge.latency_ratio import load_ratio_findings
    from ..judge.outcome import INCONCLUSIVE

    if CHAMPION not in measured:
        return True
    paired = paired_ratios(measured[CANDIDATE], measured[CHAMPION])
    return all(f.outcome != INCONCLUSIVE for f in load_ratio_findings(paired, load, confidence))


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
