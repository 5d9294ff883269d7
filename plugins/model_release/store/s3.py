"""The S3 backend: boto3 against AWS S3 or any S3-compatible endpoint (moto, MinIO).

Conditional writes use ``PutObject`` with ``If-None-Match: *`` (create only) and
``If-Match: <etag>`` (replace only that version); the endpoint answers 412 to the loser.
Uploads store an ``x-amz-checksum-sha256`` computed by botocore from the bytes actually sent
(single part: the object's SHA-256; multipart: S3's composite of the parts' SHA-256s) and the
manifest's SHA-256 in user metadata. Every boto3 error is converted here: connection failures to
``ServiceUnavailable``, refusals to ``StoreError``; messages name the bucket and key, never a
credential.
"""

from __future__ import annotations

import functools
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..errors import ServiceUnavailable, StoreError
from .backend import META_COMPOSITE, META_SHA256, ObjectInfo, PendingUpload, PreconditionFailed, composite_b64
from .keys import WRITE_PROBE

MULTIPART_THRESHOLD = 16 * 1024 * 1024
MULTIPART_CHUNKSIZE = 8 * 1024 * 1024


def default_client(*, max_pool_connections: int = 32) -> Any:
    """A boto3 S3 client from the standard AWS chain (env, shared config, instance role).

    The endpoint comes from ``MODEL_RELEASE_S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL`` when set
    (a local moto or MinIO); credentials never come from the release spec.

    Each call gets a session of its own, so credentials and configuration are read from the
    chain again (a rotated key, a changed profile), but every session shares this process's botocore
    data loader (:func:`_shared_loader`): the S3 service model and the endpoint rules are parsed
    from botocore's JSON once per process instead of once per client, 0.1-0.6 s each time on a
    2-core machine.
    """
    import boto3
    import botocore.session
    from botocore.config import Config

    endpoint = os.environ.get("MODEL_RELEASE_S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL") or None
    core = botocore.session.Session()
    core.register_component("data_loader", _shared_loader())
    return boto3.session.Session(botocore_session=core).client(
        "s3",
        endpoint_url=endpoint,
        config=Config(max_pool_connections=max_pool_connections, retries={"max_attempts": 5, "mode": "standard"}),
    )


@functools.cache
def _shared_loader() -> Any:
    """botocore's data loader (it caches every JSON file it has parsed), one per process.

    botocore reads its search paths (``AWS_DATA_PATH``) when a loader is made, so a process that
    changes them after its first client keeps the first; model-release sets none.
    """
    import botocore.session

    return botocore.session.Session().get_component("data_loader")


class _NotFound(Exception):
    pass


