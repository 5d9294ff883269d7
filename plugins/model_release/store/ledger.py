"""The channel's ledger: which model versions a channel released, rejected, or is releasing now.

One small JSON object per (channel, model, version) in the model store, beside the releases
(so the module lives in ``store/``, its key in :mod:`.keys`). A cascade's or fan-out's version is
the model version and a digest of every member's version (:func:`pipeline_version`)::

    ledger/<channel>/<model>/<version>.json
        {"model", "version", "channel", "state", "release_id", "run": {"dag_id", "run_id"},
         "reason", "updated_at", "started_at", and for a claim its holder renews: "lease_s", "heartbeat_at"}

``state`` is one of:

- ``claimed``: a run is releasing this version now. Claims are written create-only (S3
  ``If-None-Match: *``) or replace exactly the entry that was read (``If-Match``), so of two runs
  that find the version new at the same moment exactly one claims it, and the other is told who did.
- ``released``: the channel's pointer moved to a release of this version.
- ``rejected``: a gate refused it (parity, lint, canary) or it is unusable as it is (a user error):
  the schedule does not try it again unless asked to (``force``).
- ``failed``: an outage stopped the run; the schedule may try again.
- ``inconclusive``: the canary could not decide (a gate's interval straddled its limit, none
  failed), its bounded retries included: the version stays open, and the schedule tries it again
  as it would a new one (:func:`is_new`). A version already ``rejected`` (in production or by a
  gate) is never reopened this way: :func:`settle` only settles this release's own claim.

A version the roll-out's watch rolled back is ``rejected`` with a reason starting
:data:`IN_PRODUCTION` (:func:`reject_in_production`): it passed the canary, so the run's own
``finish`` would settle it ``released``; :func:`settle` keeps such an entry as it is.

A claim held by a run that is no longer running (killed, marked failed by hand) does not block
for ever (:func:`holder_alive`): a claim its holder renews (the CLI's process, ``lease_s``) is taken
over once it was not renewed for ``lease_s``; an Airflow run's claim is taken over once Airflow says
the run no longer runs (``is_active``, asked through the Task SDK), or, where Airflow cannot be asked
(from a terminal), :data:`UNASKED_RUN_S` after it was claimed.

:func:`is_new` is the cheap check a scheduled run starts with, after one MLflow call resolved the
candidate (:mod:`model_release.intake.candidate`): one GET of the ledger entry and one of the channel
pointer. :mod:`.claim` is how every entry point (the CLI, the DAGs) claims, renews and settles.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..errors import ConflictError, StoreError
from .backend import PreconditionFailed
from .keys import MANIFEST, ledger_key, release_prefix
from .pointer import read_channel

CLAIMED, RELEASED, REJECTED, FAILED = "claimed", "released", "rejected", "failed"
#: the canary could not decide: the version stays open (the schedule picks it up again)
INCONCLUSIVE = "inconclusive"
STATES = (CLAIMED, RELEASED, REJECTED, FAILED, INCONCLUSIVE)
#: the states a run may end its claim in
FINAL_STATES = (RELEASED, REJECTED, FAILED, INCONCLUSIVE)
#: the reason's start of a version rejected after it was released (the watch rolled it back)
IN_PRODUCTION = "rejected in production: "
#: how long an Airflow run's claim holds where nobody can ask Airflow whether the run still runs (a
#: release started at a terminal): a day, beyond any release's run (its canary's inconclusive retries included)
UNASKED_RUN_S = 24 * 3600.0


def entry_key(channel: str, model: str, version: str | int) -> str:
    """The entry's key, ``ledger/<channel>/<model>/<version>.json`` (:func:`.keys.ledger_key`)."""
    return ledger_key(channel, model, version)


@dataclass
class Decision:
    """What a run should do with the candidate: go (with the claim taken) or skip (and why)."""

    go: bool
    model: str
    version: str
    reason: str
    entry: dict[str, Any] | None = None
    #: the refusal is a live run's claim (``entry`` is that claim), not a version the channel settled
    held: bool = False


def read_entry(store: Any, channel: str, model: str, version: str | int) -> tuple[dict[str, Any], str] | None:
    """The ledger entry and its etag, or None."""
    return store.read_json(entry_key(channel, model, version))


