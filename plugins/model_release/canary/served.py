"""What serving hands the judges: the golden set, and each model's replay of it (and the load phase's figures).

Kept apart from :mod:`.serve` so that judging depends on these records only, never on the
serving (or reporting) code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..triton.client import ReplayResult


@dataclass
class Replays:
    """The candidate's replay of the golden rows, the champion's (or why it was not replayed), the load phase."""

    candidate: ReplayResult
    champion: ReplayResult | None = None
    champion_skipped: str | None = None
    #: the load phase's figures of ``candidate`` and (when replayed) ``champion``
    load: dict[str, dict[str, Any]] | None = None
    #: the load phase's latency histograms per target, over its settled windows (the plot's data)
    load_histograms: dict[str, Any] | None = None
    #: why the load phase (and tuning) did not run though the spec asks for it: the release was blocked on its replay
    load_skipped: str | None = None


@dataclass
class Golden:
    """The golden set's inputs, the native model's answers on them, and the ground truth when there is one."""

    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    truth: np.ndarray | None = None
    rows: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: ``golden.slices`` column -> its value (as text) on each golden row
    slices: dict[str, np.ndarray] = field(default_factory=dict)
