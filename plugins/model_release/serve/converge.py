"""Make one Triton serve one release: what a serving agent does when its desired release changes.

Actual state: what the server reports (its repository index, and the versions its loaded entry
ensemble pins). Desired state: a release, its models numbered on the channel (:mod:`.versions`).

**Side by side** (``swap: side_by_side``, the default), the old release serving throughout:

1. models whose serving version is already READY are skipped (an unchanged model is neither
   copied nor loaded again);
2. each other model, leaves first, then BLS models: its version folder is put into the server's
   repository under its serving number, its config written with ``version_policy specific [old,
   new]`` and loaded with that config (over gRPC: :mod:`.control` says why); readiness of the new
   version is checked before the next model;
3. warm-up: a few requests straight to each new version; a first request slower than the canary's
   p99 times the spec's factor refuses the switch (:mod:`.warmup`);
4. the entry ensemble is loaded with its steps pinned to the new versions: the switch. Requests in
   flight finish on the old ensemble; every request is answered by one release.

The old release's versions stay loaded, so going back is a re-pin (only the entry is loaded).

**In place** (``swap: in_place``, for a model that needs more than half the server's memory): the
agent first stops reporting ready and drains (:class:`Drain`), then unloads the entry and every
model whose version changes, and loads the new release as above with only its own versions kept;
the agent reports ready again once the entry is switched.

**A refused load** leaves the server as it was: the new folder is removed, the previous config put
back, and the failed version, which Triton 2.51 keeps in its index as UNAVAILABLE (so strict
readiness answers not ready), is unloaded again by loading a copy of the serving version under its
number and unloading that (:func:`~.server_repo.copy_version`); then :class:`~.errors.LoadRefused`
is raised with Triton's words. Old version folders beyond the previous release are pruned.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .control import TritonControl
from .errors import LoadRefused, RolloutStopped
from .record import Step
from .server_repo import ModelRepository, ReleaseFiles, entry_config, member_config
from .versions import VersionMap

SIDE_BY_SIDE, IN_PLACE = "side_by_side", "in_place"
SWAPS = (SIDE_BY_SIDE, IN_PLACE)
UNCHANGED, SWITCHED = "unchanged", "switched"


@dataclass
class Drain:
    """How an in-place swap takes the server out: ``leave()`` stops its readiness, then in-flight requests
    finish (at least ``grace_s`` so balancers see it, at most ``bound_s``, while ``pending()`` says some are left)."""

    leave: Callable[[], None]
    pending: Callable[[], int | None]
    grace_s: float = 1.0
    bound_s: float = 10.0
    sleep: Callable[[float], None] = time.sleep

    def run(self) -> tuple[float, int | None]:
        """Leave, wait; the seconds waited and the requests still pending at the end (None: unknown)."""
        self.leave()
        t0, left = time.monotonic(), None
        self.sleep(self.grace_s)
        while time.monotonic() - t0 < self.bound_s:
            left = self.pending()
            if not left:
                break
            self.sleep(0.05)
        return time.monotonic() - t0, left


@dataclass
class Outcome:
    """What one convergence did: ``outcome`` (unchanged, switched), the release before, the steps."""

    release_id: str
    before: str | None
    outcome: str = UNCHANGED
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0


def identify(vmap: VersionMap, pins: dict[str, int] | None, prefer: str) -> str | None:
    """The release whose serving versions are exactly ``pins`` (``prefer`` first when several match)."""
    if not pins:
        return None
    matches = [r for r in vmap.release_ids() if all(vmap.version(m, r) == v for m, v in pins.items())]
    return prefer if prefer in matches else (sorted(matches)[-1] if matches else "unknown")


def served_pins(control: TritonControl, entry: str, ensemble: bool,
                states: dict[str, dict[int, str]] | None = None) -> dict[str, int] | None:
    """What the server's entry serves: its ensemble's step pins, or its highest READY version (what an
    unversioned request reaches); None when it serves nothing."""
    if ensemble:
        config = control.loaded_config(entry)
        return {s.model_name: int(s.model_version) for s in config.ensemble_scheduling.step} if config is not None else None
    ready = [v for v, state in (states if states is not None else control.states()).get(entry, {}).items() if state == "READY"]
    return {entry: max(ready)} if ready else None


def wanted_state(release: ReleaseFiles) -> dict[str, int]:
    """What the entry serves when it serves ``release``: its ensemble's step pins, or its own version."""
    if release.is_ensemble(release.entry):
        return {step.model_name: step.model_version for step in entry_config(release).ensemble_scheduling.step}
    return {release.entry: release.versions[release.entry]}


