"""Task bodies for the release DAG: each reads the release reference, runs one stage, returns it.

A *release reference* (:class:`~model_release.pipeline.ReleaseRef`) is the small JSON dict that
travels in XCom: the release id, where its workspace and spec are, the trigger's overrides, and
each finished stage's facts under ``stages``. Stage results themselves live in the release
workspace; a retried task finds them there. With a workspace store (``$MODEL_RELEASE_WORKSPACE_STORE``
or the ``workspace`` Param set to ``s3://BUCKET/PREFIX``) each task fetches the stage folders it
reads and publishes its own before it returns (:mod:`model_release.workspace_mirror`), so the
workers share no disk.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

from airflow.sdk.exceptions import AirflowFailException

from .. import project_home
from ..errors import Inconclusive, IntakeError, UserError
from ..logs import quiet_task_loggers, quiet_wire_loggers
from ..mlflow_env import check_tracking_uri
from ..names import check_release_id
from ..pipeline import ReleaseRef, Services, preflight
from ..spec import InconclusiveSpec, load_spec
from ..stages import CANARY, EXPORT, INTAKE, PROMOTE, REPOSITORY, TENSORRT
from ..types import AssembleResult, CanaryResult, ExportResult, IntakeResult, TensorRTResult
from ..workspace import Workspace
from .hooks import MlflowHook, ModelStoreHook, TritonCanaryHook

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)


def no_retry_on_user_error(fn: F) -> F:
    """A bad spec, an unknown model or a failed gate will fail again: fail the task without retries.

    Infrastructure errors propagate unchanged, so Airflow retries them.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        quiet_wire_loggers()  # botocore's DEBUG records carry the key id and the session token
        quiet_task_loggers()  # great_expectations' INFO records at import would bury the canary's lines
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise AirflowFailException(f"[{exc.kind}] {exc}") from exc

    return wrapper  # type: ignore[return-value]


HOME = project_home()  # $MODEL_RELEASE_HOME, else the clone (editable install), else the current folder

#: the workspace store every worker publishes to when the deployment shares no disk
WORKSPACE_STORE_ENV = "MODEL_RELEASE_WORKSPACE_STORE"


def _services(ref: ReleaseRef, *, store: bool = False, triton: bool = False) -> Services:
    conns = ref.connections
    canary = TritonCanaryHook(conns.get("triton_conn_id", TritonCanaryHook.default_conn_name)).remote() if triton else None
    return Services(
        tracking_uri=MlflowHook(conns.get("mlflow_conn_id", MlflowHook.default_conn_name)).tracking_uri(),
        open_store=ModelStoreHook(conns.get("aws_conn_id", ModelStoreHook.default_conn_name)).open_store if store else None,
        triton_endpoint=canary.url if canary else None,
        canary=canary,
    )


def _local_root() -> str:
    """This worker's own workspace folder (no other worker needs to reach it when a store is set)."""
    return os.environ.get("MODEL_RELEASE_WORKSPACE") or str(HOME / ".work" / "workspace")


def _workspace(ref: ReleaseRef) -> Workspace:
    """The release's workspace here: fetched from and published to the workspace store when there is one."""
    from ..workspace_mirror import StoreMirror

    hook = ModelStoreHook(ref.connections.get("aws_conn_id", ModelStoreHook.default_conn_name))
    return ref.workspace(local_root=_local_root(),
                         open_mirror=lambda uri: StoreMirror.open(uri, s3_client=hook.s3_client() if uri.startswith("s3://") else None))


def _tracking_uri(connections: dict[str, str] | None) -> str:
    """The MLflow tracking URI of the ``mlflow_conn_id`` connection, checked: a bad URI is refused in one line
    before MLflow is asked anything."""
    uri = MlflowHook((connections or {}).get("mlflow_conn_id", MlflowHook.default_conn_name)).tracking_uri()
    check_tracking_uri(uri)
    return uri


def _store_for(spec: Any, ref_connections: dict[str, str] | None = None) -> Any:
    conns = ref_connections or {}
    return ModelStoreHook(conns.get("aws_conn_id", ModelStoreHook.default_conn_name)).open_store(spec.promote.store)


