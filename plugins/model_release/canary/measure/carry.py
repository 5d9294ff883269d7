"""A champion's tuned setting carried to a release of the same shape (``canary.tune.reuse_days``).

Tuning measures what a serving configuration costs a model of one shape on one canary. A model
retrained on new data (the scheduled release of a channel) has the shape its champion had: the
search would measure the same thing again, spend seconds of trial windows, and pick whichever
setting the canary's noise favoured that day. So the champion's kept setting is carried when its
**tuning fingerprint** equals the candidate's and it was measured recently enough; the load phase
still judges the candidate under it against the champion.

The fingerprint is a sha256 over four parts, each kept in the manifest so a mismatch says which:

- ``models``: every file of the release's models, the leaf models' ONNX graphs by their structure
  without weights (:func:`~model_release.repository.onnx_io.structure_digest`: a tree ensemble by
  its number of trees and depth, rounded up), warm-up samples by their size (each is named by a hash of the
  golden row it holds, and config.pbtxt is read without those names); anything else (a python
  step's code, a TensorRT plan, which holds its weights, so a release that builds one searches)
  byte for byte.
- ``grid``: ``canary.tune``'s grid and trial length.
- ``load``: what tuning measures under and against: the load phase's concurrency and batch size,
  ``canary.p99_ms`` and ``canary.load.max_p99_ratio``.
- ``server``: the canary: its mode, description and Triton version; for the embedded one the
  machine's architecture and core count, for a remote one its URL.

Only a search that tried the whole grid is carried (``complete``: not one cut short by
``canary.tune.budget_s``), and the age counts from that search, however often it was carried since.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ...errors import ModelReleaseError
from ...repository.config import CONFIG_FILE, read_config
from ...repository.onnx_io import structure_digest
from ...repository.warmup_samples import WARMUP_FOLDER
from ...spec import ReleaseSpec
from ..champion import SERVED, Champion

#: bump when what a part covers changes: an older champion's fingerprint then never matches
FINGERPRINT_VERSION = 2


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


def fingerprint_or_why(spec: ReleaseSpec, repository: Path, models: list[str], leaves: list[str],
                       server: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`fingerprint`, or ``{"error": why}`` where a file cannot be read: the release then searches
    (and records no fingerprint to carry), never fails on it."""
    try:
        return fingerprint(spec, repository, models, leaves, server)
    except (ModelReleaseError, OSError, ValueError, MemoryError) as exc:
        return {"error": f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"}


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
            elif path.parent.name == WARMUP_FOLDER:  # a golden row, named by its hash: its size is the shape
                files[_SAMPLE_HASH.sub("", key)] = f"warm-up sample of {path.stat().st_size} bytes"
            elif path.name == CONFIG_FILE:
                files[key] = _config_digest(path)
            else:
                files[key] = _file_digest(path)
    return _digest(files)


def _file_digest(path: Path) -> str:
    with path.open("rb") as f:  # in chunks: a TensorRT plan can be gigabytes
        return hashlib.file_digest(f, "sha256").hexdigest()


#: the row hash :func:`~model_release.repository.warmup_samples.add_warmup` names a sample by
_SAMPLE_HASH = re.compile(r"-[0-9a-f]{12}$")


def _config_digest(path: Path) -> str:
    """A config.pbtxt without the warm-up samples' file names (each a hash of the golden row it holds)."""
    try:
        config = read_config(path)
    except Exception:  # noqa: BLE001 - unparsable: compared byte for byte (lint refuses it before the canary anyway)
        return _file_digest(path)
    for sample in config.model_warmup:
        for spec in sample.inputs.values():
            if spec.input_data_file:
                spec.input_data_file = _SAMPLE_HASH.sub("", spec.input_data_file)
    return hashlib.sha256(config.SerializeToString(deterministic=True)).hexdigest()


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
    kept_default: bool
    carried_from: str
    measured_in: str
    measured_at: str


def carried(spec: ReleaseSpec, champion: Champion | None, mine: Mapping[str, Any],
            now: datetime) -> tuple[Carried | None, str]:
    """The champion's setting when it may be carried (else None), and the sentence why or why not.

    Carried only when ``canary.tune.reuse_days`` is above 0, the champion is served and its manifest's
    tuning record has this release's fingerprint ``mine``, came from a search that tried the whole
    grid, and was measured at most ``reuse_days`` before ``now`` (its ``measured_at``: a carried
    record keeps the search's own). A record that does not read as one (an older or hand-edited
    manifest) is searched past, never an error.
    """
    days = spec.canary.tune.reuse_days
    if days <= 0:
        return None, "searched: canary.tune.reuse_days is 0 (a search on every release)"
    if mine.get("error"):
        return None, f"searched: this release's tuning fingerprint could not be computed ({mine['error']})"
    if champion is None or champion.kind != SERVED:
        return None, "searched: no served champion whose setting could be carried"
    who = champion.name or champion.release_id or "the champion"
    record = _dig(champion.manifest, "canary", "figures", "tuning")
    if record is None or not isinstance(record.get("fingerprint"), dict):
        return None, (f"searched: the champion {who} kept no tuning fingerprint (it was released without tuning, or "
                      "before fingerprints were kept)")
    theirs = record["fingerprint"]
    if theirs.get("digest") != mine["digest"]:
        parts = theirs.get("parts") if isinstance(theirs.get("parts"), dict) else {}
        differ = [p for p, d in mine["parts"].items() if parts.get(p) != d] or ["version"]
        return None, (f"searched: the champion {who} was tuned for another shape (its fingerprint differs in: "
                      f"{', '.join(differ)})")
    if not _a_setting(record.get("chosen")):
        return None, f"searched: the champion {who}'s tuning record has no setting that reads as one: {record.get('chosen')!r}"
    if record.get("complete") is not True:
        why = ("came from a search cut short by canary.tune.budget_s (not every setting of the grid was tried)"
               if record.get("complete") is False else "does not say whether its search tried the whole grid")
        return None, f"searched: the champion {who}'s setting {why}"
    when = record.get("measured_at")
    try:
        measured = datetime.fromisoformat(when)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None, f"searched: the champion {who}'s tuning time {when!r} is not an ISO 8601 time"
    if measured.utcoffset() is None:
        return None, f"searched: the champion {who}'s tuning time {when!r} has no UTC offset, so its age is unknown"
    age = (now - measured).total_seconds() / 86_400
    if age < -1:
        return None, (f"searched: the champion {who}'s tuning time {when} is {-age:.1f} days in the future: the "
                      "record or a clock is wrong")
    if age > days:
        return None, (f"searched: the champion {who}'s setting was measured {age:.1f} days ago in "
                      f"{record.get('measured_in')}, over canary.tune.reuse_days {days:g}")
    chosen = record["chosen"]
    carry = Carried(dict(chosen), record.get("kept_default") is True, champion.release_id or who,
                    str(record.get("measured_in") or champion.release_id), str(when))
    return carry, (f"carried from the champion {who}: the same fingerprint, measured {max(age, 0.0):.1f} days ago in "
                   f"{carry.measured_in} (within canary.tune.reuse_days {days:g})")


def _dig(value: Any, *keys: str) -> dict[str, Any] | None:
    """``value[k1][k2]...`` where each level is a dict, else None."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, dict) else None


def _a_setting(value: Any) -> bool:
    """Whether a manifest's ``chosen`` reads as a setting Triton's configuration can hold."""
    def count(v: Any, low: int) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and low <= v <= 2**31 - 1

    return (isinstance(value, dict)
            and set(value) <= {"instances", "dynamic_batching", "max_queue_delay_us", "preferred_batch_sizes"}
            and count(value.get("instances"), 1) and value["instances"] <= 64
            and isinstance(value.get("dynamic_batching"), bool)
            and count(value.get("max_queue_delay_us", 0), 0)
            and isinstance(value.get("preferred_batch_sizes", []), list)
            and all(count(v, 1) for v in value.get("preferred_batch_sizes", [])))