def _write(store: Any, key: str, entry: dict[str, Any], etag: str | None) -> bool:
    """Create (etag None) or replace exactly ``etag``; False when another writer got there first."""
    data = json.dumps(entry, indent=1, sort_keys=True).encode()
    try:
        if etag is None:
            store.backend.put_bytes(key, data, if_none_match=True)
        else:
            store.backend.put_bytes(key, data, if_match=etag)
    except PreconditionFailed:
        return False
    return True


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _entry(channel: str, model: str, version: str, state: str, release_id: str, run: dict[str, Any], reason: str,
           **extra: Any) -> dict[str, Any]:
    return {"model": model, "version": str(version), "channel": channel, "state": state, "release_id": release_id,
            "run": {k: run.get(k) for k in ("dag_id", "run_id")}, "reason": reason, "updated_at": _now(), **extra}


def _age_s(stamp: Any) -> float:
    """Seconds since an entry's ISO-8601 time; infinite when it has none (an entry of another era)."""
    try:
        when = datetime.fromisoformat(str(stamp))
    except ValueError:
        return float("inf")
    return (datetime.now(timezone.utc) - when).total_seconds()


def holder_alive(entry: dict[str, Any], is_active: Callable[[dict[str, Any]], bool] | None = None) -> bool:
    """Whether the run holding a ``claimed`` entry still counts as running.

    A claim with ``lease_s`` (its holder renews it: the CLI's process) lives while it was renewed
    within ``lease_s``; any other (an Airflow run's) while ``is_active(run)`` says so, or, where
    Airflow cannot be asked (``is_active`` None), for :data:`UNASKED_RUN_S` after it was claimed.
    """
    lease = entry.get("lease_s")
    if lease:
        return _age_s(entry.get("heartbeat_at") or entry.get("updated_at")) <= float(lease)
    if is_active is not None:
        return is_active(entry.get("run") or {})
    return _age_s(entry.get("started_at") or entry.get("updated_at")) <= UNASKED_RUN_S


def held_line(entry: dict[str, Any], model: str, version: str, channel: str) -> str:
    """One line: which run holds the claim on ``model`` v``version`` and when it started."""
    run = entry.get("run") or {}
    of = f" of DAG {run['dag_id']!r}" if run.get("dag_id") else ""
    lease = (f"; its claim lapses {float(entry['lease_s']):g} s after its last renewal ({entry.get('heartbeat_at')})"
             if entry.get("lease_s") else "")
    return (f"{model} v{version} for channel {channel!r} is held by run {run.get('run_id')!r}{of}, started "
            f"{entry.get('started_at') or entry.get('updated_at')} (release {entry.get('release_id')}){lease}; two runs "
            "never release one version: wait for that run to end, then release again if it did not release it")