class S3Backend:
    """Objects under ``s3://bucket/prefix``.

    Args:
        bucket: the bucket.
        prefix: the store root inside the bucket ('' for the bucket root).
        client: a boto3 S3 client (thread-safe; shared by the upload threads).
        max_concurrency: threads per multipart upload.
    """

    def __init__(self, bucket: str, prefix: str, client: Any, *, max_concurrency: int = 8) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client
        self.max_concurrency = max_concurrency
        self.uri = f"s3://{bucket}" + (f"/{self.prefix}" if self.prefix else "")

    # -- helpers -------------------------------------------------------------------------------
    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _rel(self, full: str) -> str:
        return full[len(self.prefix) + 1 :] if self.prefix else full

    @contextmanager
    def _boundary(self, op: str, key: str) -> Iterator[None]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("404", "NoSuchKey", "NotFound", "NoSuchUpload"):
                raise _NotFound(key) from None
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                raise PreconditionFailed(f"{op} {key}: {code}") from None
            raise StoreError(
                f"S3 refused {op} of s3://{self.bucket}/{self._key(key)}: {code} {err.get('Message', '')}".rstrip()
                + ". Check the bucket exists and the credentials (from the AWS chain or the Airflow connection) may write it."
            ) from None
        except BotoCoreError as exc:
            reading = op.split()[0] in ("HEAD", "GET", "LIST")
            raise ServiceUnavailable(
                f"S3 endpoint unreachable during {op} of s3://{self.bucket}/{self._key(key)} ({type(exc).__name__}); "
                + ("nothing was changed: retry once the endpoint is back." if reading else
                   "this write did not complete: retry once the endpoint is back (a promotion resumes its uploads).")
            ) from None
        except Exception as exc:  # s3transfer wraps the botocore error in S3UploadFailedError
            if type(exc).__name__ == "S3UploadFailedError":
                text = str(exc)
                if "An error occurred (" in text:  # the endpoint answered and refused
                    code = text.split("An error occurred (", 1)[1].split(")", 1)[0]
                    raise StoreError(
                        f"S3 refused the upload of s3://{self.bucket}/{self._key(key)}: {code}. "
                        "Check the bucket exists and the credentials may write it."
                    ) from None
                raise ServiceUnavailable(
                    f"S3 upload of s3://{self.bucket}/{self._key(key)} failed ({str(exc).split(':')[0]}); "
                    "retry once the endpoint is back (uploads resume)."
                ) from None
            raise

    # -- StoreBackend --------------------------------------------------------------------------
    def head(self, key: str) -> ObjectInfo | None:
        try:
            with self._boundary("HEAD", key):
                r = self.client.head_object(Bucket=self.bucket, Key=self._key(key), ChecksumMode="ENABLED")
        except _NotFound:
            return None
        etag = str(r.get("ETag", "")).strip('"')
        checksum = r.get("ChecksumSHA256")
        if checksum and "-" in checksum[-7:]:
            checksum = checksum.rsplit("-", 1)[0]  # AWS spells composites "<b64>-<parts>", moto without
        return ObjectInfo(
            key=key,
            size=int(r["ContentLength"]),
            etag=etag,
            checksum_sha256=checksum,
            multipart="-" in etag,
            metadata={k.lower(): v for k, v in (r.get("Metadata") or {}).items()},
            last_modified=r.get("LastModified"),
        )

    def get_bytes(self, key: str) -> tuple[bytes, str] | None:
        try:
            with self._boundary("GET", key):
                r = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
                data = r["Body"].read()
        except _NotFound:
            return None
        return data, str(r.get("ETag", "")).strip('"')

    def put_bytes(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> str:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key), "Body": data, "ChecksumAlgorithm": "SHA256"}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = f'"{if_match}"'
        with self._boundary("PUT", key):
            r = self.client.put_object(**kwargs)
        return str(r.get("ETag", "")).strip('"')

    def part_size(self, size: int) -> int | None:
        if size < MULTIPART_THRESHOLD:
            return None
        from s3transfer.utils import ChunksizeAdjuster

        return int(ChunksizeAdjuster().adjust_chunksize(MULTIPART_CHUNKSIZE, size))

    def put_file(self, key: str, path: Path, *, sha256: str, size: int, part_digests: list[bytes] | None) -> ObjectInfo | None:
        metadata = {META_SHA256: sha256}
        part = self.part_size(size)
        if part is None:
            with self._boundary("PUT", key), open(path, "rb") as body:
                r = self.client.put_object(
                    Bucket=self.bucket, Key=self._key(key), Body=body, ChecksumAlgorithm="SHA256", Metadata=metadata
                )
            # the receipt: S3 answers with the checksum it validated against the bytes it received
            return ObjectInfo(key=key, size=size, etag=str(r.get("ETag", "")).strip('"'),
                              checksum_sha256=r.get("ChecksumSHA256"), metadata=metadata)
        from boto3.s3.transfer import TransferConfig

        if part_digests:
            metadata[META_COMPOSITE] = composite_b64(part_digests)
        config = TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD,
            multipart_chunksize=MULTIPART_CHUNKSIZE,
            max_concurrency=self.max_concurrency,
            use_threads=True,
        )
        with self._boundary("multipart upload", key):
            self.client.upload_file(
                str(path),
                self.bucket,
                self._key(key),
                ExtraArgs={"ChecksumAlgorithm": "SHA256", "Metadata": metadata},
                Config=config,
            )
        return None  # s3transfer returns no response: the caller reads the object back

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self._key(prefix)}
            if token:
                kwargs["ContinuationToken"] = token
            with self._boundary("LIST", prefix):
                r = self.client.list_objects_v2(**kwargs)
            for o in r.get("Contents", []):
                yield ObjectInfo(
                    key=self._rel(o["Key"]),
                    size=int(o["Size"]),
                    etag=str(o.get("ETag", "")).strip('"'),
                    last_modified=o.get("LastModified"),
                )
            if not r.get("IsTruncated"):
                return
            token = r.get("NextContinuationToken")

    def list_dirs(self, prefix: str) -> list[str]:
        names: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self._key(prefix), "Delimiter": "/"}
            if token:
                kwargs["ContinuationToken"] = token
            with self._boundary("LIST", prefix):
                r = self.client.list_objects_v2(**kwargs)
            for p in r.get("CommonPrefixes", []):
                names.append(self._rel(p["Prefix"])[len(prefix) :].strip("/"))
            if not r.get("IsTruncated"):
                return sorted(names)
            token = r.get("NextContinuationToken")

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            batch = keys[i : i + 1000]
            with self._boundary("DELETE", batch[0]):
                r = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": self._key(k)} for k in batch], "Quiet": True}
                )
            if r.get("Errors"):
                first = r["Errors"][0]
                raise StoreError(
                    f"S3 refused to delete {len(r['Errors'])} object(s), first {first.get('Key')}: {first.get('Code')}; "
                    "check the credentials may delete in this bucket."
                )

    def sha256_of(self, key: str) -> str | None:
        import hashlib

        try:
            with self._boundary("GET", key):
                r = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
                h = hashlib.sha256()
                for block in r["Body"].iter_chunks(1 << 20):
                    h.update(block)
        except _NotFound:
            return None
        return h.hexdigest()

    def pending_uploads(self, prefix: str) -> list[PendingUpload]:
        found: list[PendingUpload] = []
        markers: dict[str, str] = {}
        while True:
            with self._boundary("LIST multipart uploads", prefix):
                r = self.client.list_multipart_uploads(Bucket=self.bucket, Prefix=self._key(prefix), **markers)
            for u in r.get("Uploads", []):
                found.append(PendingUpload(key=self._rel(u["Key"]), upload_id=u["UploadId"], started=u.get("Initiated")))
            if not r.get("IsTruncated"):
                return found
            markers = {"KeyMarker": r.get("NextKeyMarker", ""), "UploadIdMarker": r.get("NextUploadIdMarker", "")}

    def abort_upload(self, upload: PendingUpload) -> None:
        try:
            with self._boundary("ABORT multipart upload", upload.key):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=self._key(upload.key), UploadId=upload.upload_id)
        except _NotFound:
            pass  # finished or aborted meanwhile

    def check(self, *, write: bool) -> None:
        try:
            with self._boundary("HEAD bucket", ""):
                self.client.head_bucket(Bucket=self.bucket)
        except _NotFound:
            raise StoreError(
                f"bucket {self.bucket!r} does not exist (store {self.uri}); create it, or fix the store URI "
                "(the spec's promote.store or --store), then run again"
            ) from None
        except StoreError as exc:
            raise StoreError(f"bucket {self.bucket!r} (store {self.uri}) cannot be read: {exc.message.split(': ', 1)[-1]}") from None
        if not write:
            return
        probe = f"{WRITE_PROBE}{uuid.uuid4().hex}"  # never a release id: those start alphanumeric
        try:
            with self._boundary("multipart upload (write probe)", probe):
                started = self.client.create_multipart_upload(Bucket=self.bucket, Key=self._key(probe))
        except StoreError as exc:
            raise StoreError(
                f"the store {self.uri} is not writable: S3 refused to start an upload in bucket {self.bucket!r} "
                f"({exc.message.split(': ', 1)[-1]})"
            ) from None
        try:
            self.abort_upload(PendingUpload(probe, started["UploadId"]))
        except StoreError:
            pass  # left under releases/: the next promotion or retention aborts it once a day old
