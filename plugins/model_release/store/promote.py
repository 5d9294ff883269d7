"""Promotion: stage a release into its immutable prefix, verify it, then move the channel.

Order of writes, so that a failure at any point leaves nothing that looks complete:

0. a release already complete in the store is re-verified and left as it is (an idempotent rerun);
   otherwise unfinished uploads a killed attempt of this release left (and any older than a day)
   are aborted;
1. objects already in the store with the manifest's size and SHA-256 are kept (resume);
2. the local files still to upload are checked against the manifest; a mismatch stops here
   with nothing uploaded;
3. the rest are uploaded in parallel (multipart with SHA-256 checksums for large files) and
   objects under the prefix that the manifest does not list are deleted;
4. every object is checked against the manifest: the SHA-256 checksum the store acknowledged for
   its write (S3 answers a PutObject with the checksum it validated against the bytes received;
   objects without such a receipt, multipart ones and local files, are read back by a HEAD),
   then one listing shows each object is still the one written (size and ETag);
5. ``release.json`` is written, then the ``_COMPLETE`` record (the release now exists);
6. the channel pointer is moved by a conditional write, history appended, and the channel's
   history page (``channels/<channel>.html``, a view of the store) rewritten;
7. the registry follower (MLflow alias and tags) is called.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import ChecksumMismatch, ModelReleaseError, ServiceUnavailable, StoreError
from ..types import PromoteResult
from ..names import check_channel, check_release_id
from .backend import ObjectInfo, PreconditionFailed, composite_b64, hash_file, object_problem
from .documents import FORMAT, dumps, utcnow
from .history_page import refresh_channel_page
from .keys import MANIFEST, MARKER
from .model_store import ModelStore
from .pointer import UNSET, move_channel, read_pointer
from .registry import RegistryFollower, model_ref, report_uri
from .uploads import abort_stale_uploads
from .verify import VerifyReport, manifest_files, verify_release

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where an upload stands; passed to the ``progress`` callback and logged."""

    release_id: str
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    skipped: int


@dataclass
class StageResult:
    release_id: str
    objects: int
    bytes: int
    uploaded: int
    skipped: int
    already_complete: bool
    manifest: dict[str, Any]


class _Tracker:
    def __init__(self, release_id: str, files: int, size: int, skipped: int, skipped_bytes: int,
                 callback: Callable[[Progress], None] | None, every: float = 2.0) -> None:
        self.p = Progress(release_id, skipped, files, skipped_bytes, size, skipped)
        self.callback = callback
        self.every = every
        self.last = 0.0
        self.lock = threading.Lock()

    def done(self, size: int) -> None:
        with self.lock:
            self.p.files_done += 1
            self.p.bytes_done += size
            now = time.monotonic()
            final = self.p.files_done == self.p.files_total
            snapshot = Progress(**self.p.__dict__)
            if final or now - self.last >= self.every:
                self.last = now
                log.info(
                    "promote %s: %d/%d files, %.1f/%.1f MiB (%d already in the store)",
                    snapshot.release_id, snapshot.files_done, snapshot.files_total,
                    snapshot.bytes_done / 2**20, snapshot.bytes_total / 2**20, snapshot.skipped,
                )
        if self.callback is not None:
            self.callback(snapshot)


