"""Fleet status: per server, the release and versions it serves, readiness, drift from the pointer.

Read only: the pointer and version map from the store, the repository index and the entry
ensemble's pins from each server. A server that does not answer is reported as down, not raised.
"""

from __future__ import annotations

from typing import Any

from ..store.model_store import ModelStore
from .errors import RolloutStopped
from .fleet import Fleet
from .rollout import identify
from .triton_ops import ServingTriton
from .versions import read_versions


def fleet_status(store: ModelStore, fleet: Fleet, entry: str) -> dict[str, Any]:
    """What every server of ``fleet`` serves, beside what the channel pointer wants.

    Args:
        store: the model store.
        fleet: the channel's servers.
        entry: the entry model's name (the release's ``repository.entry_model``).

    Returns:
        ``{"channel", "desired", "servers": [{"server", "url", "release", "pins", "ready", "drift", "error"}]}``.
    """
    pointer = store.read_pointer(fleet.channel)
    desired = pointer.release_id if pointer else None
    vmap = read_versions(store, fleet.channel)
    rows = []
    for server in fleet.servers:
        row: dict[str, Any] = {"server": server.name, "url": server.url, "release": None, "pins": None,
                               "ready": False, "drift": True, "error": None}
        try:
            ops = ServingTriton(server, live_timeout_s=2)
        except RolloutStopped as exc:
            row["error"] = exc.message
            rows.append(row)
            continue
        try:
            states = ops.states()
            pins = ops.loaded_pins(entry) or None
            if not pins:  # an entry that is not an ensemble serves its highest READY version
                ready = [v for v, s in states.get(entry, {}).items() if s == "READY"]
                pins = {entry: max(ready)} if ready else None
            row["pins"] = pins
            row["release"] = identify(vmap, pins, desired or "")
            row["ready"] = bool(pins) and all(states.get(m, {}).get(v) == "READY" for m, v in (pins or {}).items())
            row["drift"] = row["release"] != desired
            row["versions"] = {m: sorted(v for v, s in vs.items() if s == "READY") for m, vs in sorted(states.items())}
        except RolloutStopped as exc:
            row["error"] = exc.message
        finally:
            ops.close()
        rows.append(row)
    return {"channel": fleet.channel, "desired": desired, "servers": rows}
