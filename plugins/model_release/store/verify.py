"""Checking a stored release against its manifest.

Three ways, from cheapest to most thorough, all of them also listing the prefix once to catch
objects the manifest does not name (Triton would load them):

* ``listing`` (what a re-promotion of a complete release uses): one LIST per 1000 objects; each
  object's size and ETag must equal those recorded in ``_COMPLETE`` when the release was
  verified. An object overwritten since then has a new ETag. Needs a store that lists ETags
  (S3); elsewhere it falls back to ``head``.
* ``head`` (default; rollback uses it): one HEAD per object, reading back the SHA-256 checksum
  the store keeps with it (S3's ``x-amz-checksum-sha256``). Single-part objects must carry the
  manifest's SHA-256; multipart objects carry S3's composite checksum (of the parts), which must
  equal the composite computed from the local file at upload (recorded in ``_COMPLETE``), with
  the manifest's SHA-256 in the object's metadata. The local-folder store hashes the file.
* ``deep``: download and hash every object; trusts nothing but the bytes.

No mode downloads anything but ``deep``, so the cost of the first two follows the number of
objects, not their bytes.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import ChecksumMismatch, StoreError
from ..workspace import check_release_id
from .backend import object_problem
from .keys import MANIFEST, MARKER
from .model_store import ModelStore


@dataclass
class VerifyReport:
    """What :func:`verify_release` found.

    Attributes:
        release_id: the release checked.
        complete: the completion record exists and names this release.json.
        objects: files the manifest lists.
        bytes: their total size.
        problems: file (or ``_COMPLETE`` / ``release.json``) -> what is wrong; empty when ok.
    """

    release_id: str
    complete: bool
    objects: int = 0
    bytes: int = 0
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.complete and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"release_id": self.release_id, "ok": self.ok, "complete": self.complete, "objects": self.objects,
                "bytes": self.bytes, "problems": self.problems}

    def raise_for_problems(self, store_uri: str) -> None:
        """Raise ``ChecksumMismatch`` naming the first bad files when the release is not ok."""
        if self.ok:
            return
        first = sorted(self.problems.items())[:3]
        listed = "; ".join(f"{k}: {v}" for k, v in first)
        more = f" (and {len(self.problems) - 3} more)" if len(self.problems) > 3 else ""
        raise ChecksumMismatch(
            f"release {self.release_id!r} in {store_uri} does not verify: {listed}{more}. "
            "Promote it again from its workspace (bad objects are re-uploaded) or pick another release."
        )


def manifest_files(manifest: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """The manifest's ``files`` map, checked: relative POSIX paths to {sha256, size}."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        raise ChecksumMismatch(f"{where} has no 'files' map; it must list every file with its sha256 and size")
    for path, entry in files.items():
        bad = (
            not isinstance(path, str) or path.startswith("/") or ".." in path.split("/") or path in (MANIFEST, MARKER)
            or not isinstance(entry, dict) or not isinstance(entry.get("size"), int)
            or not isinstance(entry.get("sha256"), str) or len(entry["sha256"]) != 64
        )
        if bad:
            raise ChecksumMismatch(
                f"{where}: files entry {path!r} -> {entry!r} is not valid; each key is a relative POSIX path "
                "(not release.json or _COMPLETE) and each value {'sha256': 64 hex, 'size': int}"
            )
    return files


def _load(store: ModelStore, key: str) -> tuple[dict[str, Any] | None, bytes | None, str | None]:
    """(document, raw bytes, None), (None, None, None) when absent, (None, raw, what is wrong) when damaged."""
    got = store.backend.get_bytes(key)
    if got is None:
        return None, None, None
    try:
        doc = json.loads(got[0])
    except ValueError:
        return None, got[0], "damaged: not valid JSON"
    if not isinstance(doc, dict):
        return None, got[0], f"damaged: a JSON {type(doc).__name__}, not an object"
    return doc, got[0], None


