"""From two metrics snapshots of one server to that server's figures over the interval between them.

Triton's counters are cumulative and restart at 0 when a model is unloaded and loaded again;
a version's series vanish once it is unloaded. A delta therefore treats any counter that went
down as a **reset**: the interval's figure is the new value (what was counted since the restart;
what was counted between the earlier snapshot and the restart is lost, and the interval says
so with ``reset=True``). A series that vanished counts nothing. No figure is ever negative.

Means are over **successful** requests: Triton's duration counters count successes only.
The p99 is the server's own 60 s summary window at the later snapshot, never a mean of servers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .metrics import ModelFigures, Snapshot


@dataclass(frozen=True)
class Release:
    """One release as the watch sees it on a server: its entry model and that model's Triton version.

    The entry model (the ensemble or the BLS model clients call) answers every request once, so
    its counters are the release's traffic; a failing step fails the ensemble's request too.

    Args:
        label: how messages name the release (``iris v7``).
        entry: the entry model's name.
        version: the entry model's Triton version in this release.
    """

    label: str
    entry: str
    version: int


@dataclass(frozen=True)
class ProbeResult:
    """What a traffic-side signal saw on one server in one interval.

    ``own_requests``: the requests were sent by the watch (probes), on top of the user's traffic,
    so they are not counted as traffic; False for a signal that reports the user's own requests.
    """

    sent: int = 0
    errors: int = 0
    first_error: str | None = None
    own_requests: bool = True


@dataclass(frozen=True)
class ServerInterval:
    """One server's figures for one release over one interval (JSON-ready through :meth:`as_dict`).

    ``requests``/``failures`` are Triton's counts (success + failure / failure), probe requests
    included; ``traffic`` is ``requests`` less the probes, the user traffic ``min_requests`` counts.
    ``request_us``/``queue_us`` are the microseconds of successful requests only.
    """

    server: str
    role: str
    release: str
    model: str
    version: int
    requests: float
    failures: float
    request_us: float
    queue_us: float
    p99_us: float
    reset: bool
    probes_sent: int = 0
    probe_errors: int = 0
    probe_error: str | None = None
    probes_extra: int = 0
    signal_errors: float | None = None
    present: bool = True

    @property
    def successes(self) -> float:
        return self.requests - self.failures

    @property
    def traffic(self) -> float:
        return max(0.0, self.requests - self.probes_extra)

    def as_dict(self) -> dict[str, object]:
        """The figures, with NaN written as None (JSON has no NaN)."""
        out = asdict(self)
        out["p99_us"] = None if math.isnan(self.p99_us) else self.p99_us
        out["mean_request_us"] = self.request_us / self.successes if self.successes > 0 else None
        out["mean_queue_us"] = self.queue_us / self.successes if self.successes > 0 else None
        return out


def counter_delta(before: float | None, after: float | None) -> tuple[float, bool]:
    """The increase of one cumulative counter, and whether it was reset between the two readings.

    Args:
        before: the earlier reading (None: the series did not exist).
        after: the later reading (None: the series vanished, its model version unloaded).

    Returns:
        ``(increase, reset)``; the increase is never negative.
    """
    if after is None:
        return 0.0, before is not None and before > 0
    if before is None or after >= before:
        return after - (before or 0.0), False
    return after, True


def model_delta(before: ModelFigures, after: ModelFigures) -> tuple[dict[str, float], bool]:
    """The four counters' increases of one model version between two snapshots, and whether it reset.

    The success counter and the two duration counters restart together when the model is loaded
    again: one of them going down means a reload, and all three are then taken from the later
    snapshot alone (a reset success count is never paired with an unreset duration). The failure
    counters (one per ``reason``) did not restart on an unload and load on Triton 2.51 here, so the
    failure count is a counter of its own: its increase, or its value when it went down.
    """
    if before.present and not after.present:
        return dict.fromkeys(("success", "failure", "request_us", "queue_us"), 0.0), True
    together = ("success", "request_us", "queue_us")
    reset = before.present and any(getattr(after, n) < getattr(before, n) for n in together)
    base = ModelFigures() if reset else before
    out = {n: max(0.0, getattr(after, n) - getattr(base, n)) for n in together}
    out["failure"], failure_reset = counter_delta(before.failure if before.present else None, after.failure)
    return out, reset or failure_reset


def server_interval(
    before: Snapshot,
    after: Snapshot,
    role: str,
    release: Release,
    *,
    probe: ProbeResult | None = None,
    error_signal: str | None = None,
) -> ServerInterval:
    """One server's figures for ``release`` between two of its snapshots."""
    now = after.model(release.entry, release.version)
    d, reset = model_delta(before.model(release.entry, release.version), now)
    signal = None
    if error_signal is not None:
        signal, signal_reset = counter_delta(
            before.total(error_signal, release.entry, release.version),
            after.total(error_signal, release.entry, release.version),
        )
        reset = reset or signal_reset
    probe = probe or ProbeResult()
    return ServerInterval(
        server=after.server, role=role, release=release.label, model=release.entry, version=release.version,
        requests=d["success"] + d["failure"], failures=d["failure"], request_us=d["request_us"],
        queue_us=d["queue_us"], p99_us=now.p99_us, reset=reset, present=now.present,
        probes_sent=probe.sent, probe_errors=probe.errors, probe_error=probe.first_error,
        probes_extra=probe.sent if probe.own_requests else 0, signal_errors=signal,
    )


@dataclass(frozen=True)
class Totals:
    """Several servers' intervals of one release added up (p99s kept apart, one per server)."""

    requests: float
    failures: float
    traffic: float
    request_us: float
    queue_us: float
    probes_sent: int
    probe_errors: int
    signal_errors: float | None
    p99_us: dict[str, float]

    @classmethod
    def of(cls, intervals: Sequence[ServerInterval]) -> "Totals":
        """The sum of ``intervals`` (an empty sequence gives zeros)."""
        signals = [i.signal_errors for i in intervals if i.signal_errors is not None]
        return cls(
            requests=sum(i.requests for i in intervals), failures=sum(i.failures for i in intervals),
            traffic=sum(i.traffic for i in intervals), request_us=sum(i.request_us for i in intervals),
            queue_us=sum(i.queue_us for i in intervals), probes_sent=sum(i.probes_sent for i in intervals),
            probe_errors=sum(i.probe_errors for i in intervals),
            signal_errors=sum(signals) if signals else None,
            p99_us={i.server: i.p99_us for i in intervals},
        )

    @property
    def successes(self) -> float:
        return self.requests - self.failures
