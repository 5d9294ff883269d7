"""Fleet status: per server, the release it serves, its readiness and drift from what the plan wants.

Read only, from the store: the channel pointer, the plan, and each agent's state (its heartbeat
tells members from silent agents). Nothing asks a server: its agent already said what it serves.
"""

from __future__ import annotations

from typing import Any

from ..store.model_store import ModelStore
from .membership import membership
from .plan import read_plan
from .rollout import split_message

#: an agent silent this long is shown as silent (serve.rollout.silent_after_s's default)
SILENT_AFTER_S = 30.0


def fleet_status(store: ModelStore, channel: str, *, silent_after_s: float = SILENT_AFTER_S) -> dict[str, Any]:
    """What every agent of ``channel`` serves, beside what the plan and the pointer want.

    Returns:
        ``{"channel", "pointer", "plan", "split", "servers": [{"server", "url", "release", "desired", "ready",
        "state", "drift", "silent", "error", "versions"}]}``.
    """
    pointer = store.read_pointer(channel)
    plan = read_plan(store, channel)
    fleet = membership(store, channel, silent_after_s=silent_after_s)
    rows = []
    for state in sorted([*fleet.members, *fleet.silent], key=lambda s: s.name):
        desired = plan.desired(state.name) if plan else (pointer.release_id if pointer else None)
        rows.append({"server": state.name, "url": state.url, "release": state.release, "desired": desired,
                     "ready": state.ready, "state": state.state, "drift": state.release != desired,
                     "silent": state in fleet.silent, "error": (state.error or {}).get("message"),
                     "versions": state.versions, "memory": state.memory})
    return {"channel": channel, "pointer": pointer.release_id if pointer else None,
            "plan": ({"generation": plan.generation, "release": plan.release, "default": plan.default,
                      "rollout": plan.rollout} if plan else None),
            "split": split_message(store, channel, silent_after_s), "servers": rows}