def claim(
    store: Any, channel: str, model: str, version: str | int, *, release_id: str, run: dict[str, Any],
    retry_rejected: bool = False, retry_released: bool = False,
    is_active: Callable[[dict[str, Any]], bool] | None = None, lease_s: float | None = None,
) -> Decision:
    """Claim ``version`` for this run, or say why not.

    Args:
        store: the opened model store (``spec.promote.store``).
        channel, model, version: what is claimed.
        release_id, run: who claims (``run``: ``dag_id``, ``run_id``).
        retry_rejected: claim a version the channel rejected before (a forced retry).
        retry_released: claim a version the channel released before (a manual re-release).
        is_active: whether an Airflow run that holds a claim is still running (None: cannot be
            asked); a claim whose holder is not alive (:func:`holder_alive`) is taken over.
        lease_s: this holder renews its claim (:func:`renew`) and it lapses ``lease_s`` after the
            last renewal (the CLI); None for an Airflow run.

    Returns:
        ``go=True`` when this run holds the claim (also when it already did: a retried task);
        ``held=True`` when a live run holds it (``reason`` is :func:`held_line`).
    """
    version = str(version)
    key = entry_key(channel, model, version)
    for _ in range(5):  # each round either decides or lost a race to a writer that changed the entry
        found = store.read_json(key)
        now = _now()
        mine = _entry(channel, model, version, CLAIMED, release_id, run, "", started_at=now,
                      **({"lease_s": float(lease_s), "heartbeat_at": now} if lease_s else {}))
        if found is None:
            if _write(store, key, mine, None):
                return Decision(True, model, version, f"{model} v{version} claimed for channel {channel!r}", mine)
            continue
        entry, etag = found
        state, holder = entry.get("state"), entry.get("run") or {}
        same_run = (holder.get("dag_id") == run.get("dag_id") and holder.get("run_id") == run.get("run_id")
                    and (not entry.get("lease_s") or entry.get("release_id") == release_id))  # a process: one release each
        if state == CLAIMED and same_run:
            return Decision(True, model, version, "this run already holds the claim", entry)
        if state == CLAIMED and holder_alive(entry, is_active):
            return Decision(False, model, version, held_line(entry, model, version, channel), entry, held=True)
        if state == RELEASED and not retry_released:
            return Decision(False, model, version,
                            f"channel {channel!r} already released {model} v{version} (release {entry.get('release_id')})", entry)
        if state == REJECTED and not retry_rejected:
            return Decision(False, model, version,
                            f"channel {channel!r} rejected {model} v{version} in release {entry.get('release_id')} "
                            f"({entry.get('reason') or 'no reason recorded'}); trigger with force_retry=true to try it again",
                            entry)
        if _write(store, key, mine, etag):
            taken = (f" (took over the claim of run {holder.get('run_id')!r}, started {entry.get('started_at')}, "
                     "no longer running)" if state == CLAIMED else "")
            return Decision(True, model, version, f"{model} v{version} claimed for channel {channel!r}{taken}", mine)
    raise ConflictError(f"the ledger entry {store.uri}/{key} kept changing while this run tried to claim it; retry")


def renew(store: Any, channel: str, model: str, version: str | int, *, release_id: str) -> bool:
    """Renew this release's claim (its ``heartbeat_at``); False when the entry is no longer this release's claim."""
    key = entry_key(channel, model, version)
    for _ in range(3):
        found = store.read_json(key)
        if found is None or found[0].get("release_id") != release_id or found[0].get("state") != CLAIMED:
            return False
        if _write(store, key, {**found[0], "heartbeat_at": _now(), "updated_at": _now()}, found[1]):
            return True
    return False


def settle(store: Any, channel: str, model: str, version: str | int, *, release_id: str, run: dict[str, Any],
           state: str, reason: str = "") -> dict[str, Any] | None:
    """Record how this run's claim ended (``released``, ``rejected``, ``failed`` or ``inconclusive``);
    None when the entry is no longer this release's (then nothing is written)."""
    if state not in FINAL_STATES:
        raise ValueError(f"state {state!r} is not a final ledger state; valid: {', '.join(FINAL_STATES)}")
    key = entry_key(channel, model, version)
    for _ in range(5):
        found = store.read_json(key)
        if found is not None and found[0].get("release_id") != release_id:
            return None
        if found is not None and str(found[0].get("reason", "")).startswith(IN_PRODUCTION):
            return found[0]  # the watch rolled it back after promotion: that verdict stands
        started = {"started_at": found[0]["started_at"]} if found is not None and found[0].get("started_at") else {}
        entry = _entry(channel, model, str(version), state, release_id, run, reason, **started)
        if _write(store, key, entry, found[1] if found else None):
            return entry
    raise ConflictError(f"the ledger entry {store.uri}/{key} kept changing while this run settled it; retry")


def reject_in_production(store: Any, channel: str, model: str, version: str | int, *, release_id: str,
                         run: dict[str, Any], reason: str) -> dict[str, Any]:
    """Mark ``version`` rejected in production (whatever the entry held): the schedule does not release it again.

    Raises:
        ConflictError: the entry kept changing under five attempts.
    """
    key = entry_key(channel, model, version)
    entry = _entry(channel, model, str(version), REJECTED, release_id, run, (IN_PRODUCTION + reason)[:600])
    for _ in range(5):
        found = store.read_json(key)
        if _write(store, key, entry, found[1] if found else None):
            return entry
    raise ConflictError(f"the ledger entry {store.uri}/{key} kept changing while the watch marked it rejected; retry")


def release(store: Any, channel: str, model: str, version: str | int, *, release_id: str) -> bool:
    """Drop this release's claim without a verdict (a run asked not to promote); False when it is not ours."""
    key = entry_key(channel, model, version)
    found = store.read_json(key)
    if found is None or found[0].get("release_id") != release_id or found[0].get("state") != CLAIMED:
        return False
    store.backend.delete([key])
    return True


