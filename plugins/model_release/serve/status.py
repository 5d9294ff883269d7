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


def status_text(doc: dict[str, Any]) -> str:
    """:func:`fleet_status` for a person at a terminal: the pointer and plan, then one line per server."""
    from ..safe_text import one_line

    plan = doc.get("plan") or {}
    lines = [f"channel {doc['channel']}: pointer {doc.get('pointer') or '-'}, plan "
             + (f"generation {plan.get('generation')} release {plan.get('release') or '-'}" if plan else "none yet")]
    if doc.get("split"):
        lines.append(f"  split: {one_line(str(doc['split']))}")
    if not doc.get("servers"):
        lines.append("  no serving agent has a heartbeat in the store")
    for row in doc.get("servers") or []:
        state = "silent" if row.get("silent") else "ready" if row.get("ready") else "not ready"
        drift = f" (wants {row.get('desired')})" if row.get("drift") else ""
        error = f"; last error: {one_line(str(row['error']))}" if row.get("error") else ""
        lines.append(f"  {one_line(str(row.get('server')))}: {row.get('release') or '-'}{drift}, {state}{error}")
    return "\n".join(lines)


def serving_gap(doc: dict[str, Any]) -> str | None:
    """Why the fleet :func:`fleet_status` describes does not yet serve what it should (None: it does).

    Served means: at least one agent with a heartbeat, and every such agent ready on the release the
    plan (or, before any roll-out, the channel pointer) names for it.
    """
    live = [row for row in doc.get("servers") or [] if not row.get("silent")]
    if not doc.get("pointer"):
        return f"channel {doc.get('channel')!r} names no release yet"
    if not live:
        return "no serving agent has a heartbeat in the store"
    behind = [f"{row['server']} ({row.get('release') or 'nothing'}{', not ready' if not row.get('ready') else ''})"
              for row in live if row.get("drift") or not row.get("ready")]
    return f"not yet on the release: {', '.join(behind)}" if behind else None
