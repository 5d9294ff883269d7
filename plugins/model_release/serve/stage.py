"""The roll-out as a pipeline step: after promotion, with the spec's warm-up rule and the canary's p99.

The release's own manifest holds the canary's figures (``canary.figures.timing.p99_ms``), so the
first-request limit is that p99 times ``serve.warmup.factor`` (the plan carries the rule to the
agents, which probe each new version before the switch); a release without one is probed without a limit. The Airflow task (:func:`model_release.airflow.tasks.rollout`) is one call here;
``model-release rollout`` at a terminal builds the same watch with :func:`watch_plan`, from the spec
the release recorded in its manifest (:func:`recorded_spec`) or a spec file.

The watch starts without a baseline (:attr:`~.guard.WatchPlan.baseline` None): the old release's
figures come from the serving Tritons still on it, and are carried to the later waves. The canary's
figures are not a baseline: they are client-side times under the canary's synthetic load on the
canary's Triton (often another machine, or the onnxruntime shim), while the watch judges Triton's
own server-side counters under production traffic; a ratio limit across the two would roll back
(or pass) on the difference between the measurements, not between the releases.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..spec import ReleaseSpec, spec_from_record
from ..store.model_store import ModelStore
from .guard import WatchPlan
from .record import RolloutRecord
from .rollout import RolloutOptions, roll_out
from .warmup import WarmupRule, limit_ms
from .watch.probe import probe_from_spec


def canary_p99_ms(manifest: dict[str, Any]) -> float | None:
    """The canary's p99 for the release (ms), or None when its manifest holds none."""
    timing = (((manifest.get("canary") or {}).get("figures") or {}).get("timing") or {})
    value = timing.get("p99_ms")
    return float(value) if isinstance(value, (int, float)) else None


def recorded_spec(store: ModelStore, release_id: str) -> ReleaseSpec | None:
    """The release spec ``release_id`` recorded in its manifest (None when it recorded none), its relative
    paths resolved against the folder the spec was read from when the release was made.

    Raises:
        SpecError: the recorded spec is not valid for this version of model-release (each field named).
        StoreError: the manifest is damaged.
    """
    got = store.read_manifest(release_id)
    doc = got[0].get("spec") if got else None
    if not isinstance(doc, dict):
        return None
    return spec_from_record(doc, origin=f"recorded in release {release_id!r}")


def watch_plan(serve: Any, *, tracking_uri: str | None = None, alias: str = "production",
               resolve_path: Callable[[str], Path] | None = None,
               log: Callable[[str], None] | None = None) -> WatchPlan | None:
    """The watch the spec's ``serve.watch`` asks for (None when disabled): its probe rows, and the
    MLflow alias moved back with the pointer when ``tracking_uri`` is given.

    Raises:
        SpecError: the probe rows cannot be read.
    """
    if not serve.watch.enabled:
        return None
    probe = probe_from_spec(serve.watch, resolve_path or Path) if serve.watch.probe.rows else None
    follower = None
    if tracking_uri:
        from ..store.registry import MlflowFollower

        follower = MlflowFollower(tracking_uri, alias=alias)
    return WatchPlan(serve.watch, probe=probe, follower=follower, log=log)


def rollout_release(store: ModelStore, channel: str, serve: Any, *, release_id: str, run: str | None = None,
                    lock_wait_s: float | None = None, progress: Callable[[str], None] | None = None,
                    tracking_uri: str | None = None, alias: str = "production",
                    resolve_path: Callable[[str], Path] | None = None) -> RolloutRecord:
    """Roll ``release_id`` out to the channel's serving agents as the spec's ``serve`` section says, watching each step.

    Raises:
        RolloutStopped, RolloutLocked, StoreError, UserError: as :func:`~.rollout.roll_out`.
        WatchFailed: the watch rolled the release back (servers, pointer, alias, ledger).
        WatchInconclusive, ServiceUnavailable: the watch held the step; nothing moved.
    """
    got = store.read_manifest(release_id)
    p99 = canary_p99_ms(got[0]) if got else None
    rule = WarmupRule(requests=serve.warmup.requests, first_request_limit_ms=limit_ms(p99, serve.warmup.factor))
    options = RolloutOptions(spec=serve.rollout, lock_wait_s=lock_wait_s, warmup=rule if rule.active else None, run=run,
                             watch=watch_plan(serve, tracking_uri=tracking_uri, alias=alias,
                                              resolve_path=resolve_path, log=progress))
    return roll_out(store, channel, options, release_id=release_id, progress=progress)
