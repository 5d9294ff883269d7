"""One claim for every way a release starts: the CLI's ``release``, the manual and scheduled DAGs, a registry event.

The steps, the same for each entry point:

1. The candidate is resolved once (:func:`~model_release.intake.candidate.resolve_candidate`): the
   version the alias names now and, for a cascade or fan-out, each member's.
2. :func:`take` claims it in the channel's ledger (:func:`.ledger.claim`, a conditional write) for a
   :class:`Holder`: an Airflow run, whose liveness Airflow is asked about, or a process (the CLI),
   which renews its claim while it releases (:class:`Lease`) so that a claim whose process died
   lapses after ``lease_s``. A version another live run holds is refused with
   :class:`~model_release.errors.ClaimHeld`: one line naming that run and when it started (the
   CLI's exit code 6). Nothing is written then.
3. The :class:`Claim` travels with the run (the DAG's XCom reference, or the CLI's process) and
   carries the candidate, so intake downloads exactly what was claimed.
4. :func:`settle` records how the run ended (released, rejected, failed, inconclusive; a run not
   asked to promote drops its claim), from the stages' results and errors in the workspace.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ClaimHeld, ConflictError
from ..intake.candidate import Candidate
from . import ledger

log = logging.getLogger(__name__)

#: how long a process's claim lives without a renewal: a CLI release killed half way (no settle)
#: frees its version this long after its last renewal, which comes every quarter of it
PROCESS_LEASE_S = 120.0


@dataclass(frozen=True)
class Holder:
    """Who claims: ``run`` (``dag_id``, ``run_id``) and, for a process that renews its claim, ``lease_s``."""

    run: dict[str, Any]
    lease_s: float | None = None

    @classmethod
    def airflow(cls, run: dict[str, Any]) -> "Holder":
        """An Airflow DAG run (``dag_id``, ``run_id``): its claim lives while Airflow says the run runs."""
        return cls({"dag_id": run.get("dag_id"), "run_id": run.get("run_id")})

    @classmethod
    def process(cls, lease_s: float = PROCESS_LEASE_S) -> "Holder":
        """This process (``cli USER@HOST pid N``): its claim lives while :class:`Lease` renews it."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no name for this uid (a container)
            user = str(os.getuid())
        return cls({"dag_id": None, "run_id": f"cli {user}@{socket.gethostname()} pid {os.getpid()}"}, lease_s)


@dataclass
class Claim:
    """A claimed candidate: what the run releases, under which ledger version, and who holds it."""

    channel: str
    model: str
    #: the ledger's version: the model version, or ``<version>+<digest>`` for a pipeline's member combination
    version: str
    release_id: str
    candidate: Candidate
    run: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    lease_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "model": self.model, "version": self.version, "release_id": self.release_id,
                "candidate": self.candidate.to_dict(), "run": dict(self.run), "started_at": self.started_at,
                "lease_s": self.lease_s}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Claim":
        return cls(data["channel"], data["model"], str(data["version"]), data.get("release_id", ""),
                   Candidate.from_dict(data["candidate"]), dict(data.get("run") or {}), data.get("started_at"),
                   data.get("lease_s"))


def ledger_version(candidate: Candidate) -> str:
    """The version the ledger knows ``candidate`` by (:func:`.ledger.pipeline_version`)."""
    return ledger.pipeline_version(candidate.version, candidate.identity)


