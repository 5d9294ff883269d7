"""The channel pointer protocol, whole: read, parse, damage, conditional write, history, conflict.

A channel's pointer is ``channels/<channel>.json``; each move of it is also recorded, create-only,
as ``history/<channel>/<seq:010d>.json`` (see :mod:`.keys`). One promotion's pointer move happens
in this module from its first read to its last write:

1. the pointer is read with its etag (:func:`read_pointer`); a stored pointer that is not what
   model-release writes (not JSON, a key missing or of the wrong type) is *damaged* and stops the
   move with a ``StoreError`` naming the key and the repair command (:func:`repair_hint`);
2. the new pointer is written conditionally (:func:`write_pointer`): create-only when there was
   none, replace-only-that-etag otherwise. Of two concurrent moves exactly one write succeeds;
   the other gets ``ConflictError`` naming the release that won (:func:`conflict`);
3. the history entry is written after the pointer (:func:`append_history`, create-only, numbered
   by the pointer's ``seq``); a move that died between the two is repaired by the next move,
   which first writes the missing entry from the pointer it read, so history and pointer agree.

A move renders nothing: the channel's history page is a view its callers refresh afterwards
(promotion, rollback, repair, a kept rejection; see :mod:`.history_page`). Rollback and repair,
which decide *where* a pointer moves, live in :mod:`.channels` and move it through this module.

The functions take any store with a ``uri`` and a ``backend`` (:class:`PointerStore`), so this
module needs nothing from the store handle (:mod:`.model_store`), which offers
``ModelStore.read_pointer`` on top of it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ..errors import ConflictError, StoreError
from ..names import check_channel, is_release_id
from ..stages import PROMOTE
from .backend import PreconditionFailed, StoreBackend
from .documents import FORMAT, actor, dumps, excerpt, utcnow
from .keys import channel_key, history_key, history_prefix, history_seq

log = logging.getLogger(__name__)


class PointerStore(Protocol):
    """What the pointer protocol needs of a store: its URI (for messages) and its backend."""

    uri: str
    backend: StoreBackend


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: ``expected_current`` default: compare-and-swap against whatever the pointer holds when read
UNSET: Any = _Unset()


@dataclass
class ChannelPointer:
    """The content of ``channels/<channel>.json`` (and of each history entry).

    Attributes:
        channel: the channel's name.
        release_id: the release it points at.
        previous_release: the release it pointed at before this move (None for the first).
        seq: 1 for the first move, then +1 per move; the history entry's number.
        action: ``promote``, ``rollback`` or ``repair``.
        updated_at: UTC time of the move.
        updated_by: who moved it (``$MODEL_RELEASE_ACTOR`` or user@host).
        etag: the stored object's etag when read (not serialised), for the next conditional write.
    """

    channel: str
    release_id: str
    previous_release: str | None
    seq: int
    action: str = "promote"
    updated_at: str = field(default_factory=utcnow)
    updated_by: str = field(default_factory=actor)
    format: int = FORMAT
    etag: str | None = field(default=None, compare=False)

    def to_doc(self) -> dict[str, Any]:
        """The stored document (everything but the etag)."""
        doc = asdict(self)
        doc.pop("etag")
        return doc

    @classmethod
    def from_doc(cls, doc: Any, etag: str | None = None, *, channel: str | None = None) -> "ChannelPointer":
        """The pointer a stored document describes.

        Raises:
            DamagedDocument: the document is not a pointer (not an object, a key missing or of
                the wrong type, or naming another channel than ``channel``); says which.
        """
        problem = pointer_problem(doc, channel)
        if problem:
            raise DamagedDocument(problem)
        known = {k: doc[k] for k in ("channel", "release_id", "previous_release", "seq", "action", "updated_at", "updated_by", "format") if k in doc}
        return cls(**known, etag=etag)


class DamagedDocument(Exception):
    """A stored pointer or history entry is not what model-release writes. Internal: the caller
    turns it into a ``StoreError`` naming the key and the way out."""


#: the keys every pointer and history entry carries, and their types
_POINTER_KEYS: dict[str, tuple[type, ...]] = {
    "channel": (str,), "release_id": (str,), "previous_release": (str, type(None)), "seq": (int,), "action": (str,),
}


def pointer_problem(doc: Any, channel: str | None = None) -> str | None:
    """What makes ``doc`` unusable as a channel pointer, or None when it is one."""
    if not isinstance(doc, dict):
        return f"it holds a JSON {type(doc).__name__}, not an object"
    for key, types in _POINTER_KEYS.items():
        if key not in doc:
            return f"key {key!r} is missing"
        value = doc[key]
        if not isinstance(value, types) or isinstance(value, bool):
            return f"key {key!r} is {value!r}, not {' or '.join('null' if t is type(None) else t.__name__ for t in types)}"
    if not is_release_id(doc["release_id"]):
        return f"key 'release_id' is {doc['release_id']!r}, not a valid release id"
    if doc["seq"] < 1:
        return f"key 'seq' is {doc['seq']!r}, not a move number >= 1"
    if channel is not None and doc["channel"] != channel:
        return f"key 'channel' is {doc['channel']!r}, not {channel!r}"
    return None


def repair_hint(uri: str, channel: str) -> str:
    """The way out of a damaged or dangling pointer, as a command line."""
    return (f"repair it with `model-release store repair-pointer --store {uri} --channel {channel} --to RELEASE`, "
            "naming a release `model-release store releases` lists as complete (it is verified first)")


def damaged_pointer(store: PointerStore, channel: str, problem: str) -> StoreError:
    """The error for a damaged pointer: which key, what is wrong, the way out."""
    return StoreError(
        f"channel pointer {store.uri}/{channel_key(channel)} is damaged: {problem}; promotion, rollback and "
        f"retention cannot use it: {repair_hint(store.uri, channel)}"
    )


def parse_pointer(channel: str, got: tuple[bytes, str] | None) -> tuple[ChannelPointer | None, str | None]:
    """A stored pointer's content (from ``backend.get_bytes``), read without raising:
    ``(pointer, None)``; ``(None, None)`` when there is none; ``(None, what is wrong)`` when damaged."""
    if got is None:
        return None, None
    try:
        return ChannelPointer.from_doc(json.loads(got[0]), etag=got[1], channel=channel), None
    except ValueError:
        problem = "it is not valid JSON"
    except DamagedDocument as exc:
        problem = str(exc)
    return None, f"{problem} (content {excerpt(got[0])})"


def inspect_pointer(store: PointerStore, channel: str) -> tuple[ChannelPointer | None, str | None]:
    """:func:`parse_pointer` of the channel's stored pointer."""
    return parse_pointer(channel, store.backend.get_bytes(channel_key(channel)))


