"""Unfinished writes under ``releases/``: find them and abort the stale ones.

A promotion killed part-way through a large file leaves an S3 multipart upload whose parts are
stored (and billed) until someone aborts it; a killed promotion into a local-folder store leaves
a temporary file. Neither is listed as an object, so nothing else ever sees them. The next
promotion aborts those of its own release id (any age: it is about to upload that release
itself) and those of any release older than :data:`STALE_UPLOAD_AGE`; retention aborts those
older than that age. A promotion running right now has younger uploads, so it is never touched.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

from ..names import check_release_id
from .backend import PendingUpload
from .keys import RELEASES
from .model_store import ModelStore

log = logging.getLogger(__name__)

#: an unfinished upload older than this is taken for one a killed promotion left behind
STALE_UPLOAD_AGE = timedelta(hours=24)


def abort_stale_uploads(
    store: ModelStore,
    *,
    release_id: str | None = None,
    older_than: timedelta = STALE_UPLOAD_AGE,
    now: datetime | None = None,
    dry_run: bool = False,
) -> list[PendingUpload]:
    """Abort unfinished uploads under ``releases/`` of this store that nothing will finish.

    Args:
        store: the model store.
        release_id: also abort every unfinished upload of this release, whatever its age (the
            caller is about to upload the release again).
        older_than: abort the others only when started longer ago than this.
        now: the current time (for tests of the age rule).
        dry_run: only report what would be aborted.

    Returns:
        The uploads aborted (or that would be), each logged with its key and start time.
    """
    mine = store.release_prefix(check_release_id(release_id)) if release_id is not None else None
    now = now or datetime.now(timezone.utc)
    stale = []
    for upload in store.backend.pending_uploads(RELEASES):
        started = upload.started
        if started is not None and started.tzinfo is None:
            started = started.replace(tzinfo=timezone.utc)
        if (mine and upload.key.startswith(mine)) or (started is not None and now - started > older_than):
            stale.append(upload)
    for upload in stale:
        if not dry_run:
            store.backend.abort_upload(upload)
        log.warning("%s the unfinished upload of %s/%s (started %s, id %s): a killed promotion left it",
                    "would abort" if dry_run else "aborted", store.uri, upload.key,
                    upload.started.isoformat() if upload.started else "at an unknown time", upload.upload_id)
    return stale
