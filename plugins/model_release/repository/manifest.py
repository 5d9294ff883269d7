"""``release.json``: what a release is made of, with the sha256 of every file it ships.

Format version 1::

    {"format_version": 1, "release_id": ..., "created_at": ISO-8601 UTC,
     "spec": {...}, "model": {name, version, alias, run_id, source, content_digest, metrics, params},
     "export": {onnx_sha256, opset, converter, parity, cached}, "tensorrt": {...} | null,
     "repository": {entry_model, load_order, models: {name: version}, roles: {role: output},
                    labels: [names] | null, classes: [native class values] | null,
                    calls: {model: [the models it calls: ensemble steps, BLS targets]}},
     "files": {"models/<model>/<version>/model.onnx": {"sha256": ..., "size": ...}, ...},
     "canary": null | {...},
     "run": {dag_id, run_id, run_type, bundle_name, bundle_version, code_digest}   (when an Airflow run made it),
     "members": {key: {member, kind, name, version, run_id, alias, source, content_digest, onnx_sha256, cached}}
                (a cascade or fan-out only; ``kind`` is ``release``, ``registered`` or ``unregistered``,
                an unregistered member's entry has its path as ``source`` and its ``file_sha256``)}

``canary`` is filled at promote time by :func:`finalize_manifest`, which also re-hashes the files.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..spec import ReleaseSpec
from ..types import ExportResult, IntakeResult, TensorRTResult
from ..workspace import atomic_write_json, sha256_file

FORMAT_VERSION = 1
MANIFEST_NAME = "release.json"


def hash_tree(root: str | Path, *, exclude: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """sha256 and size of every file under ``root``, keyed by relative POSIX path, sorted.

    Args:
        root: the folder to hash.
        exclude: relative paths to leave out (``release.json`` itself, say).
    """
    root = Path(root)
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel in exclude:
            continue
        files[rel] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return dict(sorted(files.items()))


def build_manifest(
    *,
    release_id: str,
    spec: ReleaseSpec,
    intake: IntakeResult,
    export: ExportResult,
    tensorrt: TensorRTResult | None,
    entry_model: str,
    load_order: list[str],
    models: dict[str, int],
    release_dir: str | Path,
    created_at: datetime | None = None,
    roles: dict[str, str] | None = None,
    labels: list[str] | None = None,
    classes: list[Any] | None = None,
    calls: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The manifest of a release whose repository is ``<release_dir>/models``.

    ``files`` holds every file under ``release_dir`` but the manifest itself, keyed by its path
    relative to ``release_dir`` (``models/<model>/<version>/model.onnx``).
    """
    created = (created_at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return {
        "format_version": FORMAT_VERSION,
        "release_id": release_id,
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spec": spec.model_dump(mode="json"),
        "model": {
            "name": intake.model_name,
            "version": intake.version,
            "alias": intake.alias,
            "run_id": intake.run_id,
            "source": intake.source,
            "flavor": intake.flavor,
            "content_digest": intake.content_digest,
            "metrics": dict(intake.metrics),
            "params": dict(intake.params),
        },
        "export": {
            "onnx_sha256": export.onnx_sha256,
            "opset": export.opset,
            "converter": dict(export.converter),
            "parity": export.parity,
            "cached": export.cached,
        },
        "tensorrt": tensorrt.to_dict() if tensorrt is not None else None,
        "repository": {
            "entry_model": entry_model, "load_order": list(load_order), "models": dict(models),
            "roles": dict(roles or {}), "labels": labels, "classes": classes, "calls": dict(calls or {}),
        },
        "files": hash_tree(release_dir, exclude=frozenset({MANIFEST_NAME})),
        "canary": None,
        **({"members": _members(intake, export)} if intake.members else {}),
    }


def _members(intake: IntakeResult, export: ExportResult) -> dict[str, Any]:
    from ..intake.members import manifest_members

    return manifest_members(intake, export)


def write_manifest(path: str | Path, manifest: dict[str, Any]) -> None:
    """Write the manifest as JSON, atomically."""
    atomic_write_json(path, manifest)


def finalize_manifest(manifest_path: str | Path, release_dir: str | Path, canary: dict[str, Any],
                      run: dict[str, Any] | None = None) -> dict[str, Any]:
    """Add the canary verdict (and the run that made the release, when given) and re-hash every
    file under ``release_dir`` but the manifest.

    Returns:
        The manifest as written.
    """
    path, root = Path(manifest_path).resolve(), Path(release_dir).resolve()
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["canary"] = canary
    if run is not None:
        manifest["run"] = run
    own = path.relative_to(root).as_posix() if path.is_relative_to(root) else MANIFEST_NAME
    manifest["files"] = hash_tree(root, exclude=frozenset({own}))
    write_manifest(path, manifest)
    return manifest
