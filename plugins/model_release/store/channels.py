"""Channel pointers: read, move by compare-and-swap, history, rollback.

A move reads the pointer (and its etag), then writes the new pointer conditionally: create-only
when there was none, replace-only-that-etag otherwise. Of two concurrent moves exactly one
write succeeds; the other gets ``ConflictError`` naming the release that won. The history entry
is written after the pointer (create-only, numbered by the pointer's ``seq``); a move that died
between the two is repaired by the next move, which first writes the missing entry from the
pointer it read, so history and pointer always agree.

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

from ..errors import ConflictError, ModelReleaseError, ServiceUnavailable, StoreError
from ..names import check_release_id
from .backend import PreconditionFailed
from .layout import ChannelPointer, ModelStore, check_channel, dumps
from .registry import RegistryFollower, report_uri
from .verify import require_verified, verify_release

log = logging.getLogger(__name__)


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: ``expected_current`` default: compare-and-swap against whatever the pointer holds when read
UNSET: Any = _Unset()


def read_channel(store: ModelStore, channel: str) -> ChannelPointer | None:
    """The channel's pointer, or None when the channel was never promoted to."""
    return store.read_pointer(check_channel(channel))


def _conflict(store: ModelStore, channel: str, release_id: str, expected: str | None, winner: str | None) -> ConflictError:
    return ConflictError(
        f"channel {channel!r} in {store.uri} moved to release {winner!r} while moving it to {release_id!r} "
        f"(this move expected {expected!r}); {winner!r} won and nothing was changed by this move. "
        f"Check {release_id!r} against {winner!r} and move again if it should still replace it.",
        winner=winner,
        stage="promote",
    )


def move_channel(
    store: ModelStore, channel: str, release_id: str, *, expected_current: Any = UNSET, action: str = "promote"
) -> tuple[ChannelPointer, str | None, bool]:
    """Point ``channel`` at ``release_id`` with a conditional write, then append history.

    Args:
        store: the model store.
        channel: the channel to move.
        release_id: the release it should point at (the caller has verified it).
        expected_current: the release the caller believes is current (None: no pointer yet);
            UNSET compares against whatever is read now.
        action: ``promote``, ``rollback`` or ``repair``, recorded in the pointer and history.

    Returns:
        (the pointer now stored, the release it pointed at before, whether this call moved it).
        A promotion of the release already current does not move anything (an idempotent retry).

    Raises:
        ConflictError: the pointer is not at ``expected_current``, or another writer moved it
            between the read and the write; ``.winner`` is the release it points at now.
    """
    check_channel(channel)
    current = store.read_pointer(channel)
    current_id = current.release_id if current else None
    if current is not None and current_id == release_id and action == "promote":
        store.append_history(current)  # repair, in case the previous attempt died before writing it
        return current, current.previous_release, False
    if expected_current is not UNSET and current_id != expected_current:
        raise _conflict(store, channel, release_id, expected_current, current_id)
    if current is not None:
        store.append_history(current)  # repair a history entry a crashed mover left out
    new = ChannelPointer(
        channel=channel,
        release_id=release_id,
        previous_release=current_id,
        seq=(current.seq + 1) if current else 1,
        action=action,
    )
    try:
        store.write_pointer(new, replacing=current)
    except PreconditionFailed:
        now = store.read_pointer(channel)
        raise _conflict(store, channel, release_id, current_id, now.release_id if now else None) from None
    store.append_history(new)
    log.info("%s: channel %s of %s now points at %s (was %s)", action, channel, store.uri, release_id, current_id)
    return new, current_id, True


def history(store: ModelStore, channel: str) -> list[ChannelPointer]:
    """Every move of ``channel``, oldest first (including one a crashed mover left out of history).

    A damaged pointer is left out (it records no move; ``read_channel`` reports it).

    Raises:
        StoreError: a history entry is damaged; the message names it.
    """
    check_channel(channel)
    entries: list[ChannelPointer] = []
    for info in store.backend.list(f"history/{channel}/"):
        got = store.backend.get_bytes(info.key)
        entry, problem = store.parse_pointer(channel, got)
        if problem:
            raise StoreError(
                f"history entry {store.uri}/{info.key} is damaged: {problem}. History is a record only: restore the "
                "entry from a backup or move it aside, then run again"
            )
        if entry is not None:
            entries.append(entry)
    entries.sort(key=lambda p: p.seq)
    current, _ = store.inspect_pointer(channel)
    if current is not None and (not entries or entries[-1].seq < current.seq):
        entries.append(current)
    return entries


