"""Where a channel's pointer moves when it is moved back or repaired: rollback and repair-pointer.

Both decide the target and then move the pointer through :mod:`.pointer` (the whole pointer
protocol: read, conditional write, history, conflict); both refresh the channel's history page
afterwards, best effort, since a move itself renders nothing.

A pointer damaged by hand or by another tool (not JSON, a key missing) stops promotion, rollback
and retention with a ``StoreError`` naming the key; :func:`repair_pointer` (``model-release store
repair-pointer``) is the way out: it verifies the release it is told to point at, then replaces
whatever is stored (damaged or not) by a conditional write against exactly that content, and
records the move in history with action ``repair``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..errors import ModelReleaseError, ServiceUnavailable, StoreError, UserError
from ..names import check_channel, check_release_id
from .history_page import refresh_channel_page
from .keys import channel_key
from .model_store import ModelStore
from .pointer import (
    UNSET, ChannelPointer, append_history, history, last_recorded, move_channel, parse_pointer, read_pointer, replace_stored,
)
from .registry import RegistryFollower, report_uri
from .verify import require_verified, verify_release

log = logging.getLogger(__name__)


@dataclass
class RollbackResult:
    channel: str
    from_release: str | None
    to_release: str
    seq: int
    mlflow_alias: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _rollback_target(store: ModelStore, channel: str, current: str) -> str:
    """The newest release promoted to the channel before ``current``, not rolled back (or repaired)
    away from, that verifies now."""
    entries = history(store, channel)
    left = {e.previous_release for e in entries if e.action in ("rollback", "repair")}
    tried: set[str] = set()
    for entry in reversed(entries):
        rid = entry.release_id
        if entry.action != "promote" or rid == current or rid in left or rid in tried:
            continue
        tried.add(rid)
        report = verify_release(store, rid)
        if report.ok:
            return rid
        log.warning("rollback: skipping %s of channel %s: it does not verify (%s)", rid, channel,
                    "; ".join(f"{k}: {v}" for k, v in sorted(report.problems.items())[:2]))
    if not tried:  # nothing to roll back to: the request, not the store, is what cannot be met
        raise UserError(f"rollback: channel {channel!r} in {store.uri} has no earlier release to roll back to in its "
                        f"history (it serves {current!r}; a release rolled back from is not a target again): name one "
                        "with --to (see `model-release store releases`)")
    raise StoreError(
        f"rollback: channel {channel!r} in {store.uri} has no earlier complete release that verifies in its history "
        f"(current {current!r}; {len(tried)} earlier release(s) checked, none verifies); name one with --to "
        "(see `model-release store releases`)"
    )


def rollback(
    store: ModelStore,
    channel: str,
    to_release: str | None = None,
    *,
    follower: RegistryFollower | None = None,
    expected_current: Any = UNSET,
) -> RollbackResult:
    """Move ``channel`` back to an earlier verified release.

    Args:
        store: the model store.
        channel: the channel to move back.
        to_release: the release to move to; None picks the most recent release promoted to this
            channel before the current one that was not itself rolled back from and verifies.
        follower: the registry to keep in step (MLflow alias), or None.
        expected_current: as in :func:`move_channel`.

    Raises:
        UserError: nothing to roll back (no pointer, no earlier release, or the pointer is on the target already).
        StoreError: the target is not complete and verified, or no earlier release verifies.
        ConflictError: the pointer moved meanwhile.
    """
    check_channel(channel)
    if to_release is not None:
        check_release_id(to_release)
    current = read_pointer(store, channel)
    if current is None:
        raise UserError(f"rollback: channel {channel!r} in {store.uri} points at nothing yet, so there is nothing to "
                        "roll back; promote a release first (`model-release store history` lists a channel's moves)")
    target = to_release if to_release is not None else _rollback_target(store, channel, current.release_id)
    manifest = require_verified(store, target, purpose="rollback")
    if target == current.release_id:
        if current.action != "rollback":
            raise UserError(f"rollback: channel {channel!r} already points at {target!r}; name an earlier release")
        pointer, previous = current, current.previous_release  # a retried rollback: only the registry is redone
    else:
        expected = current.release_id if expected_current is UNSET else expected_current
        pointer, previous, _ = move_channel(store, channel, target, expected_current=expected, action="rollback")
    refresh_channel_page(store, channel)  # a view of the move; never fails the rollback
    result = RollbackResult(channel=channel, from_release=previous, to_release=target, seq=pointer.seq)
    if follower is not None:
        try:
            result.mlflow_alias = follower.on_rollback(manifest, channel, target, report_uri(store, target, manifest))
        except ModelReleaseError as exc:
            raise exc.restated(f"channel {channel!r} was rolled back to {target!r}, but the registry did not follow: "
                               f"{exc.message}. Rerun the rollback with --to {target} once fixed") from None
        except Exception as exc:
            raise ServiceUnavailable(
                f"channel {channel!r} was rolled back to {target!r}, but the registry did not follow "
                f"({type(exc).__name__}); rerun the rollback with --to {target} once the registry is reachable"
            ) from None
    return result


@dataclass
class RepairResult:
    """What :func:`repair_pointer` did.

    Attributes:
        channel: the channel repaired.
        to_release: the release it points at now.
        from_release: the release the pointer named before, when it could be read.
        seq: the pointer's move number now.
        damage: what was wrong with the stored pointer (None: it was readable).
        moved: False when the pointer already named ``to_release`` (a retried repair).
    """

    channel: str
    to_release: str
    from_release: str | None
    seq: int
    damage: str | None
    moved: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def repair_pointer(store: ModelStore, channel: str, release_id: str) -> RepairResult:
    """Point ``channel`` at ``release_id`` whatever the stored pointer holds: damaged, naming a
    release that does not exist, or sound. The way out when promotion and rollback refuse a
    pointer.

    The release is verified first. The new pointer replaces exactly the content read (a
    conditional write against its etag, or create-only when there is none), so a pointer moved
    meanwhile is not overwritten; the move is appended to history with action ``repair``.

    Raises:
        SpecError: a bad channel or release id.
        StoreError: the release is not complete and verified.
        ConflictError: the pointer changed between the read and the write; ``.winner`` names
            what it holds now (None when that is damaged too).
    """
    check_channel(channel)
    check_release_id(release_id)
    require_verified(store, release_id, purpose="repair-pointer")
    got = store.backend.get_bytes(channel_key(channel))
    current, damage = parse_pointer(channel, got)
    if current is not None:
        append_history(store, current)  # a crashed mover's missing entry, as move_channel does
        if current.release_id == release_id:
            return RepairResult(channel, release_id, current.previous_release, current.seq, None, False)
        seq, previous = current.seq + 1, current.release_id
    else:
        last, previous = last_recorded(store, channel)
        seq = last + 1
    new = ChannelPointer(channel=channel, release_id=release_id, previous_release=previous, seq=seq, action="repair")
    replace_stored(store, new, got)
    refresh_channel_page(store, channel)  # a view of the move; never fails the repair
    log.warning("repair-pointer: channel %s of %s now points at %s (was %s)", channel, store.uri, release_id,
                f"damaged: {damage}" if damage else repr(previous))
    return RepairResult(channel, release_id, current.release_id if current else None, seq, damage, True)
