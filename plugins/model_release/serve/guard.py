"""The watch wired into the roll-out: after each step, judge; on a failure, roll everything back by itself.

:func:`watch_after_wave` is what :func:`~.rollout.roll_out` calls once a step's servers switched
(when ``RolloutOptions.watch`` is set and every server has a metrics URL). The servers already on
the new release are watched beside those still on the old one (:func:`~.watch.wave.watch_wave`);
the old release's figures are carried to the last step, where no server serves it any more.

- **pass**: the verdict goes into the record; the next step follows.
- **fail**: the plan moves back (every agent re-pins the old release: side by side its models are
  still loaded, so only the entry is loaded again), the channel pointer moves back
  by a conditional write (:func:`~model_release.store.channels.rollback`, the MLflow alias with it
  when a follower is given), the ledger marks the model version rejected in production, the record
  holds the watch's sentence and figures, and :class:`~.watch.wave.WatchFailed` is raised with the
  sentence (the roll-out then rewrites the channel page from its final record, best effort).
- **inconclusive**: nothing moves; :class:`~.watch.wave.WatchInconclusive` says why and what to do.
- a metrics endpoint that cannot be read: nothing moves; the ServiceUnavailable names the server.

The roll-out's lease is renewed at every sampling interval too (besides its own renewal thread),
so a long bake never loses it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelReleaseError
from ..spec.serve import WatchSpec
from ..store import ledger
from ..store.channels import rollback
from ..store.model_store import ModelStore
from ..store.registry import RegistryFollower
from .fleet import Fleet, Server
from .lock import RolloutLease
from .record import RolloutRecord, ServerRecord
from .versions import ENSEMBLE_VERSION, read_versions
from .watch.figures import Release
from .watch.metrics import MetricsReader, WatchedServer
from .watch.rules import FAIL, INCONCLUSIVE
from .watch.wave import Clock, Probe, Sampler, WatchFailed, WatchVerdict, watch_wave

log = logging.getLogger(__name__)

ROLLED_BACK = "rolled back by the watch"


@dataclass
class WatchPlan:
    """How the roll-out watches its waves.

    Attributes:
        spec: ``serve.watch``.
        probe: a traffic-side error signal (:class:`~.watch.probe.HttpProbe`, or the user's own); None: none.
        follower: the registry to move back with the pointer (MLflow alias); None: the pointer only.
        clock / sampler: the watch's time and metrics reader (real ones unless a test injects fakes).
        baseline: the old release's figures, carried from wave to wave; None to start with (the servers still
            on the old release give them; the canary's client-side figures are no baseline, see :mod:`.stage`).
        log: where each measurement's line goes.
    """

    spec: WatchSpec
    probe: Probe | None = None
    follower: RegistryFollower | None = None
    clock: Clock = field(default_factory=Clock)
    sampler: Sampler | None = None
    baseline: dict[str, float] | None = None
    log: Callable[[str], None] | None = None


class _LockClock(Clock):
    """The plan's clock, refreshing the roll-out lock before each wait of the bake."""

    def __init__(self, inner: Clock, lock: RolloutLease) -> None:
        self._inner, self._lock = inner, lock

    def monotonic(self) -> float:
        return self._inner.monotonic()

    def sleep(self, seconds: float) -> None:
        self._lock.refresh()
        self._inner.sleep(seconds)


def watched(server: Server) -> WatchedServer:
    """A fleet server as the watch reads it (its metrics URL, and its HTTP endpoint for probes)."""
    return WatchedServer(server.name, str(server.metrics_url), server.url)


def watchable(fleet: Fleet, plan: WatchPlan | None) -> bool:
    """Whether the roll-out watches this fleet: a plan, the watch enabled, every server with a metrics URL."""
    if plan is None or not plan.spec.enabled:
        return False
    missing = [s.name for s in fleet.servers if not s.metrics_url]
    if missing:
        log.warning("serve.watch: servers %s have no metrics_url in the fleet: the roll-out is not watched", missing)
    return not missing


def _entry_release(store: ModelStore, channel: str, release_id: str) -> Release:
    """The release's entry model and the Triton version requests reach it at (an ensemble is served at 1)."""
    got = store.read_manifest(release_id)
    entry = str(((got[0] if got else {}).get("repository") or {}).get("entry_model", ""))
    version = read_versions(store, channel).version(entry, release_id)  # ensembles are not numbered
    return Release(release_id, entry, ENSEMBLE_VERSION if version is None else version)


@dataclass
class WaveContext:
    """What the watch of one step needs from the roll-out: ``move_back(old, servers, step)`` puts the plan back
    on ``old`` and returns the servers' records once they re-pinned it."""

    store: ModelStore
    fleet: Fleet
    release_id: str
    record: RolloutRecord
    lock: RolloutLease
    move_back: Callable[[str, list[str], int], list[ServerRecord]]


def watch_after_wave(ctx: WaveContext, plan: WatchPlan, wave_no: int, old_id: str | None) -> WatchVerdict:
    """Watch the wave that just switched; act on a failure; raise on anything but a pass.

    Raises:
        WatchFailed: the release crossed a limit; everything was rolled back.
        WatchInconclusive: the watch could not judge within its budget; nothing moved.
        ServiceUnavailable: a metrics endpoint could not be read (named); nothing moved.
    """
    record = ctx.record
    on_new = {s.server for s in record.servers if s.after == record.release_id}
    new = [watched(s) for s in ctx.fleet.servers if s.name in on_new]
    old = [watched(s) for s in ctx.fleet.servers if s.name not in on_new] if old_id else []
    new_rel = _entry_release(ctx.store, record.channel, record.release_id)
    old_rel = _entry_release(ctx.store, record.channel, old_id) if old_id else None
    clock = _LockClock(plan.clock, ctx.lock)
    sampler = plan.sampler or MetricsReader(clock.monotonic)
    verdict = watch_wave(new, old, new_rel, old_rel, plan.spec, clock=clock, sampler=sampler, probe=plan.probe,
                         baseline=plan.baseline, log=plan.log)
    record.watch.append({"wave": wave_no, **verdict.as_dict()})
    plan.baseline = verdict.baseline or plan.baseline
    if verdict.outcome == FAIL:
        raise roll_back_release(ctx, plan, verdict, wave_no, old_id)
    if verdict.outcome == INCONCLUSIVE:
        record.reason = f"held by the watch in step {wave_no}: {verdict.sentence}"
        raise verdict.error()
    return verdict


def roll_back_release(ctx: WaveContext, plan: WatchPlan, verdict: WatchVerdict, wave_no: int,
                      old_id: str | None) -> WatchFailed:
    """Undo a roll-out the watch failed: servers, pointer, alias, ledger, record; the error to raise (the roll-out
    rewrites the channel page once the record says "rolled back")."""
    record = ctx.record
    sentence = f"{ROLLED_BACK}: {verdict.sentence}"
    record.reason = sentence
    if old_id is None:
        return WatchFailed(f"{record.release_id}: {sentence} in wave {wave_no}, but the channel served no earlier "
                           "release on these servers, so nothing could be rolled back to; stop its traffic and "
                           "promote a good release", stage="watch")
    switched = [s.server for s in record.servers if s.after == record.release_id]
    ctx.move_back(old_id, switched, wave_no)  # the record's rolled_back says how each server re-pinned
    pointer = _move_pointer_back(ctx, plan, old_id)
    rejected = _reject(ctx.store, record, sentence)
    log.warning("%s: %s; servers back on %s, %s, %s", record.release_id, sentence, old_id, pointer, rejected)
    failed = WatchFailed(f"{record.release_id}: {sentence} (wave {wave_no}); every server is back on {old_id}, "
                         f"{pointer}, {rejected}; {verdict.what_to_do}", stage="watch")
    failed.rollback = {
        "release_id": record.release_id, "to_release": old_id, "reason": sentence, "wave": wave_no,
        "servers": [s.server for s in record.rolled_back], "pointer_moved": record.pointer_back is not None,
        "mlflow_alias": (record.pointer_back or {}).get("mlflow_alias"),
    }
    return failed


def _move_pointer_back(ctx: WaveContext, plan: WatchPlan, old_id: str) -> str:
    """Move the channel pointer (and the alias) back when it still names the release; what was done."""
    channel, rid = ctx.record.channel, ctx.record.release_id
    current = ctx.store.read_pointer(channel)
    if current is None or current.release_id != rid:
        return f"the channel pointer was left at {current.release_id if current else None!r} (it no longer named {rid})"
    result = rollback(ctx.store, channel, old_id, follower=plan.follower, expected_current=rid)
    ctx.record.pointer_back = result.to_dict()
    alias = f" and the MLflow alias {result.mlflow_alias!r}" if result.mlflow_alias else ""
    return f"the channel pointer{alias} moved back to {old_id}"


def _reject(store: ModelStore, record: RolloutRecord, sentence: str) -> str:
    """Mark the release's model version rejected in production in the channel's ledger."""
    got = store.read_manifest(record.release_id)
    model = (got[0].get("model") or {}) if got else {}
    if not model.get("name") or model.get("version") is None:
        return "the ledger was not marked (the release's manifest names no model version)"
    try:  # a pipeline's entry is its combination of member versions (ledger.manifest_version)
        ledger.reject_in_production(store, record.channel, model["name"], ledger.manifest_version(got[0]),
                                    release_id=record.release_id, run={"run_id": record.run}, reason=sentence)
    except ModelReleaseError as exc:
        return f"the ledger could not be marked ({exc.message})"
    return f"the ledger marks {model['name']} v{model['version']} rejected in production"


def describe(record: RolloutRecord) -> dict[str, Any]:
    """The watch's part of a roll-out record, for the task's return value and the report."""
    return {"reason": record.reason, "watch": [{k: w[k] for k in ("wave", "outcome", "sentence")} for w in record.watch]}