def wait_settled(control: TritonControl, model: str, timeout_s: float = 120) -> dict[int, str]:
    """Wait while a version of ``model`` is LOADING/UNLOADING (never touch a model while it loads)."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = control.states().get(model, {})
        if not any(s in ("LOADING", "UNLOADING") for s in states.values()) or time.monotonic() > deadline:
            return states
        time.sleep(0.05)


def converge(control: TritonControl, repo: ModelRepository, release: ReleaseFiles, vmap: VersionMap, *,
             swap: str = SIDE_BY_SIDE, warmup: Callable[..., float] | None = None,
             drain: Drain | None = None) -> Outcome:
    """Make the server serve ``release``; what it did.

    Raises:
        LoadRefused: Triton refused a load; the server serves what it served before (in place: nothing
            of the new release is loaded, the caller loads the old one again).
        RolloutStopped: the server stopped answering, or a warm-up refused the switch.
    """
    t0 = time.perf_counter()
    states = control.states()
    ensemble = release.is_ensemble(release.entry)
    serving_now = served_pins(control, release.entry, ensemble, states)
    before = identify(vmap, serving_now, release.release_id)
    out = Outcome(release.release_id, before)
    wanted = wanted_state(release)
    members = [m for m in release.members() if m != release.entry]
    if serving_now == wanted and all(states.get(m, {}).get(release.versions[m]) == "READY" for m in members):
        out.seconds = round(time.perf_counter() - t0, 3)
        return out
    repo.clean_partials()
    current = vmap.release_versions(before) if before not in (None, "unknown") else {}
    if swap == IN_PLACE and serving_now:
        _take_out(control, release, current, drain, out)
        current = {}
    fresh = [m for m in members if _load_member(control, repo, release, vmap, m, current, out)]
    if warmup is not None:
        for model in fresh:
            t = time.perf_counter()
            first = warmup(control, release, model, release.versions[model], release.config(model))
            out.steps.append(Step("warmup", model, release.versions[model], round(time.perf_counter() - t, 3),
                                  f"first request {first * 1000:.1f} ms"))
    if ensemble:
        _switch(control, repo, release, wanted, out)
    else:
        _switch_versioned(control, repo, release, vmap, out, keep_lower=swap != IN_PLACE)
    for model in members:
        repo.prune(model, {release.versions[model]} | ({current[model]} if model in current else set()))
    out.seconds = round(time.perf_counter() - t0, 3)
    return out


def _take_out(control: TritonControl, release: ReleaseFiles, current: dict[str, int], drain: Drain | None,
              out: Outcome) -> None:
    """In place: leave readiness, drain, unload the entry and every model whose version changes."""
    if drain is not None:
        waited, left = drain.run()
        out.steps.append(Step("drain", release.entry, 0, round(waited, 3),
                              "no request pending" if not left else f"{left} request(s) still pending at the bound"))
    changed = [m for m in release.members() if m != release.entry and current.get(m) != release.versions[m]]
    for model in [release.entry, *reversed(changed)]:
        t = time.perf_counter()
        if control.states().get(model):
            control.unload(model)
            wait_settled(control, model)
            out.steps.append(Step("unload", model, current.get(model, 0), round(time.perf_counter() - t, 3)))


def _load_member(control: TritonControl, repo: ModelRepository, release: ReleaseFiles, vmap: VersionMap, model: str,
                 current: dict[str, int], out: Outcome) -> bool:
    """Put and load one member's new version unless it is READY already; True when it was loaded."""
    version = release.versions[model]
    if control.states().get(model, {}).get(version) == "READY":  # a re-pin waits for nothing another load left unloading
        out.steps.append(Step("skip", model, version, detail="already loaded"))
        return False
    states = wait_settled(control, model)
    t = time.perf_counter()
    copied = repo.stage(release, model, vmap.digest(model, version))
    out.steps.append(Step("copy" if copied else "skip", model, version, round(time.perf_counter() - t, 3),
                          "" if copied else "folder in place"))
    old = current.get(model)
    keep = {version} | ({old} if old is not None and states.get(old) == "READY" else set())
    what = f"{model} version {version} of release {release.release_id}"
    seconds, previous = _load_kept(control, repo, release, model, keep, what=what,
                                   serving=old if old in keep else None, fresh=True)
    if not control.is_ready(model, version):
        _undo(control, repo, model, version, old if old in keep else None, previous)
        raise LoadRefused(f"server {control.name} loaded {what} but it is not READY; it keeps serving the release it "
                          "had: read the server's log")
    out.steps.append(Step("load", model, version, round(seconds, 3), f"serving versions {sorted(keep)}"))
    return True


