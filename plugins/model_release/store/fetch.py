"""Bring a released release back from the store, byte for byte as its manifest says.

The canary uses it to serve the production champion beside a candidate: the champion is what
the store holds under ``releases/<id>/``, not what anyone rebuilds. Only a complete release is
fetched (its ``_COMPLETE`` record names this ``release.json``), every file is checked against
the manifest's sha256 and size as it arrives, and nothing the manifest does not list is taken.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path
from typing import Any

from ..errors import ChecksumMismatch, StoreError
from ..names import check_release_id
from ..workspace import atomic_write_bytes
from .keys import MANIFEST
from .model_store import ModelStore
from .verify import manifest_files

log = logging.getLogger(__name__)


def fetch_release(store: ModelStore, release_id: str, dest: Path, *, under: str = "") -> dict[str, Any]:
    """Download a complete release (or the files under one of its folders) into ``dest``, verified.

    Args:
        store: the model store.
        release_id: the release to fetch.
        dest: an empty or missing folder; it receives the release's files at their manifest paths
            and ``release.json``. It is replaced whole.
        under: only the files whose manifest path starts with this (``models/``: the repository).

    Returns:
        The release's manifest.

    Raises:
        StoreError: the release does not exist or is not complete, or its manifest is unreadable.
        ChecksumMismatch: a stored file differs from the manifest (nothing is left in ``dest``).
        ServiceUnavailable: the store did not answer.
    """
    check_release_id(release_id)
    record = store.read_record(release_id)
    got = store.read_manifest(release_id)
    if record is None or got is None:
        raise StoreError(
            f"release {release_id!r} is not a complete release in {store.uri} (no _COMPLETE record or no release.json); "
            "see `model-release store releases`"
        )
    manifest, raw = got
    if record.get("manifest_sha256") != hashlib.sha256(raw).hexdigest():
        raise ChecksumMismatch(
            f"release {release_id!r} in {store.uri}: release.json does not match its _COMPLETE record; the release is "
            "damaged (see `model-release store verify`)"
        )
    files = {p: e for p, e in manifest_files(manifest, f"{store.release_uri(release_id)}{MANIFEST}").items() if p.startswith(under)}
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    prefix = store.release_prefix(release_id)
    try:
        for path, entry in sorted(files.items()):
            target = (dest / path).resolve()
            if not target.is_relative_to(dest.resolve()):
                raise ChecksumMismatch(f"release {release_id!r}: manifest path {path!r} points outside the release")
            data = store.backend.get_bytes(prefix + path)
            if data is None:
                raise ChecksumMismatch(f"release {release_id!r} in {store.uri}: {path} is listed in release.json but missing")
            digest = hashlib.sha256(data[0]).hexdigest()
            if digest != entry["sha256"] or len(data[0]) != entry["size"]:
                raise ChecksumMismatch(
                    f"release {release_id!r} in {store.uri}: {path} has sha256 {digest} ({len(data[0])} bytes) but "
                    f"release.json says {entry['sha256']} ({entry['size']} bytes); the stored release is damaged"
                )
            atomic_write_bytes(target, data[0])
        atomic_write_bytes(dest / MANIFEST, raw)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    log.info("fetched release %s from %s: %d files verified against release.json", release_id, store.uri, len(files))
    return manifest
