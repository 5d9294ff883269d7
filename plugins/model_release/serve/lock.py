"""One roll-out per channel's fleet at a time: a lock object in the store, taken by conditional write.

``serving/<channel>/lock.json`` holds who took it, a token and when it expires. Taking it is an
``If-None-Match`` write (no lock) or an ``If-Match`` over an expired one; the holder refreshes the
expiry as it goes and deletes it when done. A roll-out that was killed leaves its lock until it
expires; the next one waits for that (up to ``wait_s``) rather than run beside a live one.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from ..store import keys
from ..store.backend import PreconditionFailed
from ..store.documents import actor, dumps
from ..store.model_store import ModelStore
from .errors import RolloutLocked


def lock_key(channel: str) -> str:
    return keys.rollout_lock_key(channel)


@dataclass
class RolloutLock:
    """A held lock; :meth:`refresh` pushes its expiry on, :meth:`release` deletes it."""

    store: ModelStore
    channel: str
    token: str
    ttl_s: float
    etag: str

    def _doc(self) -> dict[str, Any]:
        return {"owner": actor(), "token": self.token, "expires_at": time.time() + self.ttl_s}

    def refresh(self) -> None:
        try:
            self.etag = self.store.backend.put_bytes(lock_key(self.channel), dumps(self._doc()), if_match=self.etag)
        except PreconditionFailed:
            raise RolloutLocked(f"the roll-out lock {self.store.uri}/{lock_key(self.channel)} was taken over by another "
                                "roll-out (this one ran past its expiry); stopping: rerun once the other is done") from None

    def release(self) -> None:
        got = self.store.read_json(lock_key(self.channel))
        if got is not None and got[0].get("token") == self.token:
            self.store.backend.delete([lock_key(self.channel)])


def acquire(store: ModelStore, channel: str, *, ttl_s: float = 600, wait_s: float = 0) -> RolloutLock:
    """Take the channel's roll-out lock, waiting up to ``wait_s`` for a held one to be released or expire.

    Raises:
        RolloutLocked: another roll-out holds it (its owner and expiry named).
    """
    key = lock_key(channel)
    token = secrets.token_hex(8)
    deadline = time.monotonic() + wait_s
    while True:
        lock = RolloutLock(store, channel, token, ttl_s, "")
        got = store.read_json(key)
        try:
            if got is None:
                lock.etag = store.backend.put_bytes(key, dumps(lock._doc()), if_none_match=True)
                return lock
            doc, etag = got
            if float(doc.get("expires_at", 0)) < time.time():
                lock.etag = store.backend.put_bytes(key, dumps(lock._doc()), if_match=etag)
                return lock
        except PreconditionFailed:
            got = store.read_json(key) or got
        if time.monotonic() >= deadline:
            holder = (got or ({}, ""))[0]
            left = float(holder.get("expires_at", 0)) - time.time()
            raise RolloutLocked(
                f"another roll-out of channel {channel!r} holds {store.uri}/{key} (owner {holder.get('owner')!r}, "
                f"expires in {left:.0f} s); wait for it to finish, or for the lock to expire if it was killed"
            )
        time.sleep(0.5)