def _load_kept(control: TritonControl, repo: ModelRepository, release: ReleaseFiles, model: str, keep: set[int], *,
               what: str, serving: int | None, fresh: bool) -> tuple[float, Any]:
    """Write ``model``'s config serving exactly ``keep`` and load it; (seconds, the config it had before).

    Raises:
        LoadRefused: Triton refused; a ``fresh`` new version was unloaded again (:func:`_undo`), the server
            serves ``serving`` as before.
    """
    previous = repo.read_config(model)
    config = member_config(release, model, keep)
    repo.write_config(model, config)
    try:
        return control.load(model, config), previous
    except LoadRefused as exc:
        if fresh:
            _undo(control, repo, model, release.versions[model], serving, previous)
        raise LoadRefused(f"server {control.name} refused to load {what}: {exc.message}; it keeps serving the release "
                          "it had" + (" (the failed version unloaded again)" if fresh else "")) from None


def _undo(control: TritonControl, repo: ModelRepository, model: str, version: int, old: int | None,
          previous: Any | None) -> None:
    """After a refused load: the new folder gone, the previous config back, the failed version unloaded again.

    Triton keeps the failed version in its index (UNAVAILABLE, its failure as the reason) until a load of
    that number succeeds: a copy of the serving version is loaded under it, then unloaded (see
    :func:`~.server_repo.copy_version`). Best effort: a server that stops answering meanwhile is left as it is.
    """
    failed = wait_settled(control, model).get(version) not in (None, "READY")
    if failed and old is not None and previous is not None:
        try:
            repo.copy_version(model, old, version)
            both = type(previous)()
            both.CopyFrom(previous)
            both.version_policy.specific.versions[:] = sorted({old, version})
            control.load(model, both)
            control.load(model, previous)
            wait_settled(control, model)
        except RolloutStopped:
            pass
    repo.drop_version(model, version, previous)


def _switch_versioned(control: TritonControl, repo: ModelRepository, release: ReleaseFiles, vmap: VersionMap,
                      out: Outcome, *, keep_lower: bool) -> None:
    """Switch an entry that is not an ensemble (a BLS router, a leaf): unversioned requests reach its
    highest READY version, so it serves exactly the new version and (side by side) only lower ones beside it
    (a rollback to a lower number unloads the higher one; the old versions it calls stay loaded)."""
    entry, version = release.entry, release.versions[release.entry]
    ready = sorted(v for v, state in wait_settled(control, entry).items() if state == "READY")
    t = time.perf_counter()
    if repo.stage(release, entry, vmap.digest(entry, version)):
        out.steps.append(Step("copy", entry, version, round(time.perf_counter() - t, 3)))
    keep = {version} | ({v for v in ready if v < version} if keep_lower else set())
    what = f"the entry {entry} version {version} of release {release.release_id}"
    seconds, _ = _load_kept(control, repo, release, entry, keep, what=what, serving=ready[-1] if ready else None,
                            fresh=version not in ready)
    now = sorted(v for v, state in control.states().get(entry, {}).items() if state == "READY")
    if not now or now[-1] != version:
        raise RolloutStopped(f"server {control.name}: after loading {what} its READY versions are {now}, so unversioned "
                             f"requests do not reach {version}")
    out.steps.append(Step("switch", entry, version, round(seconds, 3), f"serving versions {sorted(keep)}"))
    out.outcome = SWITCHED


def _switch(control: TritonControl, repo: ModelRepository, release: ReleaseFiles, target: dict[str, int],
            out: Outcome) -> None:
    """Load the entry ensemble with its steps pinned to the release's versions, and check it took."""
    repo.ensure_entry_folder(release.entry)
    config = entry_config(release)
    repo.write_config(release.entry, config)
    try:
        seconds = control.load(release.entry, config)
    except LoadRefused as exc:
        raise LoadRefused(f"server {control.name} refused the entry ensemble {release.entry} pinned to {target}: "
                          f"{exc.message}") from None
    pins = served_pins(control, release.entry, True)
    if pins != target:
        raise RolloutStopped(f"server {control.name}: after the switch the entry ensemble {release.entry} pins {pins}, "
                             f"not {target}")
    out.steps.append(Step("switch", release.entry, 1, round(seconds, 3), f"pins {target}"))
    out.outcome = SWITCHED