@no_retry_on_user_error
def start(params: dict[str, Any], run_id: str, run_after: Any, *, run: dict[str, Any] | None = None,
          scheduled: bool = False, is_active: Callable[[dict[str, Any]], bool] | None = None,
          connections: dict[str, str] | None = None) -> dict[str, Any]:
    """Validate the spec and the trigger's parameters, resolve the candidate once and claim it; name the
    release (stable across retries) and claim its workspace for this run.

    A scheduled run (``scheduled``) first checks, cheaply, that there is a candidate (the spec's alias
    set) and that it is new to the channel (neither released nor rejected; a rejected one only with
    ``force_retry``), and raises :class:`AirflowSkipException` when not, touching nothing. Everything checkable is then
    checked (:func:`~model_release.pipeline.preflight`, a release id another run's workspace holds
    among it) before anything is written. Every run then claims the version in the channel's ledger
    as the CLI does (:mod:`model_release.store.claim`): a version another live run holds (a DAG run or
    a ``model-release release`` at a terminal) is skipped with one line naming that run and when it
    started, so two runs never release the same version. The returned reference carries the claim
    with the candidate as resolved here (each member's version and run), which intake downloads: no
    later task asks the alias again. Last, the workspace is claimed for this run (``.owner``, in the
    workspace store when there is one), so the run's own retries, on any worker, find it theirs.

    ``connections`` (``mlflow_conn_id``, ``aws_conn_id``, ``triton_conn_id``: the operators' arguments)
    name the Airflow connections this task and, through the reference, the later ones use.
    """
    from airflow.sdk.exceptions import AirflowSkipException

    from ..errors import ClaimHeld
    from ..intake.candidate import resolve_candidate
    from ..store import claim as claims
    from ..store import ledger

    spec_path = Path(params["spec"])
    if not spec_path.is_absolute():
        spec_path = HOME / spec_path
    overrides: dict[str, Any] = {}
    if params.get("version") is not None:
        overrides["model.version"] = params["version"]
    elif params.get("alias") is not None:
        overrides["model.alias"] = params["alias"]
    spec = load_spec(spec_path, overrides=overrides or None)
    promote = bool(params.get("promote", True))
    if params.get("release_id"):
        release_id = check_release_id(params["release_id"])
    else:
        digest = hashlib.sha256(run_id.encode()).hexdigest()[:4]
        release_id = f"{spec.name}-{run_after:%Y%m%dT%H%M%SZ}-{digest}"
    run = {**(run or {}), "run_id": run_id, "code_digest": code_digest()}
    conns = dict(connections or {})
    store = _store_for(spec, conns)
    tracking_uri = _tracking_uri(conns)
    try:
        candidate = resolve_candidate(tracking_uri, spec)  # the one time this run asks the registry's aliases
    except IntakeError as exc:
        if not scheduled:  # a run someone started asks for a candidate that is not there: it fails, saying so
            raise
        # a schedule polls for a candidate: none yet (a fresh registry, training has not set the alias) is nothing new
        raise AirflowSkipException(f"nothing to release: {exc.message}") from None
    # a cascade or fan-out is known by every member's version: new when any member's alias moved
    force = bool(params.get("force_retry", False))
    if scheduled:
        new, why = ledger.is_new(store, spec.promote.channel, spec.model.name, claims.ledger_version(candidate))
        rejected_only = not new and " rejected " in why
        if not new and not (force and rejected_only):
            raise AirflowSkipException(f"nothing to release: {why}")
    workspace = params.get("workspace") or os.environ.get(WORKSPACE_STORE_ENV) or _local_root()
    store_uri = workspace if workspace.startswith(("s3://", "file://")) else None
    ref = ReleaseRef(
        release_id=release_id, workspace_root=str(Path(_local_root() if store_uri else workspace).resolve()),
        spec_path=str(spec_path), overrides={**overrides, "model.version": int(candidate.version)}, promote=promote,
        model=f"models:/{spec.model.name}/{candidate.version}", workspace_store=store_uri, run=run, connections=conns,
    )
    ws = _workspace(ref)
    owner = f"airflow run {run_id}"  # the run's own retries (and a cleared run) find the workspace theirs
    preflight(spec, Services(tracking_uri=tracking_uri, open_store=lambda uri: store), promote=promote, ws=ws, owner=owner)
    try:
        claim, why = claims.take(store, spec.promote.channel, candidate, release_id=release_id, holder=claims.Holder.airflow(run),
                                 retry_rejected=force or not scheduled, retry_released=not scheduled, is_active=is_active)
    except ClaimHeld as exc:  # another live run releases it: this run has nothing to do (finish skips too)
        raise AirflowSkipException(exc.message) from None
    if claim is None:
        raise AirflowSkipException(f"nothing to release: {why}")
    ws.claim(owner)
    ref.claim = claim.to_dict()
    return ref.to_dict()


