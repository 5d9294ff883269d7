"""The few object operations a model store needs, as a Protocol both backends implement.

The promotion logic (``promote.py``, ``channels.py``, ``verify.py``) speaks only this interface,
so the S3 store and the local-folder store share it, and a test can wrap a real backend to inject
faults without patching anything.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterator, Protocol

#: object metadata keys written with every release object (S3 user metadata, lower case)
META_SHA256 = "sha256"
META_COMPOSITE = "sha256-composite"


class PreconditionFailed(Exception):
    """A conditional write lost (HTTP 412 on S3, a changed or existing file locally). Internal:
    the store layer turns it into ``ConflictError`` naming the winner."""


@dataclass(frozen=True)
class ObjectInfo:
    """What a HEAD (or a listing) says about one stored object.

    Attributes:
        key: the full key (or path relative to the store root).
        size: bytes.
        etag: the store's entity tag, used for conditional writes; ``-N`` marks an S3 multipart object.
        checksum_sha256: the SHA-256 the store itself computed and keeps for the object, base64
            (S3's ``x-amz-checksum-sha256``, without the ``-N`` part-count suffix), or None when
            the store holds none (for example an object written without a checksum).
        multipart: True when the checksum is S3's composite (a SHA-256 of the parts' SHA-256s).
        metadata: user metadata (S3 ``x-amz-meta-*``).
        last_modified: when it was written, when known.
    """

    key: str
    size: int
    etag: str | None = None
    checksum_sha256: str | None = None
    multipart: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    last_modified: datetime | None = None


@dataclass(frozen=True)
class PendingUpload:
    """A write that was started and never finished: an S3 multipart upload (its parts are
    stored and billed until it is aborted) or a local temporary file.

    Attributes:
        key: the object it would have become, relative to the store root.
        upload_id: the S3 upload id, or the temporary file's key in a local-folder store.
        started: when it was started, when the store says.
    """

    key: str
    upload_id: str
    started: datetime | None = None


class StoreBackend(Protocol):
    """Object operations on one store root. Keys are '/'-separated, relative to the root."""

    #: the store root as a URI (``s3://bucket/prefix`` or ``file:///path``), without credentials
    uri: str

    def head(self, key: str) -> ObjectInfo | None:
        """The object's size, checksum and metadata, or None when absent."""
        ...

    def get_bytes(self, key: str) -> tuple[bytes, str] | None:
        """The object's content and etag, or None when absent."""
        ...

    def put_bytes(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> str:
        """Write a small object; conditional when asked. Returns the new etag.

        Raises:
            PreconditionFailed: ``if_none_match`` and the key exists, or ``if_match`` and its etag differs.
        """
        ...

    def put_file(self, key: str, path: Path, *, sha256: str, size: int, part_digests: list[bytes] | None) -> ObjectInfo | None:
        """Upload a local file whose SHA-256 (hex) is known, storing the checksum with the object.

        Returns the store's receipt for the write (its etag and the SHA-256 checksum it
        acknowledged), or None when the write gives none (then the caller reads the object back).
        """
        ...

    def part_size(self, size: int) -> int | None:
        """The multipart part size this backend uses for a file of ``size`` bytes, or None for one part."""
        ...

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (size, last_modified, and the etag where the store lists one)."""
        ...

    def list_dirs(self, prefix: str) -> list[str]:
        """The immediate 'sub-folder' names under ``prefix`` (which ends with '/')."""
        ...

    def delete(self, keys: list[str]) -> None:
        """Delete these objects; absent ones are ignored."""
        ...

    def sha256_of(self, key: str) -> str | None:
        """Read the whole object and return its SHA-256 (hex): the deep check."""
        ...

    def pending_uploads(self, prefix: str) -> list[PendingUpload]:
        """Writes under ``prefix`` that were started and never finished (oldest first)."""
        ...

    def abort_upload(self, upload: PendingUpload) -> None:
        """Discard an unfinished write and what it stored; one already gone is ignored."""
        ...

    def check(self, *, write: bool) -> None:
        """Raise when the store root is not there (``write=False``) or could not be written
        (``write=True``), leaving nothing behind; see ``ModelStore.check_writable``."""
        ...


def b64(hex_digest: str) -> str:
    """A hex SHA-256 as S3 spells it (base64 of the raw digest)."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


def composite_b64(part_digests: list[bytes]) -> str:
    """S3's composite checksum of a multipart object: SHA-256 over the parts' raw SHA-256s."""
    return base64.b64encode(hashlib.sha256(b"".join(part_digests)).digest()).decode()


def hash_file(path: Path, part_size: int | None, *, chunk: int = 1 << 20) -> tuple[str, list[bytes] | None]:
    """One pass over a file: its SHA-256 (hex) and, with ``part_size``, each part's raw SHA-256."""
    whole = hashlib.sha256()
    parts: list[bytes] | None = [] if part_size else None
    part = hashlib.sha256()
    in_part = 0
    with open(path, "rb") as f:
        while block := f.read(chunk if not part_size else min(chunk, part_size - in_part)):
            whole.update(block)
            if parts is not None:
                part.update(block)
                in_part += len(block)
                if in_part == part_size:
                    parts.append(part.digest())
                    part, in_part = hashlib.sha256(), 0
    if parts is not None and (in_part or not parts):
        parts.append(part.digest())
    return whole.hexdigest(), parts


def object_problem(info: ObjectInfo | None, sha256: str, size: int, *, composite: str | None = None) -> str | None:
    """Why a stored object does not match its manifest entry, or None when it does.

    A single-part object matches when its size and the store's own SHA-256 equal the manifest's.
    A multipart object carries a composite checksum (of its parts), so it matches when its size
    equals the manifest's, the SHA-256 recorded with it at upload equals the manifest's, and the
    store's composite equals the one computed from the local file at upload (``composite``, or
    the one recorded in its metadata when None).
    """
    if info is None:
        return "missing"
    if info.size != size:
        return f"size {info.size} != manifest {size}"
    if info.checksum_sha256 is None:
        return "the store holds no SHA-256 checksum for it (written by something else?)"
    if not info.multipart:
        want = b64(sha256)
        if info.checksum_sha256 != want:
            return f"sha256 {base64.b64decode(info.checksum_sha256).hex()} != manifest {sha256}"
        return None
    recorded = info.metadata.get(META_SHA256)
    if recorded != sha256:
        return f"recorded sha256 {recorded} != manifest {sha256}"
    want_composite = composite or info.metadata.get(META_COMPOSITE)
    if info.checksum_sha256 != want_composite:
        return f"composite checksum {info.checksum_sha256} != expected {want_composite}"
    return None
