"""Listing releases, checking what the channel pointers name, and deleting what nothing needs."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from ..errors import SpecError
from .channels import history
from .keys import MANIFEST, MARKER
from .model_store import ModelStore
from .pointer import damaged_pointer, inspect_pointer, repair_hint
from .uploads import abort_stale_uploads
from .verify import verify_release

log = logging.getLogger(__name__)

#: the largest ``protect_days`` accepted (a hundred years; beyond it nothing is ever deleted anyway)
MAX_PROTECT_DAYS = 36500


@dataclass
class ReleaseInfo:
    """One release prefix in the store (or one a channel names that is not there).

    Attributes:
        release_id: the prefix name.
        complete: its completion record exists.
        channels: the channels pointing at it now.
        objects: objects under the prefix.
        bytes: their total size.
        last_modified: the newest object's time.
        exists: False for a release a channel points at that the store does not hold.
        problem: what is wrong when a channel points at a release that is missing or never completed.
    """

    release_id: str
    complete: bool
    channels: list[str] = field(default_factory=list)
    objects: int = 0
    bytes: int = 0
    last_modified: datetime | None = None
    exists: bool = True
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["last_modified"] = self.last_modified.isoformat() if self.last_modified else None
        return d


def _pointed(store: ModelStore, *, strict: bool) -> tuple[dict[str, list[str]], dict[str, str]]:
    """({release: channels pointing at it}, {channel: what is wrong with its damaged pointer}).

    With ``strict`` a damaged pointer raises (the StoreError names it and the repair command).
    """
    by_release: dict[str, list[str]] = {}
    damaged: dict[str, str] = {}
    for channel in store.channels():
        pointer, problem = inspect_pointer(store, channel)
        if problem:
            if strict:
                raise damaged_pointer(store, channel, problem)
            damaged[channel] = problem
        elif pointer is not None:
            by_release.setdefault(pointer.release_id, []).append(channel)
    return by_release, damaged


def list_releases(store: ModelStore) -> list[ReleaseInfo]:
    """Every release prefix, oldest first, with completeness and the channels pointing at it,
    then any release a channel points at that the store does not hold (``exists=False``).

    A release a channel points at that is missing or incomplete carries a ``problem``; a damaged
    pointer is not read (see :func:`pointer_problems`).
    """
    current, _ = _pointed(store, strict=False)
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
    held = {r.release_id: r for r in out}
    for rid, channels in sorted(current.items()):
        info = held.get(rid)
        if info is None:
            info = ReleaseInfo(release_id=rid, complete=False, channels=sorted(channels), exists=False)
            out.append(info)
        if not info.complete:
            info.problem = (f"channel(s) {', '.join(sorted(channels))} point at it, but "
                            + ("the store has no such release" if not info.exists else "it never completed"))
    return out


def pointer_problems(store: ModelStore, releases: list[ReleaseInfo] | None = None) -> dict[str, str]:
    """Channel -> what is wrong with its pointer (damaged, or naming a missing or incomplete
    release), each with the repair command; empty when every pointer is sound."""
    _, damaged = _pointed(store, strict=False)
    problems = {c: f"its pointer is damaged: {p}" for c, p in damaged.items()}
    for info in releases if releases is not None else list_releases(store):
        if info.problem:
            for channel in info.channels:
                what = "that does not exist" if not info.exists else "that never completed"
                problems[channel] = f"it points at release {info.release_id!r}, {what}"
    return {c: f"{p}; {repair_hint(store.uri, c)}" for c, p in sorted(problems.items())}


#: what ``protect_days`` may be, in words
PROTECT_DAYS_RANGE = f"a number of days from 0 to {MAX_PROTECT_DAYS} (for example 7)"


def valid_protect_days(value: Any) -> bool:
    """Whether ``value`` is a finite number of days from 0 to :data:`MAX_PROTECT_DAYS`."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0 <= value <= MAX_PROTECT_DAYS)


def _check_arguments(keep: Any, protect_days: Any) -> None:
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
        raise SpecError(f"retention keep={keep!r} is not valid; give a whole number >= 0 of verified releases per channel to keep")
    if not valid_protect_days(protect_days):
        raise SpecError(f"retention protect_days={protect_days!r} is not valid; give {PROTECT_DAYS_RANGE}")


def _needed(store: ModelStore, keep: int, releases: list[ReleaseInfo], verified: Callable[[str], bool]) -> set[str]:
    """What retention keeps whatever its age: what a channel points at, the newest ``keep``
    verified releases of each channel's history (the rollback targets), and the newest verified
    release of the store."""
    needed = set(_pointed(store, strict=True)[0])
    for channel in store.channels():
        recent: list[str] = []
        for entry in reversed(history(store, channel)):
            if len(recent) >= keep:
                break
            if entry.release_id not in recent and verified(entry.release_id):
                recent.append(entry.release_id)
        needed |= set(recent)
    newest = next((r.release_id for r in reversed(releases) if r.exists and r.complete and verified(r.release_id)), None)
    if newest is not None:
        needed.add(newest)
    return needed


def retention(
    store: ModelStore, keep: int, *, protect_days: float = 7.0, dry_run: bool = False, now: datetime | None = None
) -> list[str]:
    """Delete releases that no channel points at and no recent history needs.

    A release is kept when a channel points at it (verified or not), when it is among the
    newest ``keep`` distinct verified releases of any channel's history (the rollback targets),
    when it is the newest verified release in the store, or when its newest object is younger
    than ``protect_days`` (so a release being staged right now, or an unfinished one that may be
    resumed, is never deleted under a running promotion). A release that does not verify uses up
    no ``keep`` slot. Deletion removes ``_COMPLETE`` first, then ``release.json``, then the
    objects, so a half-deleted release never looks complete. Unfinished uploads under
    ``releases/`` older than a day are aborted first (see :mod:`.uploads`).

    Args:
        store: the model store.
        keep: verified releases per channel's history to keep (>= 0).
        protect_days: age below which nothing is deleted (0 to 36500).
        dry_run: only report what would be deleted (and log the uploads that would be aborted).
        now: the current time (for tests of the age rules).

    Returns:
        The release ids deleted (or that would be, with ``dry_run``).

    Raises:
        SpecError: ``keep`` or ``protect_days`` out of range.
        StoreError: a channel pointer is damaged (nothing is deleted; the message says how to repair it).
    """
    _check_arguments(keep, protect_days)
    now = now or datetime.now(timezone.utc)
    _pointed(store, strict=True)  # refuse before touching anything
    abort_stale_uploads(store, now=now, dry_run=dry_run)
    results: dict[str, bool] = {}

    def verified(rid: str) -> bool:
        if rid not in results:
            results[rid] = verify_release(store, rid).ok
        return results[rid]

    releases = [r for r in list_releases(store) if r.exists]
    needed = _needed(store, keep, releases, verified)
    deleted: list[str] = []
    for info in releases:
        if info.release_id in needed:
            continue
        if info.last_modified and info.last_modified > now - timedelta(days=protect_days):
            continue
        if info.release_id in _pointed(store, strict=True)[0]:  # re-read just before deleting: a pointer may have moved
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
