"""The desired state of a channel's serving fleet: the plan every serving agent follows.

``serving/<channel>/plan.json``::

    {"format": 1, "channel": "production", "generation": 7,
     "release": "iris-r2", "previous": "iris-r1",        # what the roll-out moves to, and from
     "default": "iris-r1",                                # what every server not named serves (a joining one too)
     "servers": {"serve-1": "iris-r2"},                   # the servers the steps so far moved
     "swap": "side_by_side", "drain_s": 10,               # how the agents swap (serve.rollout)
     "warmup": {"requests": 3, "first_request_limit_ms": 80.0},
     "rollout": {"seq": 12, "step": 1, "of": 2, "run": "..."}, "updated_at": "...", "updated_by": "..."}

Only a roll-out writes it (holding the channel's lease), each time by a conditional write
(``If-Match`` the etag it read, ``If-None-Match`` for the first), and each write bumps
``generation``, which the agents echo in their state when they act on it. A roll-out's step names
the step's servers; a finished roll-out names none and makes its release the default; a stopped
one keeps the servers that switched and names none that failed (they keep the default, the old
release); a rollback makes the previous release the default again. Without a plan (no roll-out
ever ran on the channel) an agent serves the release the channel pointer names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConflictError, StoreError
from ..store import keys
from ..store.backend import PreconditionFailed
from ..store.documents import actor, dumps, utcnow
from ..store.model_store import ModelStore

FORMAT = 1


@dataclass
class Plan:
    """The plan as read (with its etag, for the next conditional write)."""

    channel: str
    generation: int = 0
    release: str | None = None
    previous: str | None = None
    default: str | None = None
    servers: dict[str, str] = field(default_factory=dict)
    swap: str = "side_by_side"
    drain_s: float = 10.0
    warmup: dict[str, Any] | None = None
    rollout: dict[str, Any] | None = None
    etag: str | None = None

    def desired(self, server: str) -> str | None:
        """The release ``server`` is to serve."""
        return self.servers.get(server, self.default)

    def to_doc(self) -> dict[str, Any]:
        return {"format": FORMAT, "channel": self.channel, "generation": self.generation, "release": self.release,
                "previous": self.previous, "default": self.default, "servers": dict(sorted(self.servers.items())),
                "swap": self.swap, "drain_s": self.drain_s, "warmup": self.warmup, "rollout": self.rollout,
                "updated_at": utcnow(), "updated_by": actor()}


def plan_key(channel: str) -> str:
    return keys.serving_plan_key(channel)


def read_plan(store: ModelStore, channel: str) -> Plan | None:
    """The channel's plan, or None when no roll-out ever wrote one.

    Raises:
        StoreError: the stored document is not a plan of this format.
    """
    got = store.read_json(plan_key(channel))
    if got is None:
        return None
    doc, etag = got
    if doc.get("format") != FORMAT or not isinstance(doc.get("servers"), dict):
        raise StoreError(f"{store.uri}/{plan_key(channel)} is not a serving plan of format {FORMAT} (keys {sorted(doc)}); "
                         "it was not written by model-release or is damaged: delete it and rerun the roll-out")
    return Plan(channel, int(doc.get("generation", 0)), doc.get("release"), doc.get("previous"), doc.get("default"),
                {str(k): str(v) for k, v in doc["servers"].items()}, str(doc.get("swap", "side_by_side")),
                float(doc.get("drain_s", 10.0)), doc.get("warmup"), doc.get("rollout"), etag)


def write_plan(store: ModelStore, plan: Plan) -> Plan:
    """Write ``plan`` as the next generation, conditionally on the etag it was read with; returns it updated.

    Raises:
        ConflictError: the plan changed since it was read (another roll-out moved it: the lease was lost).
    """
    plan.generation += 1
    try:
        if plan.etag is None:
            plan.etag = store.backend.put_bytes(plan_key(plan.channel), dumps(plan.to_doc()), if_none_match=True)
        else:
            plan.etag = store.backend.put_bytes(plan_key(plan.channel), dumps(plan.to_doc()), if_match=plan.etag)
    except PreconditionFailed:
        plan.generation -= 1
        raise ConflictError(f"the serving plan {store.uri}/{plan_key(plan.channel)} changed while this roll-out held the "
                            "lease: another roll-out moved it; stop and rerun once it is done") from None
    return plan


def step_counts(sizes: Sequence[tuple[int | None, float | None]], fleet_size: int) -> list[int]:
    """How many servers serve the new release once each step is done (cumulative, never decreasing).

    Args:
        sizes: per step ``(servers, percent)``, exactly one of them set (``serve.rollout.steps``).
        fleet_size: the number of member servers.
    """
    out: list[int] = []
    for servers, percent in sizes:
        n = servers if servers is not None else math.ceil(fleet_size * float(percent or 0) / 100 - 1e-9)
        out.append(min(fleet_size, max(out[-1] if out else 0, max(1, int(n)))))
    return out
