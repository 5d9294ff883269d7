"""One roll-out per channel's fleet at a time: a lease in the store, taken by conditional write and renewed.

``serving/<channel>/lock.json`` holds who holds it, a token, the lease term and when the holder last
renewed it. Taking it is an ``If-None-Match`` write (no lease) or an ``If-Match`` over a lease that
has lapsed; the holder renews it from a thread of its own every third of its term (``If-Match`` its
own last write) and deletes it when done. A roll-out killed by SIGKILL stops renewing, so its lease
lapses within one term (seconds, :data:`DEFAULT_TERM_S`) and the next roll-out takes it: no one
waits out a ten-minute expiry.

A lease has lapsed when either

- its ``expires_at`` (the holder's wall clock at its last renewal plus the term) is past on this
  machine's clock, or
- this taker has watched it for a whole term on its own monotonic clock and it did not change
  (the etag stayed the same): a holder that renews changes it every third of a term, so an
  unchanged lease is a dead holder's whatever the two machines' clocks say.

:func:`acquire` waits up to ``wait_s`` (default: one term and a little, long enough to see a killed
holder's lease lapse); a live holder keeps renewing, so the taker then fails with
:class:`~.errors.RolloutLocked` naming the holder. A holder whose renewal finds the lease taken
over (it was paused past its term) marks the lease lost; :meth:`RolloutLease.check` then raises, and
the roll-out calls it before every move.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..store import keys
from ..store.backend import PreconditionFailed
from ..store.documents import actor, dumps
from ..store.model_store import ModelStore
from .errors import RolloutLocked

#: the lease term: a killed roll-out's lock is free this long after its last renewal
DEFAULT_TERM_S = 10.0


def lock_key(channel: str) -> str:
    return keys.rollout_lock_key(channel)


@dataclass
class RolloutLease:
    """A held lease: renewed from a daemon thread until :meth:`release`; :meth:`check` raises once it was lost."""

    store: ModelStore
    channel: str
    token: str
    term_s: float
    etag: str = ""
    lost: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def doc(self) -> dict[str, Any]:
        now = time.time()
        return {"owner": actor(), "token": self.token, "term_s": self.term_s, "renewed_at": now,
                "expires_at": now + self.term_s}

    def renew(self) -> None:
        """Renew the lease now (``If-Match`` its last write).

        Raises:
            RolloutLocked: another roll-out took it over (this one was paused past its term).
        """
        self.check()
        try:
            self.etag = self.store.backend.put_bytes(lock_key(self.channel), dumps(self.doc()), if_match=self.etag)
        except PreconditionFailed:
            self.lost = (f"the roll-out lock {self.store.uri}/{lock_key(self.channel)} was taken over by another roll-out "
                         f"(this one did not renew it within its {self.term_s:g} s term); stopping: rerun once the other is done")
            raise RolloutLocked(self.lost) from None

    def check(self) -> None:
        """Raise when the lease was lost (another roll-out holds the channel now).

        Raises:
            RolloutLocked: the renewal found the lease taken over.
        """
        if self.lost:
            raise RolloutLocked(self.lost)

    # kept for the watch's clock, which renews before each wait of a bake
    refresh = renew

    def start(self) -> "RolloutLease":
        """Renew from a daemon thread every third of the term until :meth:`release`."""
        def run() -> None:
            while not self._stop.wait(self.term_s / 3):
                try:
                    self.renew()
                except RolloutLocked:
                    return
                except Exception:  # noqa: BLE001 - a store hiccup: the next renewal tries again within the term
                    continue

        self._thread = threading.Thread(target=run, name=f"rollout-lease-{self.channel}", daemon=True)
        self._thread.start()
        return self

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still this holder's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        got = self.store.read_json(lock_key(self.channel))
        if got is not None and got[0].get("token") == self.token:
            self.store.backend.delete([lock_key(self.channel)])


def acquire(store: ModelStore, channel: str, *, term_s: float = DEFAULT_TERM_S,
            wait_s: float | None = None) -> RolloutLease:
    """Take the channel's roll-out lease and start renewing it.

    Args:
        store: the model store.
        channel: the channel whose fleet the roll-out moves.
        term_s: the lease term (a killed holder's lease is free at most this long after its last renewal).
        wait_s: how long to wait for a held lease to be released or to lapse; None: the held lease's
            own term and 2 s (enough for a killed holder's to lapse); 0: fail at once.

    Raises:
        RolloutLocked: a live roll-out holds it (its owner and last renewal named).
    """
    key = lock_key(channel)
    lease = RolloutLease(store, channel, secrets.token_hex(8), term_s)
    started = time.monotonic()
    seen: tuple[str, float] | None = None  # (etag, when this taker first saw it)
    while True:
        got = store.read_json(key)
        try:
            if got is None:
                lease.etag = store.backend.put_bytes(key, dumps(lease.doc()), if_none_match=True)
                return lease.start()
            doc, etag = got
            if seen is None or seen[0] != etag:
                seen = (etag, time.monotonic())
            if float(doc.get("expires_at", 0)) < time.time() or time.monotonic() - seen[1] > float(doc.get("term_s", term_s)):
                lease.etag = store.backend.put_bytes(key, dumps(lease.doc()), if_match=etag)
                return lease.start()
        except PreconditionFailed:
            got = store.read_json(key) or got
        held_term = float((got or ({}, ""))[0].get("term_s", term_s))
        limit = held_term + 2.0 if wait_s is None else wait_s
        if time.monotonic() - started >= limit:
            holder = (got or ({}, ""))[0]
            ago = time.time() - float(holder.get("renewed_at", holder.get("expires_at", 0) - term_s))
            raise RolloutLocked(
                f"another roll-out of channel {channel!r} holds {store.uri}/{key} (owner {holder.get('owner')!r}, renewed "
                f"{ago:.0f} s ago, term {float(holder.get('term_s', term_s)):g} s) and keeps renewing it; wait for it to "
                "finish (a killed roll-out's lease lapses within its term), or pass --lock-wait SECONDS to wait longer"
            )
        time.sleep(min(0.5, max(0.05, held_term / 10)))
