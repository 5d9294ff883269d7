"""The watch after each roll-out wave: Triton's metrics for the new release beside the old one.

The roll-out calls :func:`watch_wave` after each wave and acts on the :class:`WatchVerdict`
(pass: next wave; fail: roll back; inconclusive: hold and ask a person). Modules, in the order
data flows through them:

- :mod:`model_release.spec.serve`: ``serve.watch`` (:class:`WatchSpec`, part of the release spec):
  bake time, interval, minimum requests, limits (absolute and ratio to the old release), failures
  before rollback, budget, probes.
- :mod:`.metrics`: reads a server's ``/metrics`` (Prometheus text) into a :class:`Snapshot`.
- :mod:`.figures`: two snapshots -> one server's interval figures, counter resets handled.
- :mod:`.probe`: traffic-side error signals (Triton counts a python step's error response as a success).
- :mod:`.rules`: one interval judged against the limits.
- :mod:`.wave`: the loop and the verdict.
"""

from ...spec.serve import ProbeSpec, ServeSpec, WatchLimit, WatchSpec
from .figures import ProbeResult, Release, ServerInterval
from .metrics import MetricsReader, Snapshot, WatchedServer
from .probe import HttpProbe, load_probe_bodies, probe_from_spec
from .rules import FAIL, INCONCLUSIVE, PASS, Measurement
from .wave import Clock, WatchFailed, WatchInconclusive, WatchVerdict, watch_wave

__all__ = [
    "FAIL", "INCONCLUSIVE", "PASS", "Clock", "HttpProbe", "Measurement", "MetricsReader", "ProbeResult", "ProbeSpec",
    "Release", "ServeSpec", "ServerInterval", "Snapshot", "WatchFailed", "WatchInconclusive", "WatchLimit",
    "WatchSpec", "WatchVerdict", "WatchedServer", "load_probe_bodies", "probe_from_spec", "watch_wave",
]
