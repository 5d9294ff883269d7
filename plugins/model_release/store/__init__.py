"""The model store: immutable, verified releases and channel pointers moved by compare-and-swap.

A store is an S3 prefix (``s3://BUCKET[/PREFIX]``) or a local folder (``file:///ABS/PATH``) with
the same layout and the same guarantees::

    releases/<release_id>/models/...          the Triton model repository
    releases/<release_id>/reports/...         the canary report (JSON, HTML) and other evidence
    releases/<release_id>/release.json        the manifest: sha256 and size of every file above
    releases/<release_id>/_COMPLETE           written last, after every object verified: the
                                              release exists only once this record does
    channels/<channel>.json                   {release_id, previous_release, seq, action, updated_at, updated_by}
    history/<channel>/<seq:010d>.json         one entry per pointer move, written create-only

Guarantees:

* A release appears whole or not at all: objects first, then ``release.json``, then
  ``_COMPLETE``; nothing points at a release without ``_COMPLETE``; released prefixes are never
  rewritten (a second promotion of the same id with a different manifest is refused).
* Verification reads back, for every object, the SHA-256 checksum the store keeps with it
  (S3 ``x-amz-checksum-sha256``: botocore computes it from the bytes it sends and S3 checks it on
  arrival; for multipart objects S3 keeps the composite of the parts' SHA-256s, which must equal
  the composite computed from the local file, and the manifest SHA-256 is kept in the object's
  metadata). This costs one HEAD per object, no download, so a no-op re-promotion costs time in
  proportion to the number of objects, not their bytes; ``verify_release(..., deep=True)``
  downloads and hashes instead. The local-folder store hashes the files themselves.
* Channel pointers move only by a conditional write (S3 ``If-None-Match: *`` to create,
  ``If-Match: <etag>`` to replace; a per-key ``flock`` plus ``os.replace`` locally). A promotion
  that finds the pointer changed since it read it fails with ``ConflictError`` naming the winner.
* Uploads resume: a rerun keeps objects already stored with the manifest's size and SHA-256.

Loading a release in Triton straight from the store (Triton reads S3 itself; credentials and the
region come from the usual ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_DEFAULT_REGION``
environment variables or the AWS config, never from the command line)::

    # AWS S3
    tritonserver --model-repository=s3://BUCKET/PREFIX/releases/<release_id>/models
    # a private S3 endpoint (moto, MinIO): host and port between "s3://" and the bucket
    tritonserver --model-repository=s3://127.0.0.1:9000/BUCKET/PREFIX/releases/<release_id>/models
    # (recent Triton versions also accept the scheme: s3://http://127.0.0.1:9000/BUCKET/...)

``ModelStore.triton_repository(release_id)`` returns that argument for a store. To follow a
channel, read ``channels/<channel>.json`` and start (or ``load`` in explicit model control mode)
the repository of its ``release_id``.

Public API::

    open_store(uri, *, s3_client=None) -> ModelStore
    promote(release_dir, release_id, store, channel, *, follower=None, expected_current=UNSET, progress=None) -> PromoteResult
    stage_release(release_dir, release_id, store) -> StageResult       (upload + verify + complete, no pointer move)
    rollback(store, channel, to_release=None, *, follower=None) -> RollbackResult
    retention(store, keep, *, protect_days=7.0, dry_run=False) -> list[str]
    read_channel(store, channel) -> ChannelPointer | None
    list_releases(store) -> list[ReleaseInfo]
    history(store, channel) -> list[ChannelPointer]
    verify_release(store, release_id, *, deep=False) -> VerifyReport
    registry.MlflowFollower(tracking_uri, alias="production")
"""

from __future__ import annotations

from .backend import ObjectInfo, StoreBackend
from .channels import UNSET, RollbackResult, history, move_channel, read_channel, rollback
from .layout import ChannelPointer, ModelStore, open_store
from .promote import Progress, StageResult, promote, stage_release
from .registry import MlflowFollower, RegistryFollower
from .retention import ReleaseInfo, list_releases, retention
from .verify import VerifyReport, verify_release

__all__ = [
    "UNSET",
    "ChannelPointer",
    "MlflowFollower",
    "ModelStore",
    "ObjectInfo",
    "Progress",
    "RegistryFollower",
    "ReleaseInfo",
    "RollbackResult",
    "StageResult",
    "StoreBackend",
    "VerifyReport",
    "history",
    "list_releases",
    "move_channel",
    "open_store",
    "promote",
    "read_channel",
    "retention",
    "rollback",
    "stage_release",
    "verify_release",
]
