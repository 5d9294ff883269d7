"""The conversion cache: an unchanged model re-released reuses its ONNX file.

Keyed by the model version's content digest, the converter's library versions and the export
options; kept under ``<workspace root>/.cache/export/<key>/`` (``model.onnx`` + ``meta.json``) and
shared by every release in that root. An entry is written whole (into a temporary folder renamed
into place) and its file is checked against the recorded sha256 before it is reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..workspace import atomic_write_json, sha256_file

FORMAT = 1


def cache_key(content_digest: str, flavor: str, versions: dict[str, str], options: dict[str, Any]) -> str:
    """A hex key for one (model content, converter versions, export options) triple."""
    payload = {"format": FORMAT, "digest": content_digest, "flavor": flavor, "versions": versions, "options": options}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


def cache_dir(root: Path) -> Path:
    return Path(root) / ".cache" / "export"


def lookup(root: Path, key: str) -> tuple[Path, dict[str, Any]] | None:
    """The cached ONNX file and its metadata, or None (also when the entry is damaged)."""
    entry = cache_dir(root) / key
    meta_path, onnx_path = entry / "meta.json", entry / "model.onnx"
    if not (meta_path.is_file() and onnx_path.is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text())
    except ValueError:
        return None
    if meta.get("onnx_sha256") != sha256_file(onnx_path):
        return None
    return onnx_path, meta


def store(root: Path, key: str, onnx_path: Path, meta: dict[str, Any]) -> None:
    """Add an entry (a concurrent writer of the same key may win; both wrote the same thing)."""
    base = cache_dir(root)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=base))
    try:
        shutil.copyfile(onnx_path, tmp / "model.onnx")
        atomic_write_json(tmp / "meta.json", meta)
        final = base / key
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
