"""The model store: immutable, verified releases and channel pointers moved by compare-and-swap.

A store is an S3 prefix (``s3://BUCKET[/PREFIX]``) or a local folder (``file:///ABS/PATH``) with
the same layout and the same guarantees::

    releases/<release_id>/models/...          the Triton model repository
    releases/<release_id>/reports/...         the canary report (JSON, HTML) and other evidence
    releases/<release_id>/release.json        the manifest: sha256 and size of every file above
    releases/<release_id>/_COMPLETE           written last, after every object verified: the
                                              release exists only once this record does
    channels/<channel>.json                   {release_id, previous_release, seq, action, updated_at, updated_by}
    channels/<channel>.html                   the channel's history page: every move and rejection, with
                                              links to each report (rewritten after each; a view only)
    rejected/<release_id>/reports/...         a rejected candidate's canary reports (no models)
    rejected/<release_id>/rejected.json       its record: channel, when, who, reasons, key figures
    history/<channel>/<seq:010d>.json         one entry per pointer move, written create-only
                                              (action promote, rollback or repair)
    ledger/<channel>/<model>/<version>.json   the channel's ledger: each model version claimed,
                                              released, rejected, failed or inconclusive (``ledger.py``)
    workspaces/<release_id>/<stage>/...       a distributed run's release workspaces, when the
                                              workspace mirror is opened on ``<store>/workspaces``
                                              (``workspace_mirror.py``)
    serving/<channel>/versions.json           the Triton version number of each model of each release the
                                              channel's fleet serves (model_release.serve.versions)
    serving/<channel>/lock.json               the roll-out lock: one roll-out of a channel's fleet at a time,
                                              a lease its holder renews (model_release.serve.lock)
    serving/<channel>/plan.json               the desired state per server the serving agents follow: the
                                              roll-out's plan, moved step by step (model_release.serve.plan)
    serving/<channel>/agents/<server>.json    each serving agent's state: release served, loaded versions,
                                              readiness, last error, heartbeat (model_release.serve.membership)
    rollouts/<channel>/<seq>.json             one record per roll-out: who, run, waves, steps, outcome
    .locks/                                   (local-folder store only) flock files for conditional writes

Every key is built by :mod:`.keys` (the key map); the modules: ``model_store`` (the store handle
and ``open_store``), ``pointer`` (the channel pointer protocol, whole), ``channels`` (rollback and
repair), ``promote``, ``verify``, ``retention``, ``uploads``, ``rejected``, ``history_page`` (with ``rollouts_page``, its roll-outs),
``ledger`` (with ``claim``: how every entry point claims, renews and settles), ``fetch``, ``bundle``, ``registry``, ``cli``; the backends ``s3`` and ``folder``
behind ``backend.StoreBackend``.

Guarantees:

* A release appears whole or not at all: objects first, then ``release.json``, then
  ``_COMPLETE``; nothing points at a release without ``_COMPLETE``; released prefixes are never
  rewritten (a second promotion of the same id with a different manifest is refused).
* Every object is checked against the manifest before the release completes. The choice: on
  S3, the SHA-256 checksum S3 acknowledged for each write (botocore computes
  ``x-amz-checksum-sha256`` from the bytes it sends; S3 validates it on arrival and echoes it in
  the PutObject response), then one read-back listing of the prefix showing every object is
  still the one written (size and ETag; an object overwritten after upload has a new ETag).
  Objects without such a receipt (multipart uploads, whose S3 checksum is the composite of the
  parts' SHA-256s, and objects kept from an earlier attempt) are read back with a HEAD of their
  stored checksum. The local-folder store hashes the stored files. ``_COMPLETE`` records the
  ETags and composites, so a re-promotion of a complete release re-verifies with one listing
  (its cost follows the number of objects, not their bytes). ``verify_release`` reads back each
  stored checksum by HEAD, or with ``deep=True`` downloads and hashes every object. (moto, the
  local S3 endpoint, stores the checksum botocore sends without validating it; AWS validates.)
* Channel pointers move only by a conditional write (S3 ``If-None-Match: *`` to create,
  ``If-Match: <etag>`` to replace; a per-key ``flock`` plus ``os.replace`` locally). A promotion
  that finds the pointer changed since it read it fails with ``ConflictError`` naming the winner.
* Uploads resume: a rerun keeps objects already stored with the manifest's size and SHA-256.
  Unfinished multipart uploads a killed promotion left (and a local store's temporary files)
  are aborted by the next promotion of that release, and by any promotion or ``retention`` once
  older than a day (``uploads.STALE_UPLOAD_AGE``).
* Damage is named, never worked around: a pointer that is not what model-release writes stops
  promotion, rollback and retention with a ``StoreError`` naming the key and the way out,
  ``repair_pointer`` (``model-release store repair-pointer``), which verifies the target and
  replaces exactly the content it read. ``list_releases`` lists a release a pointer names that
  the store does not hold (``exists=False``, with a ``problem``). Rollback picks, and retention
  keeps, releases that verify; retention never deletes the newest verified release nor one a
  pointer names.
* Opening a store reads and writes nothing; a URI with a query, a fragment, credentials, a
  ``..`` segment or a percent-encoded separator is refused (``SpecError``). A local store folder
  is created by the first write, never by a read. ``ModelStore.check_writable()`` proves a
  promotion could write (the pipeline calls it before any stage runs), leaving nothing behind.

Loading a release in Triton straight from the store (Triton reads S3 itself; credentials and the
region come from the usual ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_DEFAULT_REGION``
environment variables or the AWS config, never from the command line)::

    # AWS S3
    tritonserver --model-repository=s3://BUCKET/PREFIX/releases/<release_id>/models
    # a private S3 endpoint (moto, MinIO): host and port between "s3://" and the bucket
    tritonserver --model-repository=s3://127.0.0.1:9000/BUCKET/PREFIX/releases/<release_id>/models
    # an endpoint behind TLS can be named with its scheme: s3://https://HOST:443/BUCKET/...

``ModelStore.triton_repository(release_id)`` returns that argument for a store. To follow a
channel, read ``channels/<channel>.json`` and start (or ``load`` in explicit model control mode)
the repository of its ``release_id``.

Public API::

    open_store(uri, *, s3_client=None) -> ModelStore
    ModelStore.check_writable() / check_readable()                      (StoreError / SpecError saying why not)
    promote(release_dir, release_id, store, channel, *, follower=None, expected_current=UNSET, progress=None) -> PromoteResult
    stage_release(release_dir, release_id, store) -> StageResult       (upload + verify + complete, no pointer move)
    rollback(store, channel, to_release=None, *, follower=None) -> RollbackResult
    repair_pointer(store, channel, release_id) -> RepairResult
    retention(store, keep, *, protect_days=7.0, dry_run=False) -> list[str]
    abort_stale_uploads(store, *, release_id=None, older_than=1 day, dry_run=False) -> list[PendingUpload]
    read_channel(store, channel) -> ChannelPointer | None
    list_releases(store) -> list[ReleaseInfo]
    pointer_problems(store) -> dict[channel, str]                      (damaged or dangling pointers)
    history(store, channel) -> list[ChannelPointer]
    keep_rejection(store, release_id, channel, report_json, report_html, *, trigger) -> str   (rejected/<id>/)
    write_channel_page(store, channel) -> str / refresh_channel_page(store, channel)       (channels/<channel>.html)
    verify_release(store, release_id, *, deep=False) -> VerifyReport
    registry.MlflowFollower(tracking_uri, alias="production")
"""

