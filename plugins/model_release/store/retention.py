"""Listing releases and deleting the ones nothing needs any more."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ..errors import SpecError
from .channels import history
from .layout import MANIFEST, MARKER, ModelStore

log = logging.getLogger(__name__)


@dataclass
class ReleaseInfo:
    """One release prefix in the store.

    Attributes:
        release_id: the prefix name.
        complete: its completion record exists.
        channels: the channels pointing at it now.
        objects: objects under the prefix.
        bytes: their total size.
        last_modified: the newest object's time.
    """

    release_id: str
    complete: bool
    channels: list[str] = field(default_factory=list)
    objects: int = 0
    bytes: int = 0
    last_modified: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["last_modified"] = self.last_modified.isoformat() if self.last_modified else None
        return d


def _current(store: ModelStore) -> dict[str, list[str]]:
    by_release: dict[str, list[str]] = {}
    for channel in store.channels():
        pointer = store.read_pointer(channel)
        if pointer is not None:
            by_release.setdefault(pointer.release_id, []).append(channel)
    return by_release


def list_releases(store: ModelStore) -> list[ReleaseInfo]:
    """Every release prefix, oldest first, with completeness and the channels pointing at it."""
    current = _current(store)
    out = []
    for rid in store.release_ids():
        objects = list(store.backend.list(store.release_prefix(rid)))
        times = [o.last_modified for o in objects if o.last_modified]
        out.append(ReleaseInfo(
            release_id=rid,
            complete=any(o.key.endswith("/" + MARKER) for o in objects),
            channels=sorted(current.get(rid, [])),
            objects=len(objects),
            bytes=sum(o.size for o in objects),
            last_modified=max(times) if times else None,
        ))
    out.sort(key=lambda r: (r.last_modified or datetime.min.replace(tzinfo=timezone.utc), r.release_id))
    return out


def retention(
    store: ModelStore, keep: int, *, protect_days: float = 7.0, dry_run: bool = False, now: datetime | None = None
) -> list[str]:
    """Delete releases that no channel points at and no recent history needs.

    A release is kept when a channel points at it, when it is among the last ``keep`` history
    entries of any channel (the rollback targets), or when its newest object is younger than
    ``protect_days`` (so a release being staged right now, or an unfinished one that may be
    resumed, is never deleted under a running promotion). Deletion removes ``_COMPLETE`` first,
    then ``release.json``, then the objects, so a half-deleted release never looks complete.

    Args:
        store: the model store.
        keep: history entries per channel whose releases are kept (>= 0).
        protect_days: age below which nothing is deleted.
        dry_run: only report what would be deleted.
        now: the current time (for tests of the age rule).

    Returns:
        The release ids deleted (or that would be, with ``dry_run``).
    """
    if not isinstance(keep, int) or keep < 0:
        raise SpecError(f"retention keep={keep!r} is not valid; give a whole number >= 0 of history entries to keep")
    if protect_days < 0:
        raise SpecError(f"retention protect_days={protect_days!r} is not valid; give a number of days >= 0")
    now = now or datetime.now(timezone.utc)
    needed: set[str] = set()
    for channel in store.channels():
        entries = history(store, channel)
        needed |= {e.release_id for e in (entries[-keep:] if keep else [])}
    deleted: list[str] = []
    for info in list_releases(store):
        if info.channels or info.release_id in needed:
            continue
        if info.last_modified and info.last_modified > now - timedelta(days=protect_days):
            continue
        if info.release_id in _current(store):  # re-read just before deleting: a pointer may have moved
            continue
        deleted.append(info.release_id)
        if dry_run:
            continue
        prefix = store.release_prefix(info.release_id)
        store.backend.delete([prefix + MARKER])
        store.backend.delete([prefix + MANIFEST])
        store.backend.delete([o.key for o in store.backend.list(prefix)])
        log.info("retention: deleted release %s from %s (%d objects)", info.release_id, store.uri, info.objects)
    return deleted
