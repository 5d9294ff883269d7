"""The serving agent beside each Triton: it owns the server's repository and makes it serve what the plan says.

One agent per serving Triton (a sidecar container in Kubernetes, a thread of the process that runs
each local Triton; ``model-release serve-agent`` either way). Every ``poll_s`` it:

1. checks its Triton is live; a dead or restarted one makes the agent not ready at once;
2. reads the channel's plan (:mod:`.plan`) for the release it is to serve; before any roll-out wrote
   one, it keeps what it serves, and a server that serves nothing takes the channel pointer's release;
3. when its Triton's entry model does not serve that release (a new step, a rollback, a restarted
   Triton that came back empty, a server that just joined): fetches the release into its content
   cache (:mod:`.release_cache`, verified against the manifest; unchanged models are not fetched
   again) and converges (:mod:`.converge`: leaves, BLS models, the pinned entry; warm-up; side by
   side, or in place after a drain when the plan says so). A release the server refused at one plan
   generation is not tried again until the plan moves (the error is in the state);
4. publishes its state (:mod:`.membership`) at every change and every ``heartbeat_s``.

It is **ready** (its readiness endpoint, :mod:`.agent_http`, the pod's readiness probe) only while its
Triton is live and its entry serves a whole release, and not while it drains for an in-place swap:
a Triton restarted by its supervisor (kubelet) is not ready until the current release is loaded
and warm again. Triton's own endpoints stay the liveness probe.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ModelReleaseError
from ..store.documents import utcnow
from ..store.model_store import ModelStore
from .control import TritonControl
from .converge import IN_PLACE, SIDE_BY_SIDE, Drain, converge, identify, served_pins, wanted_state
from .membership import AgentState, check_server_name, publish
from .memory import Headroom, budget_headroom, footprint
from .plan import Plan, read_plan
from .release_cache import ReleaseCache
from .server_repo import ModelRepository, ReleaseFiles
from .versions import VersionMap, assign_versions, read_versions
from .warmup import WarmupRule

log = logging.getLogger(__name__)


@dataclass
class AgentConfig:
    """How one agent runs (``model-release serve-agent``'s options).

    Attributes:
        name: the server's name in the fleet (a pod's name).
        channel: the channel whose plan it follows.
        url: Triton's HTTP endpoint as clients reach it (reported for traffic and the watch's probes).
        metrics_url: Triton's metrics endpoint (reported for the watch; read for memory and pending requests).
        auto_complete: whether the Triton completes model configs (False: ``--disable-auto-complete-config``).
        shim: serve ONNX leaves through the python-backend onnxruntime shim (a CPU Triton).
        poll_s: how often it reads the plan and checks its Triton.
        heartbeat_s: how often it publishes its state when nothing changes.
        memory_budget: bytes its server may use for models (None: Triton's metrics say what is free).
        drain_grace_s: in place, how long it reports not ready before it looks at pending requests.
    """

    name: str
    channel: str
    url: str
    metrics_url: str | None = None
    auto_complete: bool = True
    shim: bool = False
    poll_s: float = 1.0
    heartbeat_s: float = 2.0
    memory_budget: int | None = None
    drain_grace_s: float = 1.0

    def __post_init__(self) -> None:
        check_server_name(self.name)


@dataclass
class _Served:
    """What the agent knows its server serves."""

    release: str | None = None
    pins: dict[str, int] | None = None
    kept: str | None = None  # the release loaded beside it (side by side), for the memory figures


class Agent:
    """One serving agent (see the module docstring).

    Args:
        config: its options.
        store: the model store (plan, pointer, releases, its state).
        control: its Triton (:class:`~.control.GrpcTriton`, or a fake one).
        repository: its Triton's repository (:class:`~.server_repo.FolderRepository`, or a fake one).
        cache: its content cache.
    """

    def __init__(self, config: AgentConfig, store: ModelStore, control: TritonControl, repository: ModelRepository,
                 cache: ReleaseCache) -> None:
        self.config, self.store, self.control, self.repository, self.cache = config, store, control, repository, cache
        self.state = AgentState(config.name, config.channel, config.url, config.metrics_url,
                                auto_complete=config.auto_complete, shim=config.shim, heartbeat_s=config.heartbeat_s,
                                started_at=utcnow())
        self.ready_url: str | None = None
        self._served = _Served()
        self._draining = False
        self._lock = threading.Lock()
        self._published_at = 0.0
        self._dirty = True
        self._entry: str | None = None  # the entry model of the release it serves (what a probe asks Triton about)
        self._footprints: dict[str, int | None] = {}
        self._memory_of: tuple[str | None, str | None] | None = None
        #: (release, plan generation, its files, the entry's pins) it serves, verified at the last poll
        self._settled: tuple[str, int, ReleaseFiles, dict[str, int] | None] | None = None

    # ---- readiness --------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether the server should get traffic: its Triton live, serving a whole release, not draining."""
        with self._lock:
            return self.state.ready

    def probe(self) -> bool:
        """:attr:`ready`, with Triton asked now whether the entry model it serves is ready: a killed Triton, or one
        started again and empty, is not ready at the next probe, before the agent's next poll has seen it."""
        entry = self._entry
        return self.ready and entry is not None and self.control.is_ready(entry)

    # ---- the loop ---------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Reconcile about every ``poll_s`` until ``stop`` is set; an error is recorded, never raised.

        Each wait is drawn from 0.9 to 1.1 times ``poll_s`` (:func:`jittered`): agents started together do
        not read the store in step, and a poll's work on a shared machine does not keep time with anything
        else periodic there (a canary's windows of half a second, in pairs of one second).
        """
        while not stop.is_set():
            self.step()
            stop.wait(jittered(self.config.poll_s))

    def step(self) -> None:
        """One reconciliation (the loop's body; tests call it directly)."""
        try:
            self._reconcile()
        except ModelReleaseError as exc:
            self._set(ready=False if self._served.release is None else self.state.ready, state="failed",
                      error={"release": self.state.target, "generation": self.state.generation, "message": exc.message})
            log.warning("agent %s: %s", self.config.name, exc.message)
        except Exception as exc:  # noqa: BLE001 - the agent keeps serving whatever happened; the state says what
            self._set(state="failed", error={"release": self.state.target, "generation": self.state.generation,
                                             "message": f"{type(exc).__name__}: {exc}"})
            log.exception("agent %s: unexpected error", self.config.name)
        self._publish()

    def _reconcile(self) -> None:
        if not self.control.live():
            self._served, self._settled = _Served(), None
            self._set(ready=False, state="triton down", release=None, versions={})
            return
        plan = read_plan(self.store, self.config.channel)
        desired, generation = self._desired(plan)
        if desired is None:
            self._set(ready=False, state="no release", generation=generation)
            return
        if self._still(desired, generation):  # the common poll: nothing moved, its Triton still serves it
            return
        vmap = read_versions(self.store, self.config.channel)
        if not vmap.release_versions(desired):
            self._number(desired)
            vmap = read_versions(self.store, self.config.channel)
        release = self.cache.prepare(desired, vmap.release_versions(desired))
        pins = served_pins(self.control, release.entry, release.is_ensemble(release.entry))
        actual = identify(vmap, pins, desired)
        if actual != self._served.release or pins != self._served.pins:
            self._served = _Served(actual, pins, self._served.kept if actual == self._served.release else None)
        serving = actual not in (None, "unknown")
        self._set(generation=generation, target=desired, release=actual if serving else None)
        if pins == wanted_state(release):
            self._set(ready=True, state="serving")
            self._settled, self._entry = (desired, generation, release, pins), release.entry
            return
        failed = self.state.failed_on(desired, generation)
        if failed is not None:  # not again until the plan moves; a server left with nothing serves the old release
            fallback = plan.default if plan and plan.default != desired else (plan.previous if plan else None)
            if serving or not fallback:
                self._set(ready=serving, state="failed" if not serving else "serving")
                return
            release = self.cache.prepare(fallback, vmap.release_versions(fallback))
        self._converge(release, vmap, plan, generation, serving)

    def _still(self, desired: str, generation: int) -> bool:
        """Whether the release it settled on last is still the one wanted and its Triton's entry still serves it
        (one call to the Triton, no store read beyond the plan's: what a poll costs when nothing moves)."""
        if self._settled is None or self._settled[:2] != (desired, generation):
            return False
        release, wanted = self._settled[2], self._settled[3]
        if served_pins(self.control, release.entry, release.is_ensemble(release.entry)) != wanted:
            self._settled = None
            return False
        return True

    def _desired(self, plan: Plan | None) -> tuple[str | None, int]:
        """The plan's release for this server; with no plan yet (no roll-out ever ran on the channel), what it
        serves, or the pointer's release when it serves nothing (a promotion alone never moves a serving agent)."""
        if plan is not None:
            return plan.desired(self.config.name), plan.generation
        if self._served.release not in (None, "unknown"):
            return self._served.release, 0
        pointer = self.store.read_pointer(self.config.channel)
        return (pointer.release_id if pointer else None), 0

    def _number(self, release_id: str) -> None:
        """Serving numbers for a release no roll-out numbered (the pointer's, with no plan yet)."""
        got = self.store.read_manifest(release_id)
        if got is not None:
            assign_versions(self.store, self.config.channel, release_id, got[0])

    def _converge(self, release: ReleaseFiles, vmap: VersionMap, plan: Plan | None, generation: int,
                  serving: bool) -> None:
        swap = plan.swap if plan is not None else SIDE_BY_SIDE
        rule = WarmupRule.from_doc(plan.warmup if plan is not None else None)
        drain = Drain(self._leave, self.control.pending_requests, grace_s=self.config.drain_grace_s,
                      bound_s=plan.drain_s if plan is not None else 10.0)
        before = self._served.release if serving else None
        self._set(state="converging", target=release.release_id, ready=serving)
        self._publish(force=True)
        try:
            outcome = converge(self.control, self.repository, release, read_versions(self.store, self.config.channel),
                               swap=swap, warmup=rule.check if rule and rule.active else None,
                               drain=drain if serving else None)
        except ModelReleaseError as exc:
            self._draining = False
            if swap == IN_PLACE and before and before != release.release_id:
                self._restore(before, vmap)
            self._set(error={"release": release.release_id, "generation": generation, "message": exc.message},
                      state="failed", ready=self._served.release is not None)
            log.warning("agent %s: %s", self.config.name, exc.message)
            return
        self._draining = False
        kept = before if swap == SIDE_BY_SIDE and before != release.release_id else None
        self._served = _Served(release.release_id, wanted_state(release), kept)
        self._settled = (release.release_id, generation, release, self._served.pins)
        self._entry = release.entry
        self._set(ready=True, state="serving", release=release.release_id, error=None,
                  last={"release": release.release_id, "before": outcome.before, "outcome": outcome.outcome,
                        "seconds": outcome.seconds, "generation": generation,
                        "steps": [vars(s) for s in outcome.steps]})

    def _restore(self, release_id: str, vmap: VersionMap) -> None:
        """In place, after the new release failed: load the old one again (best effort; the state says how it went)."""
        try:
            old = self.cache.prepare(release_id, vmap.release_versions(release_id))
            converge(self.control, self.repository, old, read_versions(self.store, self.config.channel))
            self._served = _Served(release_id, wanted_state(old))
        except ModelReleaseError as exc:
            self._served = _Served()
            log.warning("agent %s: could not load %s again after a failed in-place swap: %s", self.config.name,
                        release_id, exc.message)

    def _leave(self) -> None:
        """In place: stop reporting ready (and say so in the store) before the drain."""
        self._draining = True
        self._set(ready=False, state="draining")
        self._publish(force=True)

    def _memory(self) -> dict[str, Any] | None:
        """What the server has free for models now (read at each heartbeat, not at each poll)."""
        if self.config.memory_budget is not None:
            loaded = [(r, self._footprint(r)) for r in (self._served.release, self._served.kept) if r]
            return budget_headroom(self.config.memory_budget, loaded).to_doc()
        figures = self.control.memory()
        return Headroom(figures[0], figures[1], "Triton's metrics").to_doc() if figures else None

    def _versions(self) -> dict[str, list[int]]:
        """The READY versions per model (what the state reports at each heartbeat)."""
        if not self.control.live():
            return {}
        return {m: sorted(v for v, st in vs.items() if st == "READY") for m, vs in sorted(self.control.states().items())}

    def _footprint(self, release_id: str) -> int | None:
        if release_id not in self._footprints:
            self._footprints[release_id] = footprint((self.store.read_manifest(release_id) or ({}, b""))[0])
        return self._footprints[release_id]

    # ---- state ------------------------------------------------------------------------------
    def _set(self, **changes: Any) -> None:
        with self._lock:
            for key, value in changes.items():
                if getattr(self.state, key) != value:
                    setattr(self.state, key, value)
                    self._dirty = self._dirty or key not in ("memory", "versions")
            if self._draining and self.state.ready:
                self.state.ready, self._dirty = False, True

    def _publish(self, *, force: bool = False) -> None:
        """Write the state when it changed or a heartbeat is due (a store hiccup is retried at the next poll)."""
        self._set(ready_url=self.ready_url)
        due = time.monotonic() - self._published_at >= self.config.heartbeat_s
        if not (force or due or self._dirty):
            return
        try:
            loaded = (self._served.release, self._served.kept)
            if due or self.state.memory is None or loaded != self._memory_of:  # a new release: new figures at once
                self._set(memory=self._memory(), repository_problem=self.repository.check(), versions=self._versions())
                self._memory_of = loaded
            publish(self.store, self.state)
        except ModelReleaseError as exc:
            log.warning("agent %s: could not publish its state: %s", self.config.name, exc.message)
            return
        self._dirty, self._published_at = False, time.monotonic()


def jittered(poll_s: float, draw: Callable[[], float] = random.random) -> float:
    """A wait of about ``poll_s``: uniform over 0.9 to 1.1 times it (the mean stays ``poll_s``).

    Narrow on purpose: a step waits for the last of its agents to read the plan, so the longest wait,
    not the mean, is what a roll-out step pays (1.1 ``poll_s`` here, against 1.5 with a spread of half).
    """
    return poll_s * (0.9 + 0.2 * draw())


def local_agent(config: AgentConfig, store: ModelStore, grpc_url: str, repository: Path, cache: Path) -> Agent:
    """An agent for a real Triton: gRPC control, its repository folder, a content cache folder."""
    from .control import GrpcTriton
    from .server_repo import FolderRepository

    control = GrpcTriton(config.name, grpc_url, config.metrics_url)
    return Agent(config, store, control, FolderRepository(Path(repository)), ReleaseCache(store, cache, shim=config.shim))

