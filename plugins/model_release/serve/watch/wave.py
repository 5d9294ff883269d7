"""The watch of one roll-out wave: sample, judge, decide; the roll-out acts on the verdict.

After a wave switched some servers to the new release, the roll-out calls::

    verdict = watch_wave(new_servers, old_servers, new_release, old_release, spec.serve.watch,
                         clock=Clock(), sampler=MetricsReader(time.monotonic), probe=probe)
    if verdict.outcome == FAIL: roll back, then raise verdict.error()
    if verdict.outcome == INCONCLUSIVE: hold (move nothing), raise verdict.error()
    baseline = verdict.baseline     # the old release's figures, for the last wave's comparison

The loop: read every server's metrics once (the start), then every ``interval_s``: send the probes,
read the metrics again, judge the interval (:func:`.rules.judge`) and decide:

1. ``failures`` failing measurements -> **fail** at once (within one bake time when the release is bad);
2. ``bake_s`` elapsed and the last ``settle`` measurements passed -> **pass**;
3. the next interval would end past ``budget_s`` -> **inconclusive**: the wave holds, and the run
   stops and asks a person (what was missing and what to do), never promotes on silence.

A metrics endpoint that cannot be read raises :class:`~model_release.errors.ServiceUnavailable`
naming the server, at once: nothing has moved, and the roll-out must move nothing either.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...errors import GateError, Inconclusive, ModelReleaseError
from ...spec.serve import P99, WatchSpec
from .figures import ProbeResult, Release, Totals, server_interval
from .metrics import Snapshot, WatchedServer
from .rules import FAIL, INCONCLUSIVE, PASS, Baseline, Measurement, judge, release_figures

#: reads one server's metrics endpoint (:class:`.metrics.MetricsReader`)
Sampler = Callable[[WatchedServer], Snapshot]
#: a traffic-side signal (:class:`.probe.HttpProbe` or the user's own)
Probe = Callable[[WatchedServer, Release], ProbeResult]


class Clock:
    """The watch's time: ``monotonic()`` and ``sleep(seconds)`` (a fake one in unit tests)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class WatchFailed(GateError):
    """The watch saw the new release cross a limit: the roll-out rolled it back.

    ``rollback``: what was rolled back, when anything was (``release_id``, ``to_release``, ``reason``,
    ``wave``, ``servers``, ``pointer_moved``, ``mlflow_alias``); None when the channel served no earlier
    release to go back to.
    """

    kind = "watch"
    rollback: dict | None = None


class WatchInconclusive(Inconclusive):
    """The watch could not judge the wave within its budget: it holds, and a person decides.

    Neither the input's fault nor a service's: exit code 5 (:class:`~model_release.errors.Inconclusive`),
    so that a scheduler neither retries it blindly nor counts it as a rejected release.
    """

    kind = "inconclusive"


@dataclass(frozen=True)
class WatchVerdict:
    """What the watch of one wave concluded, with every measurement's figures for the report.

    ``sentence``: for a failure the crossing (``error rate 4.1% against 0.0%, limit 1%``), for an
    inconclusive watch why; ``what_to_do``: the next step for a person (empty on a pass).
    ``baseline``: the old release's figures over the whole watch, for later waves to compare with.
    """

    outcome: str
    sentence: str
    what_to_do: str
    new_release: str
    old_release: str | None
    elapsed_s: float
    measurements: tuple[Measurement, ...]
    baseline: dict[str, float]

    def error(self) -> ModelReleaseError | None:
        """The error the run ends with for this verdict (None on a pass)."""
        if self.outcome == PASS:
            return None
        cls = WatchFailed if self.outcome == FAIL else WatchInconclusive
        return cls(f"{self.new_release}: {self.sentence}; {self.what_to_do}", stage="watch")

    def as_dict(self) -> dict[str, object]:
        """JSON-ready, for the roll-out's record and the channel page."""
        return {
            "outcome": self.outcome, "sentence": self.sentence, "what_to_do": self.what_to_do,
            "new_release": self.new_release, "old_release": self.old_release, "elapsed_s": round(self.elapsed_s, 3),
            "baseline": self.baseline, "measurements": [m.as_dict() for m in self.measurements],
        }


def _sample(servers: Sequence[WatchedServer], sampler: Sampler) -> dict[str, Snapshot]:
    return {s.name: sampler(s) for s in servers}  # ServiceUnavailable names the server