def read_pointer(store: PointerStore, channel: str) -> ChannelPointer | None:
    """The channel's pointer, or None when there is none.

    Raises:
        SpecError: ``channel`` is not a valid channel name.
        StoreError: the stored pointer is damaged (not JSON, a key missing or of the wrong
            type); the message names the key and the repair command.
    """
    pointer, problem = inspect_pointer(store, check_channel(channel))
    if problem:
        raise damaged_pointer(store, channel, problem)
    return pointer


def read_channel(store: PointerStore, channel: str) -> ChannelPointer | None:
    """The channel's pointer, or None when the channel was never promoted to (see :func:`read_pointer`)."""
    return read_pointer(store, channel)


def write_pointer(store: PointerStore, pointer: ChannelPointer, *, etag: str | None) -> ChannelPointer:
    """Write the pointer only if the stored one still has ``etag`` (create-only when None);
    the pointer's ``etag`` becomes the new one.

    Raises:
        PreconditionFailed: someone else wrote the pointer meanwhile.
    """
    key = channel_key(pointer.channel)
    data = dumps(pointer.to_doc())
    if etag is None:
        pointer.etag = store.backend.put_bytes(key, data, if_none_match=True)
    else:
        pointer.etag = store.backend.put_bytes(key, data, if_match=etag)
    return pointer


def append_history(store: PointerStore, pointer: ChannelPointer) -> None:
    """Record a pointer move; an entry that exists already is left as it is."""
    try:
        store.backend.put_bytes(history_key(pointer.channel, pointer.seq), dumps(pointer.to_doc()), if_none_match=True)
    except PreconditionFailed:
        pass