def _refresh_page(store: ModelStore, channel: str) -> None:
    """Rewrite the channel's history page (``channels/<channel>.html``); best effort, never raises."""
    from .history_page import refresh_channel_page

    refresh_channel_page(store, channel)


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
    raise StoreError(
        f"rollback: channel {channel!r} in {store.uri} has no earlier complete release that verifies in its history "
        f"(current {current!r}; {len(tried)} earlier release(s) checked); name one with --to "
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
        StoreError: no pointer, no earlier release, or the target is not complete and verified.
        ConflictError: the pointer moved meanwhile.
    """
    check_channel(channel)
    if to_release is not None:
        check_release_id(to_release)
    current = store.read_pointer(channel)
    if current is None:
        raise StoreError(f"rollback: channel {channel!r} in {store.uri} points at nothing yet; promote a release first")
    target = to_release if to_release is not None else _rollback_target(store, channel, current.release_id)
    manifest = require_verified(store, target, purpose="rollback")
    if target == current.release_id:
        if current.action != "rollback":
            raise StoreError(f"rollback: channel {channel!r} already points at {target!r}; name an earlier release")
        pointer, previous = current, current.previous_release  # a retried rollback: only the registry is redone
    else:
        expected = current.release_id if expected_current is UNSET else expected_current
        pointer, previous, _ = move_channel(store, channel, target, expected_current=expected, action="rollback")
    _refresh_page(store, channel)
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


def _last_recorded(store: ModelStore, channel: str) -> tuple[int, str | None]:
    """(the highest history number, the release of that entry when readable), from a damaged
    channel's history: numbers come from the keys, so a damaged entry cannot hide one."""
    seqs = []
    for info in store.backend.list(f"history/{channel}/"):
        name = info.key.rsplit("/", 1)[-1]
        if name.endswith(".json") and name[:-5].isdigit():
            seqs.append((int(name[:-5]), info.key))
    if not seqs:
        return 0, None
    seq, key = max(seqs)
    entry, _ = store.parse_pointer(channel, store.backend.get_bytes(key))
    return seq, entry.release_id if entry else None


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
    key = store.channel_key(channel)
    got = store.backend.get_bytes(key)
    current, damage = store.parse_pointer(channel, got)
    if current is not None:
        store.append_history(current)  # a crashed mover's missing entry, as move_channel does
        if current.release_id == release_id:
            return RepairResult(channel, release_id, current.previous_release, current.seq, None, False)
        seq, previous = current.seq + 1, current.release_id
    else:
        last, previous = _last_recorded(store, channel)
        seq = last + 1
    new = ChannelPointer(channel=channel, release_id=release_id, previous_release=previous, seq=seq, action="repair")
    try:
        if got is None:
            store.backend.put_bytes(key, dumps(new.to_doc()), if_none_match=True)
        else:
            store.backend.put_bytes(key, dumps(new.to_doc()), if_match=got[1])
    except PreconditionFailed:
        now, _ = store.inspect_pointer(channel)
        winner = now.release_id if now else None
        raise ConflictError(
            f"repair-pointer: channel {channel!r} in {store.uri} changed while it was being repaired (it now names "
            f"{winner!r}); nothing was written. Look at it again (`model-release store history`) and rerun if it "
            "still needs repair",
            winner=winner,
        ) from None
    store.append_history(new)
    _refresh_page(store, channel)
    log.warning("repair-pointer: channel %s of %s now points at %s (was %s)", channel, store.uri, release_id,
                f"damaged: {damage}" if damage else repr(previous))
    return RepairResult(channel, release_id, current.release_id if current else None, seq, damage, True)
