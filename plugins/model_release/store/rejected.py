"""What the canary refused, kept in the store beside what it shipped: the audit trail of rejections.

A candidate the canary rejects never becomes a release, but its reports are kept::

    rejected/<release_id>/reports/report.json   the canary's report (every figure, the reasons)
    rejected/<release_id>/reports/report.html   the page people read
    rejected/<release_id>/rejected.json         the record, written last: channel, when, who, the
                                                reasons, the key figures and each report's sha256

No model is uploaded. Nothing under ``rejected/`` is a release: no channel may point there,
retention (which works on ``releases/``) never deletes it, and a rejected candidate's id stays
free for a release (a rerun of the same release id that passes is promoted as usual; one rejected
again replaces its record, and the channel page shows the latest).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..names import check_channel, is_release_id
from .documents import FORMAT, dumps, utcnow
from .keys import REJECTED, REJECTED_RECORD, rejected_prefix
from .model_store import ModelStore

log = logging.getLogger(__name__)

def figures_of(report: dict[str, Any]) -> dict[str, Any]:
    """The key figures of a canary report, in the shape of a manifest's ``canary.figures``."""
    timing = (report.get("load_phase") or {}).get("candidate") or report.get("timing") or {}
    quality = report.get("quality") or {}
    return {
        "quality": {k: quality.get(k) for k in ("task", "candidate", "champion")},
        "timing": {k: timing.get(k) for k in ("p50_ms", "p95_ms", "p99_ms", "throughput_rows_per_s", "requests")},
        "gates": {g["name"]: _gate_status(g) for g in report.get("gates") or [] if isinstance(g, dict) and "name" in g},
    }


def _gate_status(gate: dict[str, Any]) -> str:
    """passed, failed, skipped or inconclusive, as the canary's report rows say (``outcome``; the store
    reads reports without importing the canary: the same rule as ``canary.judge.outcome.gate_status``)."""
    if gate.get("outcome") in ("passed", "failed", "skipped", "inconclusive"):
        return str(gate["outcome"])
    if gate.get("passed") is None:
        return "skipped" if gate.get("skipped") else "inconclusive"
    return "passed" if gate.get("passed") else "failed"


@dataclass
class Rejection:
    """A rejected candidate's record (``rejected/<release_id>/rejected.json``)."""

    release_id: str
    channel: str
    rejected_at: str
    rejected_by: dict[str, Any]
    reasons: list[str]
    model: dict[str, Any]
    champion: str | None
    figures: dict[str, Any]
    reports: dict[str, str]
    format: int = FORMAT

    def to_doc(self) -> dict[str, Any]:
        return dict(self.__dict__)


def keep_rejection(store: ModelStore, release_id: str, channel: str, report_json: Path, report_html: Path | None, *,
                   trigger: dict[str, Any]) -> str:
    """Upload a rejected candidate's reports and its record; return where they are (``<store>/rejected/<id>/``).

    Raises:
        SpecError: a bad release id or channel.
        StoreError: the report is missing or not a canary report's JSON.
        ServiceUnavailable: the store did not answer.
    """
    prefix = rejected_prefix(release_id)
    check_channel(channel)
    try:
        raw = Path(report_json).read_bytes()
        report = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise StoreError(f"the rejected canary report {report_json} cannot be read ({type(exc).__name__}); nothing was "
                         "kept in the store. Rerun the canary to write it") from None
    if not isinstance(report, dict):
        raise StoreError(f"{report_json} is not a canary report (a JSON object); nothing was kept in the store")
    files = {"reports/report.json": raw}
    if report_html is not None and Path(report_html).is_file():
        files["reports/report.html"] = Path(report_html).read_bytes()
    for name, data in files.items():
        store.backend.put_bytes(prefix + name, data)
    champion = report.get("champion") or {}
    record = Rejection(
        release_id=release_id, channel=channel, rejected_at=str(report.get("finished_at") or utcnow()),
        rejected_by=dict(trigger), reasons=[str(r) for r in report.get("reasons") or []],
        model={k: (report.get("model") or {}).get(k) for k in ("name", "version", "alias", "run_id")},
        champion=champion.get("release_id") or champion.get("name"), figures=figures_of(report),
        reports={name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    )
    store.backend.put_bytes(prefix + REJECTED_RECORD, dumps(record.to_doc()))
    return store.uri + "/" + prefix


def rejections(store: ModelStore, channel: str) -> list[Rejection]:
    """Every rejection recorded for ``channel``, oldest first; a damaged record is skipped with a warning."""
    check_channel(channel)
    found = []
    for release_id in store.backend.list_dirs(REJECTED):
        if not is_release_id(release_id):
            continue
        got = store.backend.get_bytes(rejected_prefix(release_id) + REJECTED_RECORD)
        if got is None:
            continue  # reports uploaded, record not yet (or a crash in between): not a rejection yet
        try:
            doc = json.loads(got[0])
            record = Rejection(**{k: doc[k] for k in Rejection.__dataclass_fields__ if k in doc})
        except (ValueError, TypeError, KeyError):
            log.warning("channel page: %s/%s%s is damaged; left out", store.uri, rejected_prefix(release_id), REJECTED_RECORD)
            continue
        if record.channel == channel:
            found.append(record)
    return sorted(found, key=lambda r: r.rejected_at)