def verify_release(
    store: ModelStore, release_id: str, *, deep: bool = False, listing: bool = False, workers: int = 16
) -> VerifyReport:
    """Check a stored release: completion record, manifest, and every object against it.

    Args:
        store: the model store.
        release_id: the release to check.
        deep: download and hash every object instead of reading back the stored checksums.
        listing: compare sizes and ETags from a listing with those recorded at completion
            (falls back to a HEAD per object where the store lists no ETag).
        workers: parallel requests.

    Returns:
        A report; ``report.ok`` is True only for a complete release whose objects all match.
    """
    check_release_id(release_id)
    prefix = store.release_prefix(release_id)
    report = VerifyReport(release_id=release_id, complete=False)
    record, _, record_damage = _load(store, prefix + MARKER)
    manifest, raw, manifest_damage = _load(store, prefix + MANIFEST)
    if record_damage:
        report.problems[MARKER] = record_damage
    if raw is None or manifest_damage:
        report.problems[MANIFEST] = manifest_damage or ("missing" if record is None else "missing although _COMPLETE exists")
        if record is None:
            report.problems.setdefault(MARKER, "missing: the release never completed (or does not exist)")
        return report
    if record is None:
        report.problems.setdefault(MARKER, "missing: the release never completed; no channel may point at it")
    elif record.get("manifest_sha256") != hashlib.sha256(raw).hexdigest():
        report.problems[MANIFEST] = "differs from the one the completion record verified"
    else:
        report.complete = True
    assert manifest is not None and raw is not None
    try:
        files = manifest_files(manifest, f"{store.release_uri(release_id)}{MANIFEST}")
    except ChecksumMismatch as exc:
        report.problems[MANIFEST] = str(exc)
        return report
    composites = (record or {}).get("composite", {})
    etags = (record or {}).get("etags", {}) if report.complete else {}
    report.objects = len(files)
    report.bytes = sum(int(e["size"]) for e in files.values())
    listed = {o.key[len(prefix):]: o for o in store.backend.list(prefix)}
    for extra in sorted(set(listed) - set(files) - {MANIFEST, MARKER}):
        report.problems[extra] = "not in the manifest (an object added after the release was made)"
    pending: list[tuple[str, dict[str, Any]]] = []
    for path, entry in sorted(files.items()):
        seen = listed.get(path)
        if seen is None:
            report.problems[path] = "missing"
        elif seen.size != entry["size"]:
            report.problems[path] = f"size {seen.size} != manifest {entry['size']}"
        elif listing and not deep and seen.etag and etags.get(path):
            if seen.etag != etags[path]:
                report.problems[path] = f"changed since it was verified (etag {seen.etag} != recorded {etags[path]})"
        else:
            pending.append((path, entry))

    def check(item: tuple[str, dict[str, Any]]) -> tuple[str, str | None]:
        path, entry = item
        if deep:
            digest = store.backend.sha256_of(prefix + path)
            if digest is None:
                return path, "missing"
            return path, None if digest == entry["sha256"] else f"sha256 {digest} != manifest {entry['sha256']}"
        info = store.backend.head(prefix + path)
        return path, object_problem(info, entry["sha256"], entry["size"], composite=composites.get(path))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for path, problem in pool.map(check, pending):
            if problem:
                report.problems[path] = problem
    return report


def require_verified(store: ModelStore, release_id: str, *, purpose: str) -> dict[str, Any]:
    """The release's manifest, after checking it verifies; raises ``StoreError`` saying why not."""
    report = verify_release(store, release_id)
    if not report.ok:
        first = "; ".join(f"{k}: {v}" for k, v in sorted(report.problems.items())[:3])
        raise StoreError(
            f"{purpose}: release {release_id!r} in {store.uri} is not a complete, verified release ({first}). "
            "Pick a release that `model-release store verify` accepts."
        )
    got = store.read_manifest(release_id)
    assert got is not None
    return got[0]


