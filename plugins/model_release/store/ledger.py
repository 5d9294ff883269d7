"""The channel's ledger: which model versions a channel released, rejected, or is releasing now.

One small JSON object per (channel, model, version) in the model store, beside the releases
(so the module lives in ``store/``, its key in :mod:`.keys`). A cascade's or fan-out's version is
the model version and a digest of every member's version (:func:`pipeline_version`)::

    ledger/<channel>/<model>/<version>.json
        {"model", "version", "channel", "state", "release_id", "run": {"dag_id", "run_id"},
         "reason", "updated_at"}

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
for ever: :func:`claim` asks ``is_active`` and takes such a claim over.

:func:`decide` is the cheap check a scheduled run starts with: one MLflow call to resolve the
candidate alias, then one GET of the ledger entry and one of the channel pointer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..errors import ConflictError, IntakeError, StoreError
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


def _entry(channel: str, model: str, version: str, state: str, release_id: str, run: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"model": model, "version": str(version), "channel": channel, "state": state, "release_id": release_id,
            "run": {k: run.get(k) for k in ("dag_id", "run_id")}, "reason": reason,
            "updated_at": datetime.now(timezone.utc).isoformat()}


def claim(
    store: Any, channel: str, model: str, version: str | int, *, release_id: str, run: dict[str, Any],
    retry_rejected: bool = False, retry_released: bool = False,
    is_active: Callable[[dict[str, Any]], bool] = lambda run: True,
) -> Decision:
    """Claim ``version`` for this run, or say why not.

    Args:
        store: the opened model store (``spec.promote.store``).
        channel, model, version: what is claimed.
        release_id, run: who claims (``run``: ``dag_id``, ``run_id``).
        retry_rejected: claim a version the channel rejected before (a forced retry).
        retry_released: claim a version the channel released before (a manual re-release).
        is_active: whether the run that holds a claim is still running; a claim of a run that is
            not is taken over.

    Returns:
        ``go=True`` when this run holds the claim (also when it already did: a retried task).
    """
    version = str(version)
    key = entry_key(channel, model, version)
    for _ in range(5):  # each round either decides or lost a race to a writer that changed the entry
        found = store.read_json(key)
        mine = _entry(channel, model, version, CLAIMED, release_id, run, "")
        if found is None:
            if _write(store, key, mine, None):
                return Decision(True, model, version, f"{model} v{version} claimed for channel {channel!r}", mine)
            continue
        entry, etag = found
        state, holder = entry.get("state"), entry.get("run") or {}
        same_run = holder.get("dag_id") == run.get("dag_id") and holder.get("run_id") == run.get("run_id")
        if state == CLAIMED and same_run:
            return Decision(True, model, version, "this run already holds the claim", entry)
        if state == CLAIMED and is_active(holder):
            return Decision(False, model, version,
                            f"{model} v{version} is being released by run {holder.get('run_id')!r} of "
                            f"{holder.get('dag_id')!r} (release {entry.get('release_id')}); two runs never release one version",
                            entry)
        if state == RELEASED and not retry_released:
            return Decision(False, model, version,
                            f"channel {channel!r} already released {model} v{version} (release {entry.get('release_id')})", entry)
        if state == REJECTED and not retry_rejected:
            return Decision(False, model, version,
                            f"channel {channel!r} rejected {model} v{version} in release {entry.get('release_id')} "
                            f"({entry.get('reason') or 'no reason recorded'}); trigger with force_retry=true to try it again",
                            entry)
        if _write(store, key, mine, etag):
            taken = f" (took over the claim of run {holder.get('run_id')!r}, no longer running)" if state == CLAIMED else ""
            return Decision(True, model, version, f"{model} v{version} claimed for channel {channel!r}{taken}", mine)
    raise ConflictError(f"the ledger entry {store.uri}/{key} kept changing while this run tried to claim it; retry")


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
        entry = _entry(channel, model, str(version), state, release_id, run, reason)
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


def candidate_version(tracking_uri: str | None, model: str, alias: str | None, version: int | None) -> str:
    """The version the spec's alias names now (one registry call), or the spec's fixed version.

    Raises:
        IntakeError: the model or alias does not exist.
        ServiceUnavailable: MLflow could not be reached.
    """
    if version is not None:
        return str(version)
    from ..mlflow_env import quiet_mlflow_env

    quiet_mlflow_env()
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from ..errors import ServiceUnavailable

    try:
        found = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri).get_model_version_by_alias(model, alias)
    except MlflowException as exc:
        code = getattr(exc, "error_code", "")
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            raise IntakeError(f'model "{model}" has no alias "{alias}" (or no such model) in MLflow; set the alias on the '
                              "version to release, or wait for training to set it") from None
        raise ServiceUnavailable(f"MLflow could not resolve {model}@{alias} ({code or type(exc).__name__}); retry") from None
    return str(found.version)


def pipeline_version(version: str | int, identity: str | None) -> str:
    """The version the ledger knows a release by: the model version, or for a cascade or fan-out
    ``<version>+<12 hex>``, the hex a sha256 of :func:`~model_release.intake.members.pipeline_identity`
    (every member's version), so each combination of member versions has its own entry: a new
    version of any member is new to the channel, and a rejected combination stays rejected."""
    if not identity:
        return str(version)
    import hashlib

    return f"{version}+{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def candidate_identity(tracking_uri: str | None, spec: Any, version: str) -> str | None:
    """The pipeline identity of the candidate: each registered member's alias resolved now (one
    registry call each), the release's model at ``version``; None for a spec that is no pipeline.

    Raises:
        IntakeError: a member's model, alias or version does not exist (the member is named).
        ServiceUnavailable: MLflow could not be reached.
    """
    from ..intake.members import RELEASE, Lineage, pipeline_identity, pipeline_members, resolve_members

    members = pipeline_members(spec)
    if not members:
        return None
    lineage = resolve_members(tracking_uri, members)
    lineage.update({k: Lineage(k, RELEASE, spec.model.name, str(version)) for k, v in members.items() if v == RELEASE})
    return pipeline_identity(lineage)


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
