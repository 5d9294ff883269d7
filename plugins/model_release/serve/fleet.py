"""Which serving Tritons serve which channel: the fleet, declared once.

A fleet file (JSON; the local stack writes one, ``MODEL_RELEASE_FLEET`` names it)::

    {"channels": {"production": [
        {"name": "serve-1", "url": "127.0.0.1:8000", "repository": "/srv/serve-1/models",
         "metrics_url": "http://127.0.0.1:8002/metrics", "auto_complete": false}]}}

``url`` is Triton's HTTP endpoint (``host:port``), ``repository`` the server's own model
repository (a local folder the roll-out writes; the server was started on it in explicit mode).
``auto_complete`` (default true, Triton's own default) is false for a server started with
``--disable-auto-complete-config``: the roll-out then refuses, before any server changes, a release
whose models need Triton to complete their configuration (the local stack's servers run so: a
python model loads in about 0.25 s instead of 1.5-2 s).
In Airflow the same servers are connections shaped like ``triton_canary`` (host, port, extra
``{"repository": ..., "metrics_url": ..., "auto_complete": ...}``) and the fleet list per channel names them. No
credential belongs in a fleet file or a spec.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError

FLEET_ENV = "MODEL_RELEASE_FLEET"


@dataclass(frozen=True)
class Server:
    """One serving Triton."""

    name: str
    url: str
    repository: str
    metrics_url: str | None = None
    auto_complete: bool = True  # False: started with --disable-auto-complete-config (no backend fills a config in)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Fleet:
    """The servers of one channel, in roll-out order (the first is the first wave)."""

    channel: str
    servers: tuple[Server, ...]

    def waves(self) -> list[tuple[Server, ...]]:
        """One server first, then the rest: a wave that fails stops before the others."""
        return [self.servers[:1], self.servers[1:]] if len(self.servers) > 1 else [self.servers]


def server_from_doc(doc: Any, where: str) -> Server:
    """One server from its fleet-file entry (what :meth:`Server.to_dict` wrote).

    Raises:
        SpecError: the entry lacks a key, has an unknown one, or an auto_complete that is not a boolean.
    """
    if not isinstance(doc, dict) or not {"name", "url", "repository"} <= set(doc):
        raise SpecError(f"{where}: a server needs name, url and repository (got {doc!r}); "
                        'for example {"name": "serve-1", "url": "127.0.0.1:8000", "repository": "/srv/models"}')
    unknown = set(doc) - {"name", "url", "repository", "metrics_url", "auto_complete"}
    if unknown:
        raise SpecError(f"{where}: unknown server keys {sorted(unknown)}; valid: name, url, repository, metrics_url, "
                        "auto_complete (credentials never go in a fleet file)")
    from ..triton.local import declared_auto_complete  # here: the fleet's readers need no Triton launcher

    completes = declared_auto_complete(doc.get("auto_complete", True), f"{where}: server {doc['name']!r} has auto_complete")
    return Server(str(doc["name"]), str(doc["url"]), str(doc["repository"]), doc.get("metrics_url"), completes)


def parse_fleet(doc: Any, channel: str, *, where: str = "fleet") -> Fleet:
    """The fleet of ``channel`` from a fleet document.

    Raises:
        SpecError: the document is not a fleet, or has no server for ``channel``.
    """
    channels = doc.get("channels") if isinstance(doc, dict) else None
    if not isinstance(channels, dict):
        raise SpecError(f'{where} is not a fleet document (no "channels" object)')
    servers = channels.get(channel)
    if not servers:
        raise SpecError(f"{where} has no server for channel {channel!r}; it has channels {sorted(channels)}")
    fleet = Fleet(channel, tuple(server_from_doc(s, f"{where} channel {channel!r}") for s in servers))
    names = [s.name for s in fleet.servers]
    if len(set(names)) != len(names):
        raise SpecError(f"{where} channel {channel!r} names a server twice ({names}); server names must be unique")
    return fleet


def load_fleet(channel: str, path: Path | None = None) -> Fleet:
    """The fleet of ``channel`` from ``path`` or the file ``$MODEL_RELEASE_FLEET`` names.

    Raises:
        SpecError: no fleet file is named, or it is unreadable or not a fleet.
    """
    where = path or os.environ.get(FLEET_ENV)
    if not where:
        raise SpecError(f"no fleet file: pass --fleet FILE or set {FLEET_ENV} (`model-release up` writes one)")
    try:
        doc = json.loads(Path(where).read_text())
    except (OSError, ValueError) as exc:
        raise SpecError(f"the fleet file {str(where)!r} cannot be read as JSON ({exc})") from None
    return parse_fleet(doc, channel, where=str(where))


def write_fleet(path: Path, fleets: dict[str, list[Server]]) -> None:
    """Write a fleet file (what the local stack does for its serving Tritons)."""
    doc = {"channels": {c: [s.to_dict() for s in servers] for c, servers in fleets.items()}}
    path.write_text(json.dumps(doc, indent=2))