def _decide(spec: WatchSpec, ms: Sequence[Measurement], elapsed: float) -> tuple[str, str, str] | None:
    failed = [m for m in ms if m.status == FAIL]
    if len(failed) >= spec.failures:
        return FAIL, failed[-1].reason, (
            f"rolled back by the watch ({len(failed)} of {len(ms)} measurements failed, serve.watch.failures "
            f"{spec.failures}); the figures per measurement are in the roll-out's record"
        )
    recent = ms[-spec.settle:]
    if elapsed >= spec.bake_s and len(recent) == spec.settle and all(m.status == PASS for m in recent):
        return PASS, recent[-1].reason, ""
    if elapsed + spec.interval_s > spec.budget_s:
        held = next((m for m in reversed(ms) if m.status != PASS), ms[-1])
        return INCONCLUSIVE, f"the watch could not judge the wave in {elapsed:g} s (budget_s {spec.budget_s:g}): " \
            f"{held.reason}", (
            "the wave holds (no server moved). Send production traffic to the new release's servers, or lower "
            "serve.watch.min_requests if this traffic is normal, then rerun the roll-out to watch again; or roll "
            "back by hand if the release should not go on"
        )
    return None


def watch_wave(
    new_servers: Sequence[WatchedServer],
    old_servers: Sequence[WatchedServer],
    new_release: Release,
    old_release: Release | None,
    spec: WatchSpec,
    *,
    clock: Clock,
    sampler: Sampler,
    probe: Probe | None = None,
    baseline: Baseline | None = None,
    log: Callable[[str], None] | None = None,
) -> WatchVerdict:
    """Watch one wave until it passes, fails or runs out of budget.

    Args:
        new_servers: the servers this wave and earlier ones switched to ``new_release``.
        old_servers: the servers still serving ``old_release`` (empty in the last wave).
        new_release / old_release: the entry model and version of each (old None on a first release).
        spec: ``serve.watch``.
        clock: the watch's time (``monotonic``, ``sleep``).
        sampler: reads one server's metrics endpoint.
        probe: a traffic-side error signal called once per server and interval (None: none).
        baseline: the old release's figures when no server serves it any more: an earlier wave's
            ``verdict.baseline``, or the canary's figures of the champion, keyed by the figure names
            of :data:`model_release.spec.serve.FIGURES` (``{"p99": 2400.0, "error rate": 0.0}``).
        log: where each measurement's one-line summary goes.

    Returns:
        The verdict with every measurement's figures.

    Raises:
        ServiceUnavailable: a metrics endpoint could not be read (the message names the server).
    """
    if not new_servers:
        raise ValueError("watch_wave needs at least one server on the new release")
    if not spec.enabled:
        return WatchVerdict(PASS, "not watched: serve.watch.enabled is false", "", new_release.label,
                            old_release.label if old_release else None, 0.0, (), dict(baseline or {}))
    roles = [(s, "new", new_release) for s in new_servers]
    roles += [(s, "old", old_release) for s in old_servers if old_release is not None]
    start = clock.monotonic()
    before = _sample([s for s, _, _ in roles], sampler)
    measurements: list[Measurement] = []
    while True:
        # on a fixed grid from the start, so the time probes and reads take does not stretch the intervals
        clock.sleep(max(0.0, start + (len(measurements) + 1) * spec.interval_s - clock.monotonic()))
        m, before = _measure(spec, roles, before, sampler, probe, baseline, len(measurements), clock, start)
        measurements.append(m)
        if log is not None:
            log(f"watch {new_release.label} measurement {m.index + 1} at {m.at_s:.0f} s: {m.status}: {m.reason}")
        decided = _decide(spec, measurements, m.at_s)
        if decided is not None:
            outcome, sentence, what_to_do = decided
            return WatchVerdict(
                outcome, sentence, what_to_do, new_release.label, old_release.label if old_release else None,
                m.at_s, tuple(measurements), _baseline(measurements, baseline),
            )


def _measure(
    spec: WatchSpec,
    roles: Sequence[tuple[WatchedServer, str, Release]],
    before: dict[str, Snapshot],
    sampler: Sampler,
    probe: Probe | None,
    baseline: Baseline | None,
    index: int,
    clock: Clock,
    start: float,
) -> tuple[Measurement, dict[str, Snapshot]]:
    """One interval: send the probes, read every server, judge; returns the measurement and the new snapshots."""
    probes = {s.name: probe(s, r) for s, _, r in roles} if probe is not None else {}
    after = _sample([s for s, _, _ in roles], sampler)
    intervals = [
        server_interval(before[s.name], after[s.name], role, r, probe=probes.get(s.name),
                        error_signal=spec.error_signal)
        for s, role, r in roles
    ]
    m = judge(spec, [i for i in intervals if i.role == "new"], [i for i in intervals if i.role == "old"],
              baseline=baseline, index=index, at_s=clock.monotonic() - start)
    return m, after


def _baseline(ms: Sequence[Measurement], earlier: Baseline | None) -> dict[str, float]:
    """The old release's figures over the whole watch (an earlier baseline where none was measured)."""
    old = [i for m in ms for i in m.old]
    figures = dict(earlier or {})
    if old:
        measured = release_figures(Totals.of(old))
        measured.pop(P99, None)  # a p99 is one server's window: take the last measurement's highest
        last = release_figures(Totals.of(ms[-1].old))
        if P99 in last:
            measured[P99] = last[P99]
        figures.update(measured)
    return figures
