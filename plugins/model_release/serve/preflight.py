"""What a roll-out checks before it moves anything: every member, the release, the memory, the metrics.

Each check refuses with :class:`~.errors.RolloutStopped` (a metrics endpoint: ``ServiceUnavailable``)
naming the server and what to do, and the plan is not written: no server changes.

- **members**: at least one agent of the channel has a heartbeat; none reports its Triton down or
  its repository unusable (a server that is broken for good leaves the fleet when its agent stops:
  it is silent after ``serve.rollout.silent_after_s``);
- **auto-complete**: a release whose models need Triton to complete their configuration is refused
  for servers that run without it (they would serve the configs as written, not what the canary judged);
- **memory** (side by side): each member has the new release's footprint free beside what it serves
  (:mod:`.memory`);
- **metrics** (watched roll-outs): every member's metrics endpoint answers Prometheus text, so the
  watch cannot find one unreachable after the first step switched.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..store.model_store import ModelStore
from .converge import SIDE_BY_SIDE
from .errors import RolloutStopped
from .membership import AgentState
from .memory import footprint, side_by_side_problems

#: agent states that make a member unfit for a roll-out
UNFIT = ("triton down",)


def check_members(channel: str, members: Sequence[AgentState], silent: Sequence[AgentState], silent_after_s: float) -> None:
    """Refuse a fleet with no member, or with a member whose Triton is down or whose repository is unusable."""
    if not members:
        named = f" (silent: {[s.name for s in silent]})" if silent else ""
        raise RolloutStopped(f"channel {channel!r} has no serving agent with a heartbeat in the last {silent_after_s:g} s"
                             f"{named}: start `model-release serve-agent --channel {channel}` beside each serving Triton")
    unfit = [f"{s.name} ({s.state}{': ' + str((s.error or {}).get('message')) if s.state == 'failed' else ''})"
             if not s.repository_problem else f"{s.name} (its repository: {s.repository_problem})"
             for s in members if s.state in UNFIT or s.repository_problem]
    if unfit:
        raise RolloutStopped(f"servers {unfit} cannot take a release now; start their Triton again (its agent loads the "
                             "current release and reports ready), or stop their agent so they leave the fleet "
                             f"(silent after {silent_after_s:g} s), then rerun the roll-out")


def check_auto_complete(store: ModelStore, release_id: str, manifest: dict[str, Any],
                        members: Sequence[AgentState]) -> str | None:
    """Why the release cannot go to the members that run without auto-complete, or None."""
    strict = [s.name for s in members if not s.auto_complete]
    if not strict:
        return None
    from ..triton.shim import auto_complete_needed

    with tempfile.TemporaryDirectory(prefix="rollout-configs-") as tmp:
        _fetch_configs(store, release_id, manifest, Path(tmp))
        why = auto_complete_needed(Path(tmp) / "models")
    if why is None:
        return None
    return (f"servers {strict} run with --disable-auto-complete-config (their agents say auto_complete false) and "
            f"release {release_id!r} needs Triton to complete a model configuration: {why}")


def _fetch_configs(store: ModelStore, release_id: str, manifest: dict[str, Any], dest: Path) -> None:
    """The release's config.pbtxt and model.py files (what the auto-complete check reads), verified."""
    from ..errors import ChecksumMismatch

    prefix = store.release_prefix(release_id)
    for path, entry in sorted(manifest.get("files", {}).items()):
        if not path.startswith("models/") or not path.endswith(("config.pbtxt", "model.py")):
            continue
        got = store.backend.get_bytes(prefix + path)
        if got is None or hashlib.sha256(got[0]).hexdigest() != entry["sha256"]:
            raise ChecksumMismatch(f"release {release_id!r} in {store.uri}: {path} is missing or differs from release.json; "
                                   "the stored release is damaged (see `model-release store verify`)")
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(got[0])


def check_memory(store: ModelStore, release_id: str, manifest: dict[str, Any], members: Sequence[AgentState],
                 swap: str) -> tuple[list[str], str]:
    """(the members that cannot hold the release beside what they serve, what was checked) for a side-by-side roll-out."""
    if swap != SIDE_BY_SIDE:
        return [], "memory: not checked (swap in_place: each server unloads the old release before it loads the new)"
    need = footprint(manifest)
    if need is None:
        return [], (f"memory: not checked ({release_id} has no footprint in its manifest: its canary recorded none)")
    olds = {s.release for s in members if s.release and s.release != release_id}
    footprints = {old: footprint((store.read_manifest(old) or ({}, b""))[0]) for old in olds}
    problems = side_by_side_problems(members, release_id, need, footprints)
    unknown = [s.name for s in members if (s.memory or {}).get("free_bytes") is None]
    note = f"memory: {len(members) - len(unknown)} server(s) checked for {need} bytes free"
    return problems, note + (f"; {unknown} report no free memory (not checked)" if unknown else "")


def check_metrics(members: Sequence[AgentState], read: Callable[[Any], Any]) -> None:
    """Read every member's metrics endpoint once (``read`` raises ServiceUnavailable naming the server)."""
    from .guard import watched

    for state in members:
        read(watched(state.server()))