from __future__ import annotations

from .backend import ObjectInfo, PendingUpload, StoreBackend
from .channels import RepairResult, RollbackResult, repair_pointer, rollback
from .history_page import refresh_channel_page, write_channel_page
from .model_store import ModelStore, open_store
from .pointer import UNSET, ChannelPointer, history, move_channel, read_channel
from .promote import Progress, StageResult, promote, stage_release
from .registry import MlflowFollower, RegistryFollower
from .rejected import keep_rejection, rejections
from .retention import ReleaseInfo, list_releases, pointer_problems, retention
from .uploads import abort_stale_uploads
from .verify import VerifyReport, verify_release

__all__ = [
    "UNSET",
    "abort_stale_uploads",
    "ChannelPointer",
    "MlflowFollower",
    "ModelStore",
    "ObjectInfo",
    "PendingUpload",
    "Progress",
    "RegistryFollower",
    "ReleaseInfo",
    "RepairResult",
    "RollbackResult",
    "StageResult",
    "StoreBackend",
    "VerifyReport",
    "history",
    "keep_rejection",
    "list_releases",
    "move_channel",
    "open_store",
    "pointer_problems",
    "promote",
    "read_channel",
    "refresh_channel_page",
    "rejections",
    "repair_pointer",
    "retention",
    "rollback",
    "stage_release",
    "verify_release",
    "write_channel_page",
]
