"""The servers of a channel's fleet as the roll-out, the watch and traffic see them.

A fleet is not declared anywhere: each serving Triton has an agent beside it
(``model-release serve-agent``) that registers the server in the store by its heartbeat
(:mod:`.membership`); the fleet of a channel is its members now. A :class:`Server` is what an
agent reports about its Triton: its HTTP endpoint (traffic and the watch's probes), its metrics
endpoint (the watch), its agent's readiness endpoint (a load balancer's, and the pod's readiness
probe), and whether it completes model configs (``auto_complete``: false for a Triton started with
``--disable-auto-complete-config``; the roll-out then refuses, before any server changes, a release
whose models need Triton to complete their configuration). No credential belongs in any of these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Server:
    """One serving Triton, as its agent reports it."""

    name: str
    url: str
    metrics_url: str | None = None
    ready_url: str | None = None
    auto_complete: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Fleet:
    """The servers of one channel, by name."""

    channel: str
    servers: tuple[Server, ...]

    def names(self) -> list[str]:
        return [s.name for s in self.servers]

    def server(self, name: str) -> Server:
        """The server named ``name`` (KeyError when it is not a member)."""
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(name)
