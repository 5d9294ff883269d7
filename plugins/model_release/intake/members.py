"""Pipeline members from the MLflow registry: ``models:/NAME@ALIAS``, ``models:/NAME/VERSION`` or a file.

A cascade or fan-out is a pipeline of trained models. A member is this release's own model
(``release``), a registered model (by alias or fixed version), or a path to an ``.onnx`` file, which
is recorded as *unregistered* (no lineage, no version; its file's sha256 in the manifest):

- :func:`parse_member` reads a member reference (the spec's validator uses it);
- :func:`resolve_members` pins every registered member to one version (one registry call each)
  and returns its lineage: name, version, run id, the alias at the time, the version's source;
- :func:`pipeline_identity` is the one string a release of a pipeline is known by (every member's
  version), for the ledger and the schedule;
- :func:`changed_members` says which members moved since a previous release's lineage (the canary
  report names them against the champion).

The stages use them through :mod:`model_release.intake.member_stages` (intake and export of each
registered member); the manifest's ``members`` section is :func:`manifest_members`. This module
imports neither the spec nor a stage (the spec's validator and the ledger use it).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from .. import names
from ..errors import IntakeError, ServiceUnavailable
from ..safe_text import echo

#: a member that is this release's own model (the spec's ``model``)
RELEASE = "release"
_URI = re.compile(r"models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/@]+)|/(?P<version>[1-9][0-9]{0,9}))")


@dataclass(frozen=True)
class MemberRef:
    """What the spec says a member is: ``kind`` is ``release``, ``registered`` or ``unregistered`` (a file)."""

    kind: str
    source: str
    name: str | None = None
    alias: str | None = None
    version: int | None = None


@dataclass(frozen=True)
class Lineage:
    """A member pinned for one release: what the manifest records of it."""

    member: str
    kind: str
    name: str | None = None
    version: str | None = None
    run_id: str | None = None
    alias: str | None = None
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_member(value: str) -> MemberRef:
    """Read a member reference.

    Raises:
        ValueError: not ``release``, a ``models:/`` URI with a valid name and alias or version, or an ``.onnx`` path.
    """
    if value == RELEASE:
        return MemberRef(RELEASE, value)
    if value.startswith("models:/"):
        m = _URI.fullmatch(value)
        if m is None or not names.is_registered_model(m["name"]) or (m["alias"] and not names.is_alias(m["alias"])):
            raise ValueError(f"member {echo(value)} is not models:/NAME@ALIAS or models:/NAME/VERSION "
                             "(e.g. models:/iris-large@candidate, models:/iris-large/3)")
        return MemberRef("registered", value, m["name"], m["alias"], int(m["version"]) if m["version"] else None)
    if not value.endswith(".onnx") or "\x00" in value:
        raise ValueError(f"a member must be 'release', models:/NAME@ALIAS, models:/NAME/VERSION or a path to an "
                         f".onnx file, not {echo(value)}")
    return MemberRef("unregistered", value)


def resolve_members(tracking_uri: str | None, members: dict[str, str]) -> dict[str, Lineage]:
    """Pin every registered member to the version its alias names now; files and ``release`` pass through.

    Raises:
        IntakeError: a member's model, alias or version does not exist (the member is named).
        ServiceUnavailable: MLflow could not be reached.
    """
    from ..mlflow_env import quiet_mlflow_env

    quiet_mlflow_env()
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    pinned = {}
    for key, source in members.items():
        ref = parse_member(source)
        if ref.kind != "registered":
            pinned[key] = Lineage(key, ref.kind, source=source)
            continue
        try:
            mv = (client.get_model_version_by_alias(ref.name, ref.alias) if ref.alias
                  else client.get_model_version(ref.name, str(ref.version)))
        except MlflowException as exc:
            if getattr(exc, "error_code", "") in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise IntakeError(f"member {key!r} ({source}): no such model, alias or version in MLflow; register it "
                                  "or fix the member in the spec") from None
            raise ServiceUnavailable(f"MLflow could not resolve member {key!r} ({source}); retry") from None
        pinned[key] = Lineage(key, "registered", ref.name, str(mv.version), mv.run_id, ref.alias, mv.source)
    return pinned


def pipeline_identity(lineage: dict[str, Lineage]) -> str:
    """The versions of all members, in member order: ``large=iris-large/2,small=iris-small/5``.

    The release's own model counts by its name and version, as a registered member; an unregistered
    member by its path (its bytes are checked by the manifest's digest).
    """
    parts = []
    for key in sorted(lineage):
        item = lineage[key]
        parts.append(f"{key}={item.name}/{item.version}" if item.kind != "unregistered" else f"{key}={item.source}")
    return ",".join(parts)


def changed_members(lineage: dict[str, Lineage], previous: dict[str, dict[str, Any]] | None) -> list[str]:
    """The members whose version differs from ``previous`` (the channel's current release's lineage, as
    recorded); every member when there is none. A member whose version is unchanged is reused."""
    if not previous:
        return sorted(lineage)
    return sorted(k for k, item in lineage.items()
                  if (previous.get(k) or {}).get("name") != item.name or (previous.get(k) or {}).get("version") != item.version
                  or (item.kind == "unregistered" and (previous.get(k) or {}).get("source") != item.source))


# --- a pipeline's members as the spec, the manifest and the ledger see them ---------------------

#: the folder under a stage's folder that holds its members' output, one folder per member key
MEMBERS_DIR = "members"


def pipeline_members(spec: Any) -> dict[str, str]:
    """The spec's members, key -> reference (``small``/``large``, the fan-out's keys); {} for other shapes."""
    repo = spec.repository
    if repo.shape == "cascade" and repo.cascade is not None:
        return repo.cascade.members()
    if repo.shape == "fanout" and repo.fanout is not None:
        return dict(repo.fanout.members)
    return {}


def manifest_members(intake: Any, export: Any) -> dict[str, dict[str, Any]]:
    """The manifest's ``members`` section: each member's lineage and, registered, its ONNX sha256 and cache use."""
    section = {}
    for key, item in intake.members.items():
        entry = dict(item["lineage"])
        exported = export.members.get(key)
        if exported is not None:
            entry.update(onnx_sha256=exported["onnx_sha256"], cached=exported["cached"])
        elif entry["kind"] == RELEASE:
            entry.update(onnx_sha256=export.onnx_sha256, cached=export.cached)
        section[key] = entry
    return section


def lineage_of(section: dict[str, dict[str, Any]]) -> dict[str, Lineage]:
    """The manifest's (or intake's) ``members`` lineage read back as :class:`Lineage` values."""
    fields = set(Lineage.__dataclass_fields__)
    return {k: Lineage(**{f: v for f, v in (item.get("lineage", item)).items() if f in fields})
            for k, item in section.items()}
