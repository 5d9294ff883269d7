"""Who is in a channel's serving fleet: each agent's state document, written by the agent, read by the roll-out.

``serving/<channel>/agents/<server>.json``, written by the agent beside each Triton at every
heartbeat and every change (never read-modify-write: one writer per key)::

    {"format": 1, "name": "serve-1", "channel": "production",
     "url": "10.0.0.5:8000",                         # Triton's HTTP endpoint, for traffic and probes
     "metrics_url": "http://10.0.0.5:8002/metrics", "ready_url": "http://10.0.0.5:8090/ready",
     "auto_complete": false, "shim": true,
     "release": "iris-r1", "ready": true,           # the release its entry serves, and its readiness
     "state": "serving",                            # starting, converging, draining, serving, failed, triton down
     "target": "iris-r2", "generation": 7,          # the release it was last told to serve, and the plan's generation
     "versions": {"iris_model": [1, 2]},            # READY versions per model
     "error": {"release": "iris-r2", "generation": 7, "message": "..."} | null,
     "last": {"release": "iris-r2", "outcome": "switched", "seconds": 1.2, "steps": [...]},
     "memory": {"total_bytes": ..., "used_bytes": ..., "free_bytes": ..., "how": "..."},
     "repository_problem": null,                    # or why its repository cannot be written
     "heartbeat": 1767225600.25, "heartbeat_s": 2.0, "started_at": "..."}

A member is an agent whose heartbeat is at most ``silent_after_s`` old (the writer's clock: the
threshold is tens of seconds, well above the clock skew of servers kept by NTP); the others are
silent, named in a roll-out's record and never waited for.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..names import is_name
from ..store import keys
from ..store.documents import dumps
from ..store.model_store import ModelStore
from .fleet import Fleet, Server

FORMAT = 1


def check_server_name(name: str) -> str:
    """``name`` if it can name a server (letters, digits, '_' and '-', starting with a letter, at most 64).

    Raises:
        SpecError: it cannot (the message says what is valid).
    """
    if not is_name(name):
        from ..errors import SpecError

        raise SpecError(f"server name {name!r} is not valid: use letters, digits, '_' and '-', starting with a letter "
                        "(at most 64), for example serve-1 or the pod's name")
    return name


@dataclass
class AgentState:
    """One agent's state document (see the module docstring for each field)."""

    name: str
    channel: str
    url: str
    metrics_url: str | None = None
    ready_url: str | None = None
    auto_complete: bool = True
    shim: bool = False
    release: str | None = None
    ready: bool = False
    state: str = "starting"
    target: str | None = None
    generation: int = 0
    versions: dict[str, list[int]] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    last: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    repository_problem: str | None = None
    heartbeat: float = 0.0
    heartbeat_s: float = 2.0
    started_at: str | None = None

    def to_doc(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> "AgentState":
        known = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def server(self) -> Server:
        """The server as the roll-out and the watch see it."""
        return Server(self.name, self.url, self.metrics_url, self.ready_url, self.auto_complete)

    def silent(self, silent_after_s: float, now: float | None = None) -> bool:
        """Whether its heartbeat is older than ``silent_after_s``."""
        return (now if now is not None else time.time()) - self.heartbeat > silent_after_s

    def failed_on(self, release: str, generation: int) -> str | None:
        """Its error message when it failed to serve ``release`` at plan ``generation`` or later, else None."""
        error = self.error or {}
        if error.get("release") == release and int(error.get("generation", -1)) >= generation:
            return str(error.get("message"))
        return None


def publish(store: ModelStore, state: AgentState) -> None:
    """Write the agent's state (its heartbeat stamped now)."""
    state.heartbeat = time.time()
    store.backend.put_bytes(keys.serving_agent_key(state.channel, check_server_name(state.name)), dumps(state.to_doc()))


def read_states(store: ModelStore, channel: str) -> list[AgentState]:
    """Every agent state of ``channel`` (members and silent ones), by name."""
    prefix = keys.serving_agents_prefix(channel)
    states = []
    for info in store.backend.list(prefix):
        if not info.key.endswith(".json"):
            continue
        got = store.read_json(info.key)
        if got is not None and got[0].get("format") == FORMAT:
            states.append(AgentState.from_doc(got[0]))
    return sorted(states, key=lambda s: s.name)


def forget(store: ModelStore, channel: str, name: str) -> None:
    """Remove an agent's state (a server taken out of the fleet for good)."""
    store.backend.delete([keys.serving_agent_key(channel, check_server_name(name))])


@dataclass(frozen=True)
class Membership:
    """The channel's agents split by their heartbeat: ``members`` serve, ``silent`` ones are only named."""

    channel: str
    members: tuple[AgentState, ...]
    silent: tuple[AgentState, ...]

    @property
    def fleet(self) -> Fleet:
        return Fleet(self.channel, tuple(s.server() for s in self.members))

    def by_name(self) -> dict[str, AgentState]:
        return {s.name: s for s in self.members}


def membership(store: ModelStore, channel: str, *, silent_after_s: float, now: float | None = None) -> Membership:
    """The channel's members and silent agents now."""
    states = read_states(store, channel)
    now = time.time() if now is None else now
    return Membership(channel, tuple(s for s in states if not s.silent(silent_after_s, now)),
                      tuple(s for s in states if s.silent(silent_after_s, now)))
