"""The roll-out's record, kept in the store: who, which run, steps, each server's outcome and timings.

``rollouts/<channel>/<seq>.json`` (``seq`` from 1, written ``If-None-Match`` so two records never
share a number). Each server's entry carries the step it was moved in (``wave``: the step number,
the name the channel page reads), the release it served before and after, and what its agent did
(copy, load, warmup, switch, skip, drain, unload, with seconds). The watch adds its figures per step;
``silent`` names the agents that were not members (no heartbeat) and ``split`` says which servers
serve which release when the roll-out ended with the fleet split.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..store import keys
from ..store.backend import PreconditionFailed
from ..store.documents import actor, dumps, utcnow
from ..store.model_store import ModelStore


def record_prefix(channel: str) -> str:
    return keys.rollouts_prefix(channel)


@dataclass
class Step:
    """One thing done on one server: ``copy``, ``load``, ``warmup``, ``switch``, ``skip``, ``drain`` or ``unload``."""

    action: str
    model: str
    version: int
    seconds: float = 0.0
    detail: str = ""


@dataclass
class ServerRecord:
    server: str
    wave: int
    before: str | None = None
    after: str | None = None
    outcome: str = "pending"  # switched, unchanged, failed, silent, timed out, not reached
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


@dataclass
class RolloutRecord:
    """What one roll-out did (saved whole at the end, and after each server)."""

    channel: str
    release_id: str
    versions: dict[str, int]
    run: str | None = None
    who: str = field(default_factory=actor)
    started_at: str = field(default_factory=utcnow)
    finished_at: str | None = None
    outcome: str = "running"  # done, stopped, rolled back
    serving: str = ""  # how the fleet serves the leaves (the CPU shim, or native backends)
    servers: list[ServerRecord] = field(default_factory=list)
    seq: int | None = None
    watch: list[dict[str, Any]] = field(default_factory=list)  # filled by the watch, per wave
    reason: str | None = None  # why it stopped ("rolled back by the watch: error rate 4.1% against 0.0%, limit 1%")
    rolled_back: list[ServerRecord] = field(default_factory=list)  # the servers the watch re-pinned to the old release
    pointer_back: dict[str, Any] | None = None  # the channel pointer's move back (store.channels.rollback's result)
    steps: list[dict[str, Any]] = field(default_factory=list)  # per step: servers, new servers, budget, failed
    silent: list[str] = field(default_factory=list)  # agents without a heartbeat: named, not waited for
    checks: list[str] = field(default_factory=list)  # what was checked before the first step (and what could not be)
    split: str | None = None  # "the fleet is split: iris-r2 on [...]; iris-r1 on [...]" when it ended split
    _t0: float = field(default_factory=time.monotonic, repr=False)

    def to_doc(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.pop("_t0")
        doc["seconds"] = round(time.monotonic() - self._t0, 3)
        return doc


def save_record(store: ModelStore, record: RolloutRecord) -> None:
    """Write the record under its number (taking the next free one the first time)."""
    prefix = record_prefix(record.channel)
    if record.seq is not None:
        store.backend.put_bytes(f"{prefix}{record.seq:06d}.json", dumps(record.to_doc()))
        return
    taken = [int(o.key[len(prefix):-5]) for o in store.backend.list(prefix) if o.key[len(prefix):-5].isdigit()]
    seq = max([0, *taken]) + 1
    while True:
        try:
            record.seq = seq
            store.backend.put_bytes(f"{prefix}{seq:06d}.json", dumps(record.to_doc()), if_none_match=True)
            return
        except PreconditionFailed:
            seq += 1


def read_records(store: ModelStore, channel: str) -> list[dict[str, Any]]:
    """Every roll-out record of ``channel``, oldest first."""
    prefix = record_prefix(channel)
    keys = sorted(o.key for o in store.backend.list(prefix) if o.key.endswith(".json"))
    return [got[0] for key in keys if (got := store.read_json(key)) is not None]