def code_digest() -> str:
    """sha256 (first 16 hex) of the pipeline's code as this worker runs it: the model_release package
    and the DAG files. Recorded with every release beside the DAG bundle's version, which a local
    bundle does not have."""
    from ..repository.render import template_root

    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    templates = template_root()  # the installed package's, or the clone's model_repository_template/
    files = [*((p, p.relative_to(package.parent)) for p in package.rglob("*.py")),
             *((p, Path("dags") / p.name) for p in (HOME / "dags").glob("*.py")),
             *((p, Path("templates") / p.relative_to(templates)) for p in templates.rglob("*.j2"))]
    for path, name in sorted(files, key=lambda f: f[1].as_posix()):
        h.update(name.as_posix().encode() + b"\0")  # the same name in a clone and in an installed wheel
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@no_retry_on_user_error
def intake(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_intake

    from ..intake.candidate import Candidate

    ref = ReleaseRef.from_dict(data)
    claimed = (ref.claim or {}).get("candidate")  # what start resolved and claimed: intake asks no alias again
    result = run_intake(ref.spec(), _workspace(ref), _services(ref), candidate=Candidate.from_dict(claimed) if claimed else None)
    return ref.after(INTAKE, {"model": result.model_uri, "run_id": result.run_id, "digest": result.content_digest}).to_dict()


@no_retry_on_user_error
def export(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_export

    ref = ReleaseRef.from_dict(data)
    ws = _workspace(ref)
    result = run_export(ref.spec(), ws, _required(ws, INTAKE, IntakeResult))
    return ref.after(EXPORT, {"onnx_sha256": result.onnx_sha256, "cached": result.cached, "golden_rows": result.golden_rows}).to_dict()


@no_retry_on_user_error
def tensorrt(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_tensorrt

    ref = ReleaseRef.from_dict(data)
    ws = _workspace(ref)
    result = run_tensorrt(ref.spec(), ws, _required(ws, EXPORT, ExportResult))
    return ref.after(TENSORRT, {"built": result.built, "reason": result.reason, "plan_sha256": result.plan_sha256}).to_dict()


@no_retry_on_user_error
def assemble(data: dict[str, Any]) -> dict[str, Any]:
    from ..pipeline import run_assemble

    ref = ReleaseRef.from_dict(data)
    ws = _workspace(ref)
    result = run_assemble(
        ref.spec(), ws, _required(ws, INTAKE, IntakeResult), _required(ws, EXPORT, ExportResult),
        ws.load_result(TENSORRT, TensorRTResult),
    )
    return ref.after(REPOSITORY, {"entry_model": result.entry_model, "models": result.models, "warnings": len(result.warnings)}).to_dict()


@no_retry_on_user_error
def canary(data: dict[str, Any], *, reschedules: int = 0) -> dict[str, Any]:
    """Run the canary; an inconclusive one is tried again later (:func:`inconclusive_next`).

    ``reschedules``: how often this task was rescheduled already (Airflow's ``task_reschedule_count``).
    """
    from ..errors import CanaryInconclusive
    from ..pipeline import run_canary

    ref = ReleaseRef.from_dict(data)
    ws = _workspace(ref)
    spec = ref.spec()
    try:
        result = run_canary(
            spec, ws, _services(ref, store=True, triton=True), _required(ws, INTAKE, IntakeResult),
            _required(ws, EXPORT, ExportResult), _required(ws, REPOSITORY, AssembleResult),
        )
    except CanaryInconclusive as exc:
        raise inconclusive_next(exc, spec.canary.inconclusive, reschedules) from exc
    return ref.after(CANARY, {"passed": result.passed, "summary": result.summary, "report": result.report_json}).to_dict()


def inconclusive_next(exc: Inconclusive, policy: InconclusiveSpec, reschedules: int, *,
                      now: datetime | None = None) -> BaseException:
    """What the canary task raises after an inconclusive canary: try again later, or end the run.

    While fewer than ``policy.retries`` reschedules were spent: an ``AirflowRescheduleException``
    ``policy.retry_delay_s`` from ``now`` (the task waits as up-for-reschedule, its pool slot
    freed, no try spent). Then an ``AirflowFailException`` saying why and that the version stays
    open (``finish`` settles the ledger ``inconclusive``, so the schedule tries it again). An
    outage is not this: it goes up unchanged, and Airflow's own retries take it.
    """
    from airflow.sdk.exceptions import AirflowRescheduleException

    if reschedules < policy.retries:
        when = (now or datetime.now(timezone.utc)) + timedelta(seconds=policy.retry_delay_s)
        log.warning("canary inconclusive (try %d of %d); trying again at %s: %s", reschedules + 1, policy.retries + 1,
                    when.isoformat(timespec="seconds"), exc.message)
        return AirflowRescheduleException(reschedule_date=when)
    tries = f"{policy.retries + 1} tr{'y' if policy.retries == 0 else 'ies'}"
    return AirflowFailException(
        f"[{exc.kind}] {exc} The canary stayed inconclusive over {tries} (canary.inconclusive.retries "
        f"{policy.retries}, {policy.retry_delay_s:g} s apart): nothing was promoted or rejected, and the model version "
        "stays open in the channel's ledger for the next run. A quieter canary or a longer canary.load.budget_s "
        "(more window pairs), or more golden rows, would decide it")


@no_retry_on_user_error
def promote(data: dict[str, Any]) -> dict[str, Any]:
    """Promote the release; returns the reference with ``stages[PROMOTE]`` the PromoteResult (None: not asked to)."""
    from ..pipeline import run_promote

    ref = ReleaseRef.from_dict(data)
    ws = _workspace(ref)
    if not ref.promote:
        return ref.after(PROMOTE, {}).to_dict()
    result = run_promote(
        ref.spec(), ws, _services(ref, store=True), _required(ws, EXPORT, ExportResult),
        _required(ws, REPOSITORY, AssembleResult), _required(ws, CANARY, CanaryResult), run=_run_record(ref),
    )
    return ref.after(PROMOTE, result.to_dict()).to_dict()


@no_retry_on_user_error
def rollout(data: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
    """Roll the promoted release out to the channel's serving agents; skipped without a promotion or an agent.

    Returns the roll-out's outcome; when the watch rolled the release back (fleet, pointer, alias and
    ledger back on the old release), ``outcome`` is :data:`ROLLED_BACK_OUTCOME` and ``rolled_back``
    holds the facts for the channel's Asset event (:func:`watch_rollback_event`) instead of a failure.
    """
    from airflow.sdk.exceptions import AirflowSkipException

    from ..serve.guard import describe
    from ..serve.membership import membership
    from ..serve.stage import rollout_release
    from ..serve.watch import WatchFailed

    ref = ReleaseRef.from_dict(data)
    promoted = (ref.stages or {}).get(PROMOTE) or {}
    spec = ref.spec()
    if not promoted.get("release_id"):
        raise AirflowSkipException("nothing was promoted in this run: nothing to roll out")
    if not spec.serve.rollout.enabled:
        raise AirflowSkipException("serve.rollout.enabled is false in the spec: the release is not rolled out by this DAG")
    store, channel = _store_for(spec, ref.connections), promoted["channel"]
    fleet = membership(store, channel, silent_after_s=spec.serve.rollout.silent_after_s)
    if not fleet.members and not fleet.silent:
        raise AirflowSkipException(f"no serving agent has registered for channel {channel!r} in {store.uri} (start "
                                   f"`model-release serve-agent --channel {channel}` beside each serving Triton): nothing to roll out")
    tracking_uri = None
    if spec.promote.mlflow_alias:  # a watch that rolls back moves the alias back with the pointer
        tracking_uri = _tracking_uri(ref.connections)
    try:
        record = rollout_release(store, channel, spec.serve, release_id=promoted["release_id"], run=run_id,
                                 tracking_uri=tracking_uri, alias=spec.promote.mlflow_alias or "production",
                                 resolve_path=spec.resolve_path)
    except WatchFailed as exc:
        if exc.rollback is None:  # nothing to go back to: the release still serves, a person must act
            raise
        # the watch did its job: the fleet, the pointer, the alias and the ledger are back on the old
        # release; the task succeeds so that its Asset event tells the channel's consumers, and
        # finish fails the run (the ledger says rejected in production)
        log.error("%s", exc)
        return {"release_id": promoted["release_id"], "outcome": ROLLED_BACK_OUTCOME, "channel": channel,
                "store": promoted.get("store_uri"), "rolled_back": exc.rollback, "message": exc.message}
    return {"release_id": record.release_id, "outcome": record.outcome, "seq": record.seq,
            "servers": {s.server: s.outcome for s in record.servers}, "watch": describe(record), "split": record.split}


#: the rollout task's ``outcome`` when the watch rolled the release back
ROLLED_BACK_OUTCOME = "rolled back"


def watch_rollback_event(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The channel Asset event's ``extra`` for a roll-out the watch rolled back; None for any other outcome.

    Shaped like the rollback DAG's (``action``, ``release_id`` the channel serves now,
    ``previous_release``, ``store``, ``channel``), with ``by: watch``, the ``reason`` and the wave.
    """
    rolled = (result or {}).get("rolled_back")
    if not result or result.get("outcome") != ROLLED_BACK_OUTCOME or not rolled:
        return None
    return {
        "action": "rollback", "by": "watch", "release_id": rolled["to_release"], "previous_release": rolled["release_id"],
        "store": result.get("store"), "channel": result["channel"], "reason": rolled["reason"], "wave": rolled["wave"],
        "servers": list(rolled.get("servers") or []), "mlflow_alias": rolled.get("mlflow_alias"),
    }


def _run_record(ref: ReleaseRef) -> dict[str, Any]:
    """The run that made the release, for its manifest: the start task's facts, and this task's own
    bundle version and code digest when they differ (a run can pick up changed code mid-run)."""
    record = dict(ref.run)
    here = code_digest()
    if here != record.get("code_digest"):
        record["promote_code_digest"] = here
    return record


def finish(data: dict[str, Any] | None, *, nothing_new: str | None = None) -> dict[str, Any]:
    """Settle the run's claim in the channel's ledger: released, rejected (a gate or a user error),
    inconclusive (the canary could not decide, its retries spent: the version stays open) or failed.

    Runs after every other task, whatever they did (``trigger_rule="all_done"``); skips when the
    run claimed nothing (a scheduled run with nothing new, ``nothing_new`` the reason start gave). It
    fails (so the DAG run does) when start failed or the release was rejected or failed, also when
    the roll-out's watch rejected it in production: it is the run's last task, and its state is the run's.
    """
    from airflow.sdk.exceptions import AirflowSkipException

    from ..store import claim as claims
    from ..store import ledger

    if not data:
        if nothing_new:
            raise AirflowSkipException(f"this run claimed no model version ({nothing_new}): nothing to record")
        # start failed (a bad spec or Param, MLflow or the store unreachable): the run must fail too
        raise AirflowFailException("the start task failed, so this run claimed and released nothing; its log says why")
    if not (data.get("claim") or {}).get("version"):
        raise AirflowSkipException("this run claimed no model version: nothing to record")
    ref = ReleaseRef.from_dict(data)
    claim = ref.claim
    state, reason, entry = claims.settle(_store_for(ref.spec(), ref.connections), claim, _workspace(ref), run=ref.run,
                                         promote_asked=ref.promote)
    if state is None:
        return {"state": "unclaimed", "reason": reason}
    if state != ledger.RELEASED:  # the run's state says what happened to the release, not that bookkeeping worked
        raise AirflowFailException(f"release {ref.release_id} of {claim['model']} v{claim['version']} {state}: {reason}"
                                   + ("" if entry is not None else " (the ledger entry belongs to another run now)"))
    return {"state": state, "reason": reason, "recorded": entry is not None}


@no_retry_on_user_error
def rollback(params: dict[str, Any], *, connections: dict[str, str] | None = None) -> dict[str, Any]:
    """Move a channel's pointer back (to ``to_release``, default the previous release) and the MLflow alias with it.

    ``connections``: the Airflow connections to use, as :func:`start` takes them.
    """
    from ..store import rollback as store_rollback
    from ..store.registry import MlflowFollower

    spec_path = Path(params["spec"])
    if not spec_path.is_absolute():
        spec_path = HOME / spec_path
    spec = load_spec(spec_path)
    channel = params.get("channel") or spec.promote.channel
    store = _store_for(spec, connections)
    follower = None
    alias = spec.promote.mlflow_alias
    if alias:
        tracking_uri = _tracking_uri(connections)  # a bad URI is refused before the pointer moves, as the CLI's rollback does
        follower = MlflowFollower(tracking_uri, alias=alias)
    result = store_rollback(store, channel, params.get("to_release") or None, follower=follower)
    return {**result.to_dict(), "store": spec.promote.store}


def _required(ws: Workspace, stage: str, cls: type) -> Any:
    result = ws.load_result(stage, cls)
    if result is None:
        from ..errors import InfraError

        raise InfraError(
            f"the {stage} result of release {ws.release_id} is not in the workspace {ws!r}; the {stage} task did not "
            f"publish it (set {WORKSPACE_STORE_ENV} on every worker when they share no disk, or MODEL_RELEASE_WORKSPACE "
            f"to a folder they all mount), or clear and rerun the {stage} task"
        )
    return result
