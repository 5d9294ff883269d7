"""Intake of a cascade's or fan-out's registered members, with the release's own code.

:func:`intake_members` resolves and downloads every registered member as intake does the
release's model (into ``intake/members/<key>/``) and records each member's lineage. A member sees
the release's workspace through :class:`MemberWorkspace` and the spec through :func:`member_spec`;
:func:`model_release.export.members.export_members` exports the members with both. The pipeline's
intake stage calls :func:`intake_members` after the release's own model (whose stage folder is
made fresh first).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelReleaseError
from ..workspace import Workspace, sha256_file
from .members import MEMBERS_DIR, RELEASE, Lineage, MemberRef, parse_member, pipeline_members

if TYPE_CHECKING:
    from ..spec import ReleaseSpec
    from ..types import IntakeResult


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
    from ..spec import ModelRef

    block = spec.repository.cascade if spec.repository.shape == "cascade" else spec.repository.fanout
    tolerances = (block.tolerances if block is not None else {}).get(key, spec.export.tolerances)
    return spec.model_copy(update={
        "model": ModelRef(name=ref.name, alias=ref.alias, version=ref.version),
        "export": spec.export.model_copy(update={"tolerances": tolerances}),
    })


def intake_members(spec: ReleaseSpec, ws: Workspace, intake: IntakeResult, *, tracking_uri: str | None = None,
                   pinned: dict[str, Lineage] | None = None) -> dict[str, dict[str, Any]]:
    """Download every registered member as intake does the release's model; record each member's lineage.

    ``pinned``: each member's version as the run resolved it when it claimed the release
    (:class:`~.candidate.Candidate`); a member found there is downloaded at that version, with the
    alias it had then, and its alias is not asked again. A member missing from it is resolved here.

    Returns:
        key -> ``{"lineage": {...}, "intake": IntakeResult dict | None}``: a registered member's
        name, version, run id, alias at the time, source and content digest; an unregistered
        one's path and sha256 (``file_sha256``); ``release`` is the release's own model.

    Raises:
        IntakeError: a member's model, alias or version does not exist, or cannot be exported (the member is named).
        ServiceUnavailable: MLflow could not be reached.
    """
    from .stage import resolve

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
            held = (pinned or {}).get(key)
            alias = ref.alias
            if held is not None and held.version is not None:  # the version the run claimed, not the alias's now
                ref, alias = MemberRef(ref.kind, ref.source, ref.name, None, int(held.version)), held.alias
            try:
                got = resolve(member_spec(spec, key, ref), MemberWorkspace(ws, key), tracking_uri=tracking_uri, alias=alias)
            except ModelReleaseError as exc:
                raise exc.restated(f"member {key!r} ({source}): {exc.message}") from None
            lineage = Lineage(key, "registered", got.model_name, got.version, got.run_id, got.alias, got.source)
            found[key] = {"lineage": {**lineage.to_dict(), "content_digest": got.content_digest}, "intake": got.to_dict()}
    return found