def conflict(store: PointerStore, channel: str, release_id: str, expected: str | None, winner: str | None) -> ConflictError:
    """The error of a move that lost: who won, what this move expected, what to do."""
    return ConflictError(
        f"channel {channel!r} in {store.uri} moved to release {winner!r} while moving it to {release_id!r} "
        f"(this move expected {expected!r}); {winner!r} won and nothing was changed by this move. "
        f"Check {release_id!r} against {winner!r} and move again if it should still replace it.",
        winner=winner,
        stage=PROMOTE,
    )


def move_channel(
    store: PointerStore, channel: str, release_id: str, *, expected_current: Any = UNSET, action: str = "promote"
) -> tuple[ChannelPointer, str | None, bool]:
    """Point ``channel`` at ``release_id`` with a conditional write, then append history.

    Renders nothing: the caller refreshes the channel's page (``refresh_channel_page``).

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
    current = read_pointer(store, channel)
    current_id = current.release_id if current else None
    if current is not None and current_id == release_id and action == "promote":
        append_history(store, current)  # repair, in case the previous attempt died before writing it
        return current, current.previous_release, False
    if expected_current is not UNSET and current_id != expected_current:
        raise conflict(store, channel, release_id, expected_current, current_id)
    if current is not None:
        append_history(store, current)  # repair a history entry a crashed mover left out
    new = ChannelPointer(channel=channel, release_id=release_id, previous_release=current_id,
                         seq=(current.seq + 1) if current else 1, action=action)
    try:
        if current is not None and not current.etag:
            raise PreconditionFailed("the pointer being replaced has no etag")
        write_pointer(store, new, etag=current.etag if current else None)
    except PreconditionFailed:
        now = read_pointer(store, channel)
        raise conflict(store, channel, release_id, current_id, now.release_id if now else None) from None
    append_history(store, new)
    log.info("%s: channel %s of %s now points at %s (was %s)", action, channel, store.uri, release_id, current_id)
    return new, current_id, True


def replace_stored(store: PointerStore, new: ChannelPointer, got: tuple[bytes, str] | None) -> None:
    """Write ``new`` over exactly the stored content ``got`` (as ``backend.get_bytes`` returned it,
    damaged or not; create-only when None), then append history: the repair's write.

    Raises:
        ConflictError: the pointer changed since ``got`` was read; ``.winner`` names what it
            holds now (None when that is damaged too). Nothing was written.
    """
    try:
        write_pointer(store, new, etag=got[1] if got is not None else None)
    except PreconditionFailed:
        now, _ = inspect_pointer(store, new.channel)
        winner = now.release_id if now else None
        raise ConflictError(
            f"repair-pointer: channel {new.channel!r} in {store.uri} changed while it was being repaired (it now names "
            f"{winner!r}); nothing was written. Look at it again (`model-release store history`) and rerun if it "
            "still needs repair",
            winner=winner,
        ) from None
    append_history(store, new)


def history(store: PointerStore, channel: str) -> list[ChannelPointer]:
    """Every move of ``channel``, oldest first (including one a crashed mover left out of history).

    A damaged pointer is left out (it records no move; ``read_channel`` reports it).

    Raises:
        StoreError: a history entry is damaged; the message names it.
    """
    entries: list[ChannelPointer] = []
    for info in store.backend.list(history_prefix(channel)):
        entry, problem = parse_pointer(channel, store.backend.get_bytes(info.key))
        if problem:
            raise StoreError(
                f"history entry {store.uri}/{info.key} is damaged: {problem}. History is a record only: restore the "
                "entry from a backup or move it aside, then run again"
            )
        if entry is not None:
            entries.append(entry)
    entries.sort(key=lambda p: p.seq)
    current, _ = inspect_pointer(store, channel)
    if current is not None and (not entries or entries[-1].seq < current.seq):
        entries.append(current)
    return entries


def last_recorded(store: PointerStore, channel: str) -> tuple[int, str | None]:
    """(the highest history number, the release of that entry when readable), from a damaged
    channel's history: numbers come from the keys, so a damaged entry cannot hide one."""
    seqs = [(seq, info.key) for info in store.backend.list(history_prefix(channel))
            if (seq := history_seq(info.key)) is not None]
    if not seqs:
        return 0, None
    seq, key = max(seqs)
    entry, _ = parse_pointer(channel, store.backend.get_bytes(key))
    return seq, entry.release_id if entry else None