def _run_all(pool: ThreadPoolExecutor, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """Run fn over items in the pool; on the first failure cancel what has not started and re-raise."""
    futures: list[Future[Any]] = [pool.submit(fn, item) for item in items]
    done, pending = wait(futures, return_when=FIRST_EXCEPTION)
    for f in done:
        if f.exception() is not None:
            for p in pending:
                p.cancel()
            wait(pending)
            raise f.exception()  # type: ignore[misc]
    return [f.result() for f in futures]


def _check_local(release_dir: Path, files: dict[str, dict[str, Any]]) -> None:
    on_disk = {p.relative_to(release_dir).as_posix() for p in release_dir.rglob("*") if p.is_file()} - {MANIFEST}
    missing = sorted(set(files) - on_disk)
    extra = sorted(on_disk - set(files))
    if missing or extra:
        raise ChecksumMismatch(
            f"release folder {release_dir} does not match its release.json: "
            + (f"missing {missing[:5]}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"not in the manifest {extra[:5]}" if extra else "")
            + ". Rebuild the release (assemble writes the manifest from the files); nothing was uploaded.",
            stage="promote",
        )


def _check_written(
    store: ModelStore,
    prefix: str,
    files: dict[str, dict[str, Any]],
    receipts: dict[str, ObjectInfo],
    composites: dict[str, str],
    pool: ThreadPoolExecutor,
) -> dict[str, str]:
    """Problems of the stored objects against the manifest, after upload (empty when all match).

    First the checksum the store acknowledged for each write (a HEAD where a write gave no
    receipt: multipart uploads, local files), then one listing proving each object is still the
    one written (same size and etag): an object changed after its upload fails here. Fills
    ``receipts`` and ``composites`` with what the completion record keeps.
    """
    for p, info in list(receipts.items()):
        if info.multipart and info.checksum_sha256:
            composites.setdefault(p, info.checksum_sha256)
    unreceipted = [p for p in sorted(files) if p not in receipts]
    for p, info in _run_all(pool, lambda p: (p, store.backend.head(prefix + p)), unreceipted):
        if info is not None:
            receipts[p] = info
    problems: dict[str, str] = {}
    for p in sorted(files):
        why = object_problem(receipts.get(p), files[p]["sha256"], files[p]["size"], composite=composites.get(p))
        if why:
            problems[p] = why
    after = {o.key[len(prefix):]: o for o in store.backend.list(prefix)}
    for p in sorted(files):
        seen, written = after.get(p), receipts.get(p)
        if p in problems or written is None:
            continue
        if seen is None:
            problems[p] = "missing after upload"
        elif seen.size != files[p]["size"]:
            problems[p] = f"size {seen.size} != manifest {files[p]['size']} after upload"
        elif seen.etag and written.etag and seen.etag != written.etag:
            problems[p] = f"changed after upload (etag {seen.etag}, written as {written.etag})"
    return problems


@dataclass(frozen=True)
class LocalRelease:
    """A release folder and its manifest, read, parsed and hashed once.

    Attributes:
        path: the folder, laid out as the release prefix.
        raw: ``release.json`` as bytes (stored as is).
        manifest: ``release.json`` parsed.
        sha256: the SHA-256 (hex) of ``raw``, recorded in ``_COMPLETE``.
        files: the manifest's ``files`` map, checked.
    """

    path: Path
    raw: bytes
    manifest: dict[str, Any]
    sha256: str
    files: dict[str, dict[str, Any]]

    @property
    def total_bytes(self) -> int:
        return sum(e["size"] for e in self.files.values())


def read_release_dir(release_dir: Path) -> LocalRelease:
    """Read a release folder's ``release.json`` (once).

    Raises:
        ChecksumMismatch: the manifest is missing, not a JSON object, or its ``files`` map is malformed.
    """
    release_dir = Path(release_dir)
    manifest_path = release_dir / MANIFEST
    try:
        raw = manifest_path.read_bytes()
        manifest = json.loads(raw)
    except FileNotFoundError:
        raise ChecksumMismatch(f"{manifest_path} is missing; a release folder needs its manifest", stage="promote") from None
    except ValueError:
        raise ChecksumMismatch(f"{manifest_path} is not valid JSON; rebuild the release", stage="promote") from None
    files = manifest_files(manifest, str(manifest_path))
    return LocalRelease(release_dir, raw, manifest, hashlib.sha256(raw).hexdigest(), files)


def stage_release(
    release_dir: Path,
    release_id: str,
    store: ModelStore,
    *,
    workers: int = 16,
    progress: Callable[[Progress], None] | None = None,
) -> StageResult:
    """Upload, verify and complete ``releases/<release_id>/`` (steps 1-5 of the module docstring).

    Args:
        release_dir: a local folder laid out as the release prefix, with ``release.json``.
        release_id: the release id (the prefix name).
        store: the model store.
        workers: parallel uploads and checks.
        progress: called after each file with a :class:`Progress`.

    Raises:
        ChecksumMismatch: a local file differs from the manifest (nothing uploaded), or a stored
            object does not verify after upload (the release is left incomplete).
        StoreError: the release id exists in the store, complete, with a different manifest.
        ServiceUnavailable: the store stopped answering (rerun to resume).
    """
    check_release_id(release_id)
    return _stage(read_release_dir(release_dir), release_id, store, workers=workers, progress=progress)


def _stage(local: LocalRelease, release_id: str, store: ModelStore, *, workers: int,
           progress: Callable[[Progress], None] | None) -> StageResult:
    """:func:`stage_release` of a release folder already read: the phases, in order."""
    _check_local(local.path, local.files)
    done = _resume_complete(local, release_id, store, workers)
    if done is not None:
        return done
    abort_stale_uploads(store, release_id=release_id)  # what a killed attempt of this (or any old) promotion left
    prefix = store.release_prefix(release_id)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="promote") as pool:
        listed, receipts = _kept_objects(store, prefix, local.files, pool)  # 1
        present = set(receipts)
        todo = sorted(set(local.files) - present)
        parts_of = _hash_local(local, todo, store, pool)  # 2
        _upload(local, release_id, store, prefix, todo, listed, receipts, parts_of, pool, progress)  # 3
        composites = {p: composite_b64(parts) for p, parts in parts_of.items() if parts}
        problems = _check_written(store, prefix, local.files, receipts, composites, pool)  # 4
    if problems:
        VerifyReport(release_id, True, len(local.files), local.total_bytes, problems).raise_for_problems(store.uri)
    _complete(local, release_id, store, receipts, composites)  # 5
    log.info("promote %s: %d files, %.1f MiB verified and complete in %s (%d uploaded, %d already there)",
             release_id, len(local.files), local.total_bytes / 2**20, store.uri, len(todo), len(present))
    return StageResult(release_id, len(local.files), local.total_bytes, len(todo), len(present), False, local.manifest)


def _resume_complete(local: LocalRelease, release_id: str, store: ModelStore, workers: int) -> StageResult | None:
    """A release already complete in the store: re-verify it (one listing) and return, or None to stage it."""
    record = store.read_record(release_id)
    if record is None:
        return None
    if record.get("manifest_sha256") != local.sha256:
        raise StoreError(
            f"release {release_id!r} already exists complete in {store.uri} with a different release.json; "
            "released prefixes are immutable: build a new release id",
            stage="promote",
        )
    verify_release(store, release_id, listing=True, workers=workers).raise_for_problems(store.uri)
    log.info("promote %s: already complete and verified in %s", release_id, store.uri)
    return StageResult(release_id, len(local.files), local.total_bytes, 0, len(local.files), True, local.manifest)


def _kept_objects(store: ModelStore, prefix: str, files: dict[str, dict[str, Any]],
                  pool: ThreadPoolExecutor) -> tuple[dict[str, ObjectInfo], dict[str, ObjectInfo]]:
    """Step 1: (the prefix's listing, the objects already stored with the manifest's size and SHA-256).

    One listing, then a HEAD only for objects of the right size.
    """
    listed = {o.key[len(prefix):]: o for o in store.backend.list(prefix)}
    candidates = [p for p, e in files.items() if p in listed and listed[p].size == e["size"]]
    heads = _run_all(pool, lambda p: (p, store.backend.head(prefix + p)), candidates)
    receipts = {p: info for p, info in heads if info and object_problem(info, files[p]["sha256"], files[p]["size"]) is None}
    return listed, receipts


def _hash_local(local: LocalRelease, todo: list[str], store: ModelStore, pool: ThreadPoolExecutor) -> dict[str, list[bytes] | None]:
    """Step 2: the local files still to upload must match the manifest before anything is sent.

    Returns each file's part digests (for the multipart composite checksum), hashed in the same pass.
    """
    files = local.files

    def hash_one(path: str) -> tuple[str, str, list[bytes] | None]:
        entry = files[path]
        actual = (local.path / path).stat().st_size
        digest, parts = hash_file(local.path / path, store.backend.part_size(entry["size"]) if actual == entry["size"] else None)
        return path, digest if actual == entry["size"] else f"{digest} (size {actual})", parts

    hashed = _run_all(pool, hash_one, todo)
    bad = [(p, d) for p, d, _ in hashed if d != files[p]["sha256"]]
    if bad:
        p, d = bad[0]
        raise ChecksumMismatch(
            f"local file {local.path / p} does not match release.json: sha256 {d} != manifest sha256 "
            f"{files[p]['sha256']} (size {files[p]['size']})"
            + (f"; {len(bad) - 1} more file(s) differ" if len(bad) > 1 else "")
            + ". The release folder changed after it was assembled; rebuild it. Nothing was uploaded.",
            stage="promote",
        )
    return {p: parts for p, _, parts in hashed}


def _upload(local: LocalRelease, release_id: str, store: ModelStore, prefix: str, todo: list[str],
            listed: dict[str, ObjectInfo], receipts: dict[str, ObjectInfo], parts_of: dict[str, list[bytes] | None],
            pool: ThreadPoolExecutor, progress: Callable[[Progress], None] | None) -> None:
    """Step 3: delete objects the manifest does not list, then upload ``todo`` in parallel, largest
    first so the big multipart transfer overlaps the small ones. Fills ``receipts``."""
    files = local.files
    stale = sorted(k for k in listed if k not in files and k not in (MANIFEST, MARKER))
    if stale:
        store.backend.delete([prefix + k for k in stale])
    present = set(files) - set(todo)
    tracker = _Tracker(release_id, len(files), local.total_bytes, len(present), sum(files[p]["size"] for p in present), progress)

    def upload(path: str) -> None:
        entry = files[path]
        receipt = store.backend.put_file(prefix + path, local.path / path, sha256=entry["sha256"],
                                         size=entry["size"], part_digests=parts_of.get(path))
        if receipt is not None and receipt.checksum_sha256:
            receipts[path] = receipt
        else:
            receipts.pop(path, None)
        tracker.done(entry["size"])

    if not todo:
        log.info("promote %s: all %d files already in %s", release_id, len(files), store.uri)
    _run_all(pool, upload, sorted(todo, key=lambda p: -files[p]["size"]))


def _complete(local: LocalRelease, release_id: str, store: ModelStore, receipts: dict[str, ObjectInfo],
              composites: dict[str, str]) -> None:
    """Step 5: the manifest, then the completion record: only now does the release exist."""
    prefix = store.release_prefix(release_id)
    store.backend.put_bytes(prefix + MANIFEST, local.raw)
    record = {
        "format": FORMAT,
        "release_id": release_id,
        "manifest_sha256": local.sha256,
        "objects": len(local.files),
        "bytes": local.total_bytes,
        "composite": dict(sorted(composites.items())),
        "etags": {p: receipts[p].etag for p in sorted(local.files) if receipts[p].etag},
        "verified_at": utcnow(),
        "verified_by": "SHA-256 checksum acknowledged by the store per object, then a read-back listing (size, etag)",
    }
    try:
        store.backend.put_bytes(prefix + MARKER, dumps(record), if_none_match=True)
    except PreconditionFailed:
        other = store.read_record(release_id)
        if not other or other.get("manifest_sha256") != local.sha256:
            raise StoreError(f"release {release_id!r} was completed by another writer with a different manifest", stage="promote") from None


def promote(
    release_dir: Path,
    release_id: str,
    store: ModelStore,
    channel: str,
    *,
    follower: RegistryFollower | None = None,
    expected_current: Any = UNSET,
    progress: Callable[[Progress], None] | None = None,
    workers: int = 16,
) -> PromoteResult:
    """Promote a release folder to ``channel`` of the store: stage, verify, swap the pointer.

    Args:
        release_dir: local folder laid out as the release prefix (``release.json``, ``models/``, ``reports/``).
        release_id: the release id.
        store: from :func:`open_store`.
        channel: the channel to point at the release (for example ``production``).
        follower: the registry to keep in step (``MlflowFollower``), or None.
        expected_current: the release the caller saw as current (None: no pointer yet); a pointer
            found elsewhere fails with ``ConflictError``. UNSET: whatever is current when read.
        progress: called after each uploaded file.
        workers: parallel transfers.

    Returns:
        The ``PromoteResult``. A rerun of a promotion that already happened changes nothing and
        returns the same release (and calls the follower again).

    Raises:
        ChecksumMismatch: local files or stored objects differ from the manifest; the pointer did not move.
        ConflictError: another promotion moved the channel first; ``.winner`` names its release.
        ServiceUnavailable: the store (or the registry, after the move) did not answer.
    """
    check_release_id(release_id)
    check_channel(channel)
    local = read_release_dir(Path(release_dir))
    if follower is not None:  # refuse before uploading, not after moving the pointer
        model_ref(local.manifest, where=str(local.path / MANIFEST))
    read_pointer(store, channel)  # a damaged pointer is refused before anything is uploaded
    staged = _stage(local, release_id, store, workers=workers, progress=progress)
    pointer, previous, moved = move_channel(store, channel, release_id, expected_current=expected_current)
    refresh_channel_page(store, channel)  # the channel's history page (a view; never fails the promotion)
    result = PromoteResult(
        release_id=release_id,
        store_uri=store.uri,
        release_prefix=store.release_uri(release_id),
        channel=channel,
        previous_release=previous,
        objects=staged.objects,
        bytes=staged.bytes,
        uploaded=staged.uploaded,
        skipped=staged.skipped,
    )
    if follower is not None:
        try:
            result.mlflow_alias = follower.on_promote(staged.manifest, channel, release_id,
                                                      report_uri(store, release_id, staged.manifest))
        except ModelReleaseError as exc:
            raise exc.restated(f"channel {channel!r} now points at {release_id!r}, but the registry did not follow: "
                               f"{exc.message}. Rerun the promotion once fixed: it is idempotent.") from None
        except Exception as exc:
            raise ServiceUnavailable(
                f"channel {channel!r} now points at {release_id!r}, but the registry did not follow ({type(exc).__name__}). "
                "Rerun the promotion once the registry is reachable: it is idempotent."
            ) from None
    return result
