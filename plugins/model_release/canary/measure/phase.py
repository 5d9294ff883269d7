"""The load phase of one canary: tune the serving configuration (when asked), then measure under load.

Runs while candidate and champion are served (:mod:`..serve`); the figures it returns are judged
by the load gates, its histograms drawn by the report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import CanaryRejected
from ...spec import ReleaseSpec
from ...triton.server import TritonServer
from ...types import AssembleResult
from ..champion import Champion
from ..report.document import CanaryReport
from . import latency
from .load import Histogram, paired_ratios
from .tune import tune

log = logging.getLogger(__name__)


def under_load(spec: ReleaseSpec, server: TritonServer, url: str, assembled: AssembleResult, champion: Champion,
               golden: Mapping[str, np.ndarray], with_champion: bool, folder: Path, alive: Callable[[], str | None],
               report: CanaryReport) -> tuple[dict[str, dict[str, Any]], dict[str, Histogram]]:
    """Tune (when asked), then the load phase: candidate and champion (``with_champion``) in alternating windows.

    Sets the report's ``tuning`` and ``load_phase`` sections; returns the figures per target (and
    ``paired``) and each target's latency histogram over its settled windows.
    """
    entries = {latency.CANDIDATE: server.entry(assembled.entry_model)}
    if with_champion:
        entries[latency.CHAMPION] = server.entry(champion.entry)
    runner = latency.load_runner(url, server, entries, golden, spec.canary.load, alive=alive)
    try:
        if spec.canary.tune.enabled:
            report.tuning = tune(spec, server, runner, assembled, folder, champion_target=latency.CHAMPION in entries,
                                 champion=champion if with_champion else None, release_id=report.release_id,
                                 canary=report.server)
        measured = latency.load_phase(runner, list(entries), spec.canary.load, confidence=spec.canary.confidence, progress=lambda line: log.info("canary: %s", line))
    finally:
        runner.close()
    gone = alive()
    if gone is not None:
        raise CanaryRejected(f"{gone} during the load phase (the candidate was being served); nothing after it was "
                             f"judged. The server log is {report.server.get('log')}")
    used = spec.canary.load.stable_windows
    figures = {t: m.figures(used) for t, m in measured.items()}
    if latency.CHAMPION in measured:
        figures["paired"] = paired_ratios(measured[latency.CANDIDATE], measured[latency.CHAMPION])
    calls = {**assembled.calls, **(champion.calls if with_champion else {})}
    report.load_phase = {
        "concurrency": spec.canary.load.concurrency, "batch_rows": spec.canary.load.batch_rows,
        "window_s": spec.canary.load.window_s, "min_requests": spec.canary.load.min_requests,
        "budget_s": spec.canary.load.budget_s,
        "note": ("measured on the embedded CPU Triton through the python-backend onnxruntime shim: these figures are "
                 "the shim's, not a GPU Triton's" if report.server.get("mode") == "local" else "measured on the endpoint"),
        **{t: {**figures[t], "windows": [w.summary() for w in measured[t].windows],
               "models": latency.where_time_goes(measured[t], used, calls)} for t in measured},
        "paired": figures.get("paired"),
    }
    return figures, {t: m.merged(used) for t, m in measured.items()}