def pipeline_version(version: str | int, identity: str | None) -> str:
    """The version the ledger knows a release by: the model version, or for a cascade or fan-out
    ``<version>+<12 hex>``, the hex a sha256 of :func:`~model_release.intake.members.pipeline_identity`
    (every member's version), so each combination of member versions has its own entry: a new
    version of any member is new to the channel, and a rejected combination stays rejected."""
    if not identity:
        return str(version)
    import hashlib

    return f"{version}+{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def manifest_version(manifest: dict[str, Any]) -> str | None:
    """The ledger's version of a released manifest (:func:`pipeline_version`); None when it names no model version."""
    from ..intake.members import lineage_of, pipeline_identity

    model = manifest.get("model") or {}
    if model.get("version") is None:
        return None
    members = manifest.get("members")
    return pipeline_version(model["version"], pipeline_identity(lineage_of(members)) if members else None)


def serving_version(store: Any, channel: str) -> tuple[str | None, str | None, str | None]:
    """(release id, model name, the ledger's version of it) the channel's pointer names now; Nones when it has none."""
    pointer = read_channel(store, channel)
    if pointer is None:
        return None, None, None
    found = store.read_json(release_prefix(pointer.release_id) + MANIFEST)
    manifest = found[0] if found else {}
    return pointer.release_id, (manifest.get("model") or {}).get("name"), manifest_version(manifest)


def is_new(store: Any, channel: str, model: str, version: str) -> tuple[bool, str]:
    """Whether the channel has neither released nor rejected ``model`` v``version``, and why not.

    Reads the ledger entry and the channel's pointer (a version released by hand, outside the
    DAGs, has no ledger entry but may be what the channel serves). A version a run left ``failed``
    or ``inconclusive`` is open: it counts as new, and the reason says so.
    """
    found = read_entry(store, channel, model, version)
    if found is not None and found[0].get("state") in (RELEASED, REJECTED):
        entry = found[0]
        retry = "; trigger with force_retry=true to try it again" if entry["state"] == REJECTED else ""
        return False, (f"channel {channel!r} {entry['state']} {model} v{version} in release {entry.get('release_id')}"
                       + (f" ({entry['reason']})" if entry.get("reason") else "") + retry)
    release_id, serving_model, serving = serving_version(store, channel)
    if serving_model == model and serving == version:
        return False, f"channel {channel!r} already serves {model} v{version} (release {release_id})"
    if found is not None and found[0].get("state") == INCONCLUSIVE:
        return True, (f"{model} v{version} is still open in channel {channel!r}: the canary of release "
                      f"{found[0].get('release_id')} was inconclusive; trying it again")
    return True, f"{model} v{version} is new to channel {channel!r}"


def verdict_of(errors: dict[str, dict[str, Any]], promoted: bool, *, promote_asked: bool = True) -> tuple[str | None, str]:
    """The ledger state a finished run leads to, from the stages' recorded errors.

    Returns ``(released|rejected|inconclusive|failed, reason)``; ``(None, ...)`` when the run went
    through without being asked to promote (its claim is dropped). A user error (a gate's refusal
    among them) rejects; else evidence that could not decide leaves the version open (inconclusive);
    else an outage failed the run.
    """
    if promoted:
        return RELEASED, ""
    for stage, error in errors.items():
        if error.get("user"):
            return REJECTED, f"{stage}: [{error.get('kind')}] {str(error.get('message', ''))[:400]}"
    for stage, error in errors.items():
        if error.get("inconclusive"):
            return INCONCLUSIVE, f"{stage}: [{error.get('kind')}] {str(error.get('message', ''))[:400]}"
    if errors:
        stage, error = next(iter(errors.items()))
        return FAILED, f"{stage}: [{error.get('kind')}] {str(error.get('message', ''))[:400]}"
    if promote_asked:
        return FAILED, "the run stopped before promotion without a recorded stage error (a killed or cleared task)"
    return None, "no stage failed and nothing was promoted (promote was false)"


def check_state(state: str) -> str:
    if state not in STATES:
        raise StoreError(f"ledger state {state!r} is not one of {STATES}")
    return state
