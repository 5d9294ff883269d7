"""A champion's tuned setting carried to a release of the same shape (``canary.tune.reuse_days``).

Tuning measures what a serving configuration costs a model of one shape on one canary. A model
retrained on new data (the scheduled release of a channel) has the shape its champion had: the
search would measure the same thing again, spend seconds of trial windows, and pick whichever
setting the canary's noise favoured that day. So the champion's kept setting is carried when its
**tuning fingerprint** equals the candidate's and it was measured recently enough; the load phase
still judges the candidate under it against the champion.

The fingerprint is a sha256 over four parts, each kept in the manifest so a mismatch says which:

- ``models``: every file of the release's models, the leaf models' ONNX graphs by their structure
  without weights (:func:`~model_release.repository.onnx_io.structure_digest`); anything else (a
  TensorRT plan, a python step's code, a config.pbtxt as the template wrote it) byte for byte.
- ``grid``: ``canary.tune``'s grid and trial length.
- ``load``: what tuning measures under and against: the load phase's concurrency and batch size,
  ``canary.p99_ms`` and ``canary.load.max_p99_ratio``.
- ``server``: the canary: its mode, description and Triton version; for the embedded one the
  machine's architecture and core count, for a remote one its URL.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ...repository.onnx_io import structure_digest
from ...spec import ReleaseSpec
from ..champion import SERVED, Champion

#: bump when what a part covers changes: an older champion's fingerprint then never matches
FINGERPRINT_VERSION = 1


def fingerprint(spec: ReleaseSpec, repository: Path, models: list[str], leaves: list[str],
                server: Mapping[str, Any]) -> dict[str, Any]:
    """The release's tuning fingerprint: ``{"digest": sha256, "parts": {part: sha256}}``.

    Args:
        spec: the release spec (its ``canary.tune`` and ``canary.load``).
        repository: the assembled repository (before tuning: the template's own setting).
        models: the release's models (only their folders are read).
        leaves: those of ``models`` that tuning sets (their ONNX files are read by structure).
        server: the canary's facts (the report's ``server`` section).
    """
    tune, load = spec.canary.tune, spec.canary.load
    parts = {
        "models": _models_digest(repository, models, set(leaves)),
        "grid": _digest({"instances": tune.instances, "dynamic_batching": tune.dynamic_batching,
                         "max_queue_delay_us": tune.max_queue_delay_us, "preferred_batch_sizes": tune.preferred_batch_sizes,
                         "trial_s": tune.trial_s}),
        "load": _digest({"concurrency": load.concurrency, "batch_rows": load.batch_rows, "p99_ms": spec.canary.p99_ms,
                         "max_p99_ratio": load.max_p99_ratio}),
        "server": _digest(_server_identity(server)),
    }
    return {"digest": _digest({"version": FINGERPRINT_VERSION, **parts}), "parts": parts}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _models_digest(repository: Path, models: list[str], leaves: set[str]) -> str:
    files: dict[str, str] = {}
    for model in sorted(set(models)):
        folder = repository / model
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            key = path.relative_to(repository).as_posix()
            if model in leaves and path.suffix == ".onnx":
                files[key] = "onnx-structure:" + structure_digest(path)
            else:
                files[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _digest(files)


def _server_identity(server: Mapping[str, Any]) -> dict[str, Any]:
    identity = {k: server.get(k) for k in ("mode", "description", "version")}
    if server.get("mode") == "local":  # its URL's port changes every start; the machine is what measures
        identity.update(machine=platform.machine(), cores=os.cpu_count())
    else:
        identity["url"] = server.get("url")
    return identity


@dataclass(frozen=True)
class Carried:
    """The champion's setting to serve instead of a search, and where it was measured."""

    setting: dict[str, Any]
    label: str
    kept_default: bool
    carried_from: str
    measured_in: str
    measured_at: str


def carried(spec: ReleaseSpec, champion: Champion | None, mine: Mapping[str, Any],
            now: datetime) -> tuple[Carried | None, str]:
    """The champion's setting when it may be carried (else None), and the sentence why or why not.

    Carried only when ``canary.tune.reuse_days`` is above 0, the champion is served and its manifest's
    tuning record has this release's fingerprint ``mine``, and it was measured at most
    ``reuse_days`` before ``now`` (its ``measured_at``: a carried record keeps the search's own).
    """
    days = spec.canary.tune.reuse_days
    if days <= 0:
        return None, "searched: canary.tune.reuse_days is 0 (a search on every release)"
    if champion is None or champion.kind != SERVED:
        return None, "searched: no served champion whose setting could be carried"
    record = (((champion.manifest or {}).get("canary") or {}).get("figures") or {}).get("tuning") or {}
    theirs = record.get("fingerprint") or {}
    who = champion.name or champion.release_id or "the champion"
    if not theirs.get("digest") or not _a_setting(record.get("chosen")) or not record.get("measured_at"):
        return None, (f"searched: the champion {who} kept no tuning fingerprint (it was released without tuning, or "
                      "before fingerprints were kept)")
    if theirs["digest"] != mine["digest"]:
        differ = [p for p, d in mine["parts"].items() if (theirs.get("parts") or {}).get(p) != d] or ["version"]
        return None, (f"searched: the champion {who} was tuned for another shape (its fingerprint differs in: "
                      f"{', '.join(differ)})")
    try:
        measured = datetime.fromisoformat(record["measured_at"])
        age = (now - measured).total_seconds() / 86_400
    except (TypeError, ValueError):
        return None, f"searched: the champion {who}'s tuning time {record['measured_at']!r} is not an ISO 8601 time"
    if age > days:
        return None, (f"searched: the champion {who}'s setting was measured {age:.1f} days ago in "
                      f"{record.get('measured_in')}, over canary.tune.reuse_days {days:g}")
    label = record.get("chosen_label") or str(record["chosen"])
    carry = Carried(dict(record["chosen"]), label, bool(record.get("kept_default")),
                    champion.release_id or who, str(record.get("measured_in") or champion.release_id), record["measured_at"])
    return carry, (f"carried from the champion {who}: the same fingerprint, measured {age:.1f} days ago in "
                   f"{carry.measured_in} (within canary.tune.reuse_days {days:g})")


_SETTING_FIELDS = {"instances", "dynamic_batching", "max_queue_delay_us", "preferred_batch_sizes"}


def _a_setting(value: Any) -> bool:
    """Whether a manifest's ``chosen`` reads as a setting (a hand-edited or older record may not)."""
    return (isinstance(value, dict) and set(value) <= _SETTING_FIELDS and isinstance(value.get("instances"), int)
            and value["instances"] >= 1 and isinstance(value.get("dynamic_batching"), bool))
