"""Export of a cascade's or fan-out's registered members, with the release's own code.

:func:`export_members` exports each member that intake downloaded with the same export code and
caches, behind its own parity gate (its tolerances ``repository.<shape>.tolerances.<key>``), into
``export/members/<key>/``: a member whose version did not change since an earlier release in the
workspace root is a cache hit, not converted again. The pipeline's export stage calls it after the
release's own model.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import ModelReleaseError
from ..intake.member_stages import MemberWorkspace, member_spec
from ..intake.members import parse_member, pipeline_members
from ..types import IntakeResult
from ..workspace import Workspace
from .stage import export

if TYPE_CHECKING:
    from ..spec import ReleaseSpec

log = logging.getLogger(__name__)


def export_members(spec: ReleaseSpec, ws: Workspace, intake: IntakeResult) -> dict[str, dict[str, Any]]:
    """Export every registered member with the release's export code and caches, behind its own parity gate.

    A member whose version did not change since an earlier release in this workspace root is a
    cache hit (its ONNX file and proven parity reused, nothing converted).

    Returns:
        key -> the member's ExportResult as a dict (registered members only).

    Raises:
        ExportError, ParityError, SpecError: as the export stage, the member named first.
    """
    done: dict[str, dict[str, Any]] = {}
    for key, item in intake.members.items():
        if not item.get("intake"):
            continue
        member = IntakeResult.from_dict(item["intake"])
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
