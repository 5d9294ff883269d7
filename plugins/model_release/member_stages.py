"""Intake and export of a cascade's or fan-out's registered members, with the release's own code.

:func:`intake_members` resolves and downloads every registered member as intake does the
release's model (into ``intake/members/<key>/``) and records each member's lineage;
:func:`export_members` exports each one with the same export code and caches, behind its own
parity gate (its tolerances ``repository.<shape>.tolerances.<key>``), into ``export/members/<key>/``:
a member whose version did not change since an earlier release in the workspace root is a cache
hit, not converted again. The pipeline's intake and export stages call them after the release's
own model (whose stage folder is made fresh first).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ModelReleaseError
from .members import MEMBERS_DIR, RELEASE, Lineage, MemberRef, parse_member, pipeline_members
from .workspace import Workspace, sha256_file

if TYPE_CHECKING:
    from .spec import ReleaseSpec
    from .types import IntakeResult

log = logging.getLogger(__name__)


class MemberWorkspace(Workspace):
    """The release's workspace as one member sees it: its stage folders are ``<stage>/members/<key>/``
    inside the release's (so they travel with the stage), its caches the release's (``.cache/`` of the root)."""

    def __init__(self, ws: Workspace, key: str) -> None:
        super().__init__(ws.release_id, ws.root, mirror=None)
        self.key = key

    def stage_dir(self, stage: str, *, fresh: bool = False) -> Path:
        d = super().stage_dir(stage) / MEMBERS_DIR / self.key
        if fresh and d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True, exist_ok=True)
        return d


def member_spec(spec: ReleaseSpec, key: str, ref: MemberRef) -> ReleaseSpec:
    """The spec as a registered member's intake and export read it: its model, its own tolerances
    (``repository.<shape>.tolerances.<key>``, else ``export.tolerances``); everything else the release's."""
    from .spec import ModelRef

    block = spec.repository.cascade if spec.repository.shape == "cascade" else spec.repository.fanout
    tolerances = (block.tolerances if block is not None else {}).get(key, spec.export.tolerances)
    return spec.model_copy(update={
        "model": ModelRef(name=ref.name, alias=ref.alias, version=ref.version),
        "export": spec.export.model_copy(update={"tolerances": tolerances}),
    })


def intake_members(spec: ReleaseSpec, ws: Workspace, intake: IntakeResult, *,
                   tracking_uri: str | None = None) -> dict[str, dict[str, Any]]:
    """Resolve and download every registered member as intake does the release's model; record each member's lineage.

    Returns:
        key -> ``{"lineage": {...}, "intake": IntakeResult dict | None}``: a registered member's
        name, version, run id, alias at the time, source and content digest; an unregistered
        one's path and sha256 (``file_sha256``); ``release`` is the release's own model.

    Raises:
        IntakeError: a member's model, alias or version does not exist, or cannot be exported (the member is named).
        ServiceUnavailable: MLflow could not be reached.
    """
    from .intake import resolve

    found: dict[str, dict[str, Any]] = {}
    for key, source in pipeline_members(spec).items():
        ref = parse_member(source)
        if ref.kind == RELEASE:
            lineage = Lineage(key, RELEASE, intake.model_name, intake.version, intake.run_id, intake.alias, intake.source)
            found[key] = {"lineage": {**lineage.to_dict(), "content_digest": intake.content_digest}, "intake": None}
        elif ref.kind == "unregistered":
            path = spec.resolve_path(source)
            digest = sha256_file(path) if path.is_file() else None
            found[key] = {"lineage": {**Lineage(key, "unregistered", source=source).to_dict(), "file_sha256": digest},
                          "intake": None}
        else:
            try:
                got = resolve(member_spec(spec, key, ref), MemberWorkspace(ws, key), tracking_uri=tracking_uri)
            except ModelReleaseError as exc:
                raise exc.restated(f"member {key!r} ({source}): {exc.message}") from None
            lineage = Lineage(key, "registered", got.model_name, got.version, got.run_id, got.alias, got.source)
            found[key] = {"lineage": {**lineage.to_dict(), "content_digest": got.content_digest}, "intake": got.to_dict()}
    return found


def export_members(spec: ReleaseSpec, ws: Workspace, intake: IntakeResult) -> dict[str, dict[str, Any]]:
    """Export every registered member with the release's export code and caches, behind its own parity gate.

    A member whose version did not change since an earlier release in this workspace root is a
    cache hit (its ONNX file and proven parity reused, nothing converted).

    Returns:
        key -> the member's ExportResult as a dict (registered members only).

    Raises:
        ExportError, ParityError, SpecError: as the export stage, the member named first.
    """
    from .export import export
    from .types import IntakeResult as _Intake

    done: dict[str, dict[str, Any]] = {}
    for key, item in intake.members.items():
        if not item.get("intake"):
            continue
        member = _Intake.from_dict(item["intake"])
        ref = parse_member(pipeline_members(spec)[key])
        what = f"member {key!r}"
        label = f'member "{key}" ({ref.source} v{member.version})'
        try:
            result = export(member_spec(spec, key, ref), member, MemberWorkspace(ws, key))
        except ModelReleaseError as exc:  # the fix names the member's own tolerances, not the release's
            own = f"repository.{spec.repository.shape}.tolerances.{key}."
            raise exc.restated(f"{label} {exc.message.replace('export.tolerances.', own)}") from None
        log.info("export: %s %s", what, f"v{member.version} reused from the export cache (not converted again)"
                 if result.cached else f"v{member.version} converted and checked")
        done[key] = result.to_dict()
    return done