def take(store: Any, channel: str, candidate: Candidate, *, release_id: str, holder: Holder,
         retry_rejected: bool, retry_released: bool,
         is_active: Callable[[dict[str, Any]], bool] | None = None) -> tuple[Claim | None, str]:
    """Claim ``candidate`` in ``channel``'s ledger for ``holder``.

    Args:
        retry_rejected, retry_released: claim a version the channel rejected (released) before; a
            person's release (the CLI, a manual DAG run) does, a schedule does not.
        is_active: asks Airflow whether a run holding the claim still runs; None where it cannot be
            asked (see :func:`.ledger.holder_alive`).

    Returns:
        ``(claim, why)``; ``claim`` is None when the channel already settled the version and this
        run may not retry it (``why`` says how it was settled).

    Raises:
        ClaimHeld: another live run holds the claim; the message names it and when it started.
        ConflictError: the entry kept changing under five attempts.
    """
    version = ledger_version(candidate)
    decision = ledger.claim(store, channel, candidate.model, version, release_id=release_id, run=holder.run,
                            retry_rejected=retry_rejected, retry_released=retry_released, is_active=is_active,
                            lease_s=holder.lease_s)
    if decision.held:
        raise ClaimHeld(decision.reason, holder=decision.entry)
    if not decision.go:
        return None, decision.reason
    log.info("claim: %s (%s)", decision.reason, candidate.describe())
    entry = decision.entry or {}
    return Claim(channel, candidate.model, version, release_id, candidate, dict(holder.run), entry.get("started_at"),
                 holder.lease_s), decision.reason


class Lease:
    """Renews a process's claim while it releases: a thread renews it every quarter of its lease.

    Use as a context manager around the release. :meth:`check` raises when the claim is no longer
    this release's (it lapsed while the process stalled, and another run took it over): the release
    must then not promote.
    """

    def __init__(self, store: Any, claim: Claim, *, every_s: float | None = None) -> None:
        self.store, self.claim = store, claim
        self.every_s = every_s if every_s is not None else (claim.lease_s or PROCESS_LEASE_S) / 4
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="claim-lease", daemon=True)

    def __enter__(self) -> "Lease":
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _renew(self) -> None:
        c = self.claim
        while not self._stop.wait(self.every_s):
            try:
                mine = ledger.renew(self.store, c.channel, c.model, c.version, release_id=c.release_id)
            except Exception as exc:  # noqa: BLE001 - a store blip: the next renewal tries again, within the lease
                log.warning("claim: could not renew the claim on %s v%s (%s); trying again in %g s", c.model, c.version,
                            type(exc).__name__, self.every_s)
                continue
            if not mine:
                self.lost = f"the claim on {c.model} v{c.version} in channel {c.channel!r} is no longer this release's"
                return

    def check(self) -> None:
        """Raise ConflictError when the claim was lost (taken over by another run)."""
        if self.lost is None:
            found = ledger.read_entry(self.store, self.claim.channel, self.claim.model, self.claim.version)
            entry = found[0] if found else {}
            if entry.get("release_id") != self.claim.release_id or entry.get("state") != ledger.CLAIMED:
                self.lost = (f"the claim on {self.claim.model} v{self.claim.version} in channel {self.claim.channel!r} "
                             f"is now release {entry.get('release_id')}'s ({entry.get('state')})")
        if self.lost is not None:
            raise ConflictError(f"{self.lost}: its renewals stopped for longer than its lease and another run took it "
                                "over; nothing is promoted by this release")


def settle(store: Any, claim: dict[str, Any], ws: Any, *, run: dict[str, Any],
           promote_asked: bool) -> tuple[str | None, str, dict[str, Any] | None]:
    """Record in the ledger how the run that holds ``claim`` ended, from its workspace.

    Returns:
        ``(state, reason, entry)``: ``state`` None when the run was not asked to promote (its claim
        is dropped); ``entry`` None when the entry is no longer this release's (nothing written).
        A version the watch rejected in production stays rejected.
    """
    from ..stages import PROMOTE, STAGE_FOLDERS
    from ..types import PromoteResult

    errors = {stage: err for stage in STAGE_FOLDERS if (err := ws.load_error(stage)) is not None}
    promoted = ws.load_result(PROMOTE, PromoteResult) is not None
    state, reason = ledger.verdict_of(errors, promoted, promote_asked=promote_asked)
    channel, model, version = claim["channel"], claim["model"], claim["version"]
    if state is None:
        ledger.release(store, channel, model, version, release_id=ws.release_id)
        return None, reason, None
    entry = ledger.settle(store, channel, model, version, release_id=ws.release_id, run=run, state=state, reason=reason)
    if entry is not None and entry.get("state") == ledger.REJECTED and state == ledger.RELEASED:
        state, reason = ledger.REJECTED, entry.get("reason", "")  # the watch rolled it back: that verdict stands
    return state, reason, entry
