"""The export caches: entries of files plus metadata, shared by every release in one workspace root.

Two kinds live under ``<workspace root>/.cache/``:

- ``export/<key>/``: the conversion cache. An unchanged model re-released reuses its ONNX file;
  keyed by the model version's content digest, the converter's library versions and the export
  options (:func:`cache_key`).
- ``export-parity/<key>/``: proven parity results. A parity check is a pure function of its inputs
  (the ONNX file, the model, the golden set, the tolerances, the runtime versions, the gate's code;
  see :mod:`model_release.export.paritycache`), so a passing result is kept with the ``golden.npz``
  and ``reference.npz`` it wrote and reused when every one of those inputs is the same.

An entry is written whole (into a temporary folder renamed into place). Its ``meta.json`` records
the entry's key, the sha256 of each file, and a sha256 of its own content; an entry whose meta does
not verify, or a file whose bytes do not match, is never used: :func:`read_meta` and
:func:`restore` answer None/False and the caller recomputes (and overwrites the entry).

A file goes into an entry, and back into a workspace, as a hard link where the filesystem allows
(a copy where not): a release's ONNX file and its cache entry are one file on disk. Neither side
is ever written in place (every writer replaces a file whole), and a restored file is hashed
before it is used, so a link cannot carry a change from one to the other unseen.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..workspace import atomic_write_json, link_or_copy, sha256_file

#: part of every key: bump it when an entry's layout or meaning changes
FORMAT = 2
CONVERSION = "export"
PARITY = "export-parity"


def cache_key(content_digest: str, flavor: str, versions: dict[str, str], options: dict[str, Any]) -> str:
    """A hex key for one (model content, converter versions, export options) triple."""
    return digest({"format": FORMAT, "digest": content_digest, "flavor": flavor, "versions": versions, "options": options})


def digest(payload: Any) -> str:
    """A 32-hex-digit key for a JSON-able payload (dict order does not matter)."""
    return hashlib.sha256(_canonical(payload)).hexdigest()[:32]


def cache_dir(root: Path, kind: str = CONVERSION) -> Path:
    return Path(root) / ".cache" / kind


def read_meta(root: Path, kind: str, key: str) -> dict[str, Any] | None:
    """An entry's metadata, or None when there is no entry or its meta.json does not verify."""
    path = cache_dir(root, kind) / key / "meta.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("key") != key or not isinstance(meta.get("files"), dict):
        return None
    body = {k: v for k, v in meta.items() if k != "meta_sha256"}
    if meta.get("meta_sha256") != hashlib.sha256(_canonical(body)).hexdigest():
        return None
    return meta


def restore(root: Path, kind: str, key: str, meta: dict[str, Any], name: str, dest: Path) -> str | None:
    """Copy the entry's file ``name`` to ``dest`` if its bytes match the sha256 in ``meta``.

    The file is read once: hashed while it is copied to a temporary file beside ``dest``, which
    replaces ``dest`` only when the hash matches.

    Returns:
        The file's sha256, or None (``dest`` untouched) when the file is missing or damaged.
    """
    want = meta["files"].get(name)
    src = cache_dir(root, kind) / key / name
    if not want:
        return None
    try:
        got = _copy_hashed(src, dest)
    except OSError:
        return None
    if got is None or got[0] != want:
        if got is not None:
            Path(got[1]).unlink(missing_ok=True)
        return None
    os.replace(got[1], dest)
    return want


def store(root: Path, kind: str, key: str, files: dict[str, Path], meta: dict[str, Any]) -> dict[str, str]:
    """Add an entry: ``files`` (entry name → source path) and ``meta`` (JSON-able).

    A concurrent writer of the same key may win; both wrote results of the same inputs.

    Returns:
        The sha256 of each stored file, as recorded in the entry.
    """
    base = cache_dir(root, kind)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=base))
    try:
        shas = {}
        for name, src in files.items():
            copied = _copy_hashed(Path(src), tmp / name)
            assert copied is not None
            os.replace(copied[1], tmp / name)
            shas[name] = copied[0]
        body = {**meta, "key": key, "format": FORMAT, "files": shas}
        atomic_write_json(tmp / "meta.json", {**body, "meta_sha256": hashlib.sha256(_canonical(body)).hexdigest()})
        final = base / key
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:  # another writer put the same key in place meanwhile
            pass
        return shas
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _copy_hashed(src: Path, dest: Path) -> tuple[str, str] | None:
    """Link (else copy) ``src`` to a temporary path beside ``dest`` and hash it; returns (sha256, temporary path)."""
    if not src.is_file():
        return None
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    os.close(fd)
    try:
        os.unlink(tmp)
        link_or_copy(src, tmp)
        return sha256_file(tmp), tmp
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _canonical(payload: Any) -> bytes:
    return json.dumps(payload, sort_keys=True, default=str, separators=(",", ":")).encode()
