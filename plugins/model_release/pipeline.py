"""The release, stage by stage: the one code path behind the DAG, the CLI and the demo.

Every stage runs through :func:`run_stage`, the single seam between stages: it calls the stage,
tags any error with the stage's name, saves the stage's result in the workspace (a gate that
refuses may hand over its result too, and that is saved before the error goes up) and logs the
result's one-line headline. Stages only compute and return their result; none saves its own.

The ``run_<stage>`` functions take the spec, the workspace and the earlier stages' results.
Airflow tasks call them one per task with a :class:`ReleaseRef` in XCom; :func:`release` calls
them in sequence in one process. Services (MLflow, the store, a remote canary) arrive through
:class:`Services`, so the same code runs against the embedded stack and the distributed one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import CarriesResult, ConflictError, GateError, Inconclusive, ModelReleaseError, UserError
from .logs import STAGE_LINE
from .safe_text import redact
from .spec import ReleaseSpec
from .stages import ASSEMBLE, CANARY, EXPORT, FOLDERS, INTAKE, PROMOTE, TENSORRT
from .types import (
    AssembleResult, CanaryResult, ExportResult, IntakeResult, PromoteResult, TensorRTResult, _Serialisable,
)
from .workspace import Workspace, atomic_write_json

if TYPE_CHECKING:
    from .intake.candidate import Candidate
    from .store.claim import Claim, Holder

log = logging.getLogger(__name__)

R = TypeVar("R")

@dataclass
class Services:
    """Where the release's services are.

    Attributes:
        tracking_uri: the MLflow tracking (and registry) URI; None uses MLflow's own default/env.
        open_store: builds the model store for a store URI (``s3://...`` or ``file:///...``); the
            Airflow hook passes one that uses the connection's credentials.
        triton_endpoint: a running canary Triton (``host:port``, HTTP); None starts a local one.
        canary: the remote canary Triton with what it declares (its repository in the object store,
            backends, TensorRT version, GPU compute capability; :class:`~model_release.triton.delivery.RemoteCanary`);
            when given it takes the place of ``triton_endpoint``.
    """

    tracking_uri: str | None = None
    open_store: Callable[[str], Any] | None = None
    triton_endpoint: str | None = None
    canary: Any = None
    #: the stores opened so far, by URI: every stage of one release reuses one (opening an S3 store builds a
    #: boto3 client, a few tenths of a second each time); a store that failed to open is not kept
    _stores: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def store(self, uri: str) -> Any:
        """The store at ``uri``, opened once per :class:`Services` (``open_store``, else the standard chain)."""
        opened = self._stores.get(uri)
        if opened is not None:
            return opened
        if self.open_store is not None:
            opened = self.open_store(uri)
        else:
            from .store import open_store

            opened = open_store(uri)
        return self._stores.setdefault(uri, opened)


def run_stage(ws: Workspace, stage: str, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run one stage: the one way every stage enters and leaves the release.

    Args:
        ws: the release workspace; the result goes to ``<ws>/<dir>/<dir>.json`` (``dir`` is the
            stage's name, ``repository`` for assemble), and a failure to ``<ws>/<dir>/error.json``.
            Saving publishes the stage's folder when the workspace has a mirror (no shared disk:
            see :mod:`model_release.workspace_mirror`), so the stage's output is out of this
            worker before the task returns.
        stage: the stage's name, used in errors and logs.
        fn: the stage's function; returns the stage's result (a ``types`` dataclass).

    Returns:
        The result, saved.

    Raises:
        ModelReleaseError: whatever the stage raised, with ``.stage`` set when it was not.
    """
    folder = FOLDERS.get(stage, stage)
    started = time.perf_counter()
    try:
        result = fn(*args, **kwargs)
    except ModelReleaseError as exc:
        exc.stage = exc.stage or stage
        if isinstance(exc, CarriesResult) and exc.result is not None:
            ws.save_result(folder, exc.result)
        # beside the result: what stopped the stage, so a later task (the ledger) can tell a gate's
        # refusal from an outage, and both from evidence that could not decide, without re-deriving it
        ws.save_error(folder, {"stage": stage, "kind": exc.kind, "class": type(exc).__name__,
                               "user": isinstance(exc, UserError), "gate": isinstance(exc, GateError),
                               "inconclusive": isinstance(exc, Inconclusive), "message": exc.message})
        seconds = time.perf_counter() - started
        log.error("%s: %s", stage, exc.message, extra={STAGE_LINE: {"stage": stage, "seconds": seconds, "failed": True}})
        raise
    ws.save_result(folder, result)
    headline = result.headline() if hasattr(result, "headline") else ""
    seconds = time.perf_counter() - started
    log.info("%s: %s (%.1f s)", stage, headline, seconds, extra={STAGE_LINE: {"stage": stage, "seconds": seconds}})
    return result


def preflight(
    spec: ReleaseSpec, services: Services, *, promote: bool = True, ws: Workspace | None = None, owner: str | None = None,
) -> None:
    """Everything that can be checked before any stage runs, so that bad input is refused before
    anything is written, and a release does not fail late for it.

    The spec is valid already (it was loaded); here: the golden file exists and reads as an
    .npz/.parquet file should (its arrays agree in length, their data matches their headers); the
    MLflow tracking URI names a store MLflow can open, and the MLflow request limits are valid;
    the workspace can be created and the release id is not another release's (neither in the
    workspace nor, when promoting, complete in the store); the store can be written to (a missing
    bucket would otherwise surface only at promotion, after the canary).

    Args:
        ws: the release's workspace, when the caller is about to claim it (:func:`release`, the
            DAG's start task); ``owner`` is who claims it (see :meth:`Workspace.check_unused`).

    Raises:
        SpecError: the golden file is missing or unreadable; a store URI is not valid.
        UserError: the tracking URI, the MLflow limits, the workspace or the release id is refused.
        StoreError, ServiceUnavailable: the store's bucket or folder is missing, not writable, or unreachable.
    """
    if spec.golden.source == "file":
        from .model.golden import check_golden_file

        check_golden_file(spec)
    if services.tracking_uri is not None:
        from .mlflow_env import check_request_limits, check_tracking_uri

        check_tracking_uri(services.tracking_uri)
        check_request_limits()
    if ws is not None:
        ws.check_unused(owner)
    if promote:
        store = services.store(spec.promote.store)
        store.check_writable()
        if ws is not None and store.read_record(ws.release_id) is not None and not _owned(ws, owner):
            raise UserError(
                f"release id {ws.release_id!r} is taken: the store {store.uri} already holds that release, complete; "
                "released prefixes are immutable. Choose another --release (or leave it out for a new one)"
            )


def _owned(ws: Workspace, owner: str | None) -> bool:
    """Whether ``owner`` claimed this workspace before (a retry of its own release)."""
    return owner is not None and ws.owner() == owner


def run_intake(spec: ReleaseSpec, ws: Workspace, services: Services, *, candidate: Candidate | None = None) -> IntakeResult:
    """The intake stage: the release's model and, in a cascade or fan-out, every registered member.

    ``candidate``: the versions the run claimed (:mod:`.store.claim`); intake downloads exactly
    those and records the aliases as they were then. Without one (a run that claims nothing) the
    candidate is resolved here, once.
    """
    from .intake.candidate import pinned_spec, resolve_candidate
    from .intake.member_stages import intake_members
    from .intake.stage import resolve

    def stage() -> IntakeResult:
        pinned = candidate if candidate is not None else resolve_candidate(services.tracking_uri, spec)
        result = resolve(pinned_spec(spec, pinned), ws, tracking_uri=services.tracking_uri, alias=pinned.alias)
        result.members = intake_members(spec, ws, result, tracking_uri=services.tracking_uri, pinned=pinned.members)
        return result

    log.info("intake: resolving %s", spec.model.uri)
    return run_stage(ws, INTAKE, stage)


def run_export(spec: ReleaseSpec, ws: Workspace, intake: IntakeResult) -> ExportResult:
    """The export stage: the release's model and every registered member, each behind its parity gate."""
    from .export import export
    from .export.members import export_members
    from .model.composed import compose_reference

    def stage() -> ExportResult:
        result = export(spec, intake, ws)
        result.members = export_members(spec, ws, intake)
        # the canary judges a composed pipeline against its members composed the same way, not the release model alone
        result.composed_reference = compose_reference(spec, intake, result, ws.stage_dir(EXPORT)) or {}
        return result

    log.info("export: %s version %s to ONNX (export.opset %s)", intake.model_name, intake.version, spec.export.opset)
    return run_stage(ws, EXPORT, stage)


def run_tensorrt(spec: ReleaseSpec, ws: Workspace, export: ExportResult) -> TensorRTResult:
    from .tensorrt.stage import build_plan

    return run_stage(ws, TENSORRT, build_plan, spec, export, ws)


def run_assemble(
    spec: ReleaseSpec, ws: Workspace, intake: IntakeResult, export: ExportResult, tensorrt: TensorRTResult | None = None
) -> AssembleResult:
    from .repository.assemble import assemble

    result = run_stage(ws, ASSEMBLE, assemble, spec, intake, export, ws, tensorrt=tensorrt)
    for warning in result.warnings:
        log.warning("lint: %s", warning)
    return result


def run_canary(
    spec: ReleaseSpec,
    ws: Workspace,
    services: Services,
    intake: IntakeResult,
    export: ExportResult,
    assembled: AssembleResult,
    *,
    keep_rejected: bool = True,
    champion_ahead: "ChampionAhead | None" = None,
    later: Any = None,
) -> CanaryResult:
    """The canary stage. A rejection's reports are kept in the store (``keep_rejected``, see
    :func:`keep_rejected_reports`) before the rejection goes up; an inconclusive canary's are not
    (:class:`~model_release.errors.CanaryInconclusive`: nothing was rejected, a later canary decides).
    ``champion_ahead``: the served champion, fetched while the candidate exported (:func:`release`);
    when it found none the champion is looked for here as without it. ``later`` (a
    :class:`contextlib.ExitStack`): where the local Triton's stop is joined, when the caller has more to
    do before it returns (:func:`release`); None joins it before the stage ends."""
    from .canary import run_canary as canary
    from .canary.champion import find_champion
    from .canary.report.record import mlflow_recorder
    from .errors import CanaryRejected

    def stage() -> CanaryResult:
        store = services.store(spec.promote.store)

        def champion(folder: Any) -> Any:
            found = champion_ahead.take(folder) if champion_ahead is not None else None
            return found if found is not None else find_champion(
                spec, folder, store=store, tracking_uri=services.tracking_uri, intake=intake, export=export)

        return canary(
            spec, intake, export, assembled, ws, endpoint=services.triton_endpoint, remote=services.canary,
            open_store=services.store, find_champion=champion, later=later,
            record=mlflow_recorder(services.tracking_uri, intake, export) if services.tracking_uri else None,
        )

    try:
        return run_stage(ws, CANARY, stage)
    except CanaryRejected as exc:
        if keep_rejected and isinstance(exc.result, CanaryResult):
            keep_rejected_reports(spec, ws, services, exc.result)
        raise


def keep_rejected_reports(spec: ReleaseSpec, ws: Workspace, services: Services, result: CanaryResult) -> str | None:
    """Upload a rejected canary's reports to ``rejected/<release>/`` of the store and rewrite the channel's page.

    Best effort: the rejection stands whatever happens here. A store that cannot be reached is
    logged (where the reports stay instead) and None is returned; the promote task never runs
    after a rejection, so this is the one place the audit trail learns of it.
    """
    from pathlib import Path

    from .provenance import trigger
    from .store import keep_rejection, refresh_channel_page

    try:
        store = services.store(spec.promote.store)
        where = keep_rejection(store, ws.release_id, spec.promote.channel, Path(result.report_json),
                               Path(result.report_html) if result.report_html else None, trigger=trigger())
    except Exception as exc:  # noqa: BLE001 - the verdict stands; say why the audit trail lacks it
        why = exc.message if isinstance(exc, ModelReleaseError) else type(exc).__name__
        log.warning("canary: the rejected candidate's reports were not kept in the store %s (%s); they stay in the "
                    "workspace at %s", spec.promote.store, why, result.report_json)
        return None
    refresh_channel_page(store, spec.promote.channel)
    log.info("canary: the rejected candidate's reports are kept at %sreports/", where)
    return where


def run_promote(
    spec: ReleaseSpec,
    ws: Workspace,
    services: Services,
    export: ExportResult,
    assembled: AssembleResult,
    canary: CanaryResult,
    *,
    run: dict[str, Any] | None = None,
) -> PromoteResult:
    """Bundle and promote the release; ``run`` (the Airflow run that made it: DAG id, run id, bundle
    version, code digest) goes into its manifest, so a release traces back to the pipeline's code."""
    from .provenance import trigger
    from .store import UNSET, promote
    from .store.bundle import bundle_release
    from .store.registry import MlflowFollower

    def stage() -> PromoteResult:
        if not canary.passed:  # run_canary raises on failure; this guards a hand-edited result
            from .errors import CanaryRejected

            raise CanaryRejected(f"the canary did not pass ({canary.summary}); nothing is promoted")
        store = services.store(spec.promote.store)
        # a release replaces only the champion it was judged against: refuse before uploading, and
        # the pointer's conditional write refuses if it moves while this promotion runs
        expected = canary.champion_release if canary.champion_pinned else UNSET
        if canary.champion_pinned:
            _same_champion(store, spec.promote.channel, canary.champion_release, ws.release_id)
        release_dir = bundle_release(
            ws.stage_dir(PROMOTE, fresh=True) / "release",
            repository_dir=canary.repository_dir or assembled.repository_dir, manifest_path=assembled.manifest_path,
            reports=[canary.report_json, canary.report_html, export.parity_report],
            canary={"passed": canary.passed, "summary": canary.summary, "report": "reports/report.json",
                    "figures": canary.figures, "server": canary.server,
                    "champion": {"release_id": canary.champion_release, "kind": canary.champion_kind},
                    # an interface break against the champion goes through only when acknowledged: say so
                    "breaking_change": spec.promote.breaking_change,
                    # who or what promoted it (the channel's history page shows the DAG run)
                    "trigger": trigger()},
            run=run,
        )
        follower = None
        if spec.promote.mlflow_alias and services.tracking_uri:
            follower = MlflowFollower(services.tracking_uri, alias=spec.promote.mlflow_alias)
        try:
            return promote(release_dir, ws.release_id, store, spec.promote.channel, follower=follower, expected_current=expected)
        except ConflictError as exc:
            raise _judged_against(exc, spec.promote.channel, canary.champion_release, exc.winner) from None

    return run_stage(ws, PROMOTE, stage)


def _same_champion(store: Any, channel: str, judged: str | None, release_id: str) -> None:
    """Raise ConflictError when the channel no longer points at the champion the canary judged against."""
    from .store import read_channel

    pointer = read_channel(store, channel)
    now = pointer.release_id if pointer else None
    if now != judged and now != release_id:  # the candidate itself being current is an idempotent retry
        raise _judged_against(ConflictError("moved", winner=now), channel, judged, now)


def _judged_against(exc: ConflictError, channel: str, judged: str | None, now: str | None) -> ConflictError:
    return exc.restated(
        f"channel {channel!r} now points at {now!r}, but the canary judged this candidate against "
        f"{judged or 'no release (the channel was empty)'!r}; nothing was moved. Run the release again so the "
        f"candidate is judged against {now!r}, the new champion"
    )


@dataclass
class ReleaseOutcome:
    """What :func:`release` did: the results it reached and, when it stopped early, why."""

    release_id: str
    workspace: str
    promoted: PromoteResult | None = None
    canary: CanaryResult | None = None
    #: the error that stopped the release ("stage: message"), None when it went through
    error: str | None = None
    #: the error's kind (``spec``, ``canary``, ``store``...) and its stage
    error_kind: str | None = None
    error_stage: str | None = None
    #: how the channel's ledger recorded the release (``version``, ``state``, ``reason``); None when it claimed nothing
    ledger: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "release_id": self.release_id,
            "workspace": self.workspace,
            "promoted": self.promoted.to_dict() if self.promoted else None,
            "canary": self.canary.to_dict() if self.canary else None,
            "error": self.error,
            "error_kind": self.error_kind,
            "error_stage": self.error_stage,
            "ledger": self.ledger,
        }


def release(spec: ReleaseSpec, ws: Workspace, services: Services, *, promote: bool = True,
            holder: Holder | None = None) -> ReleaseOutcome:
    """Run every stage in this process, after :func:`preflight`, in a workspace it claims.

    The candidate is resolved once (its alias asked once) and, when promoting, claimed in the
    channel's ledger as a DAG run claims it (:mod:`.store.claim`; ``holder``, default this process,
    renews the claim while the release runs): a version another live run holds raises
    :class:`~.errors.ClaimHeld` before anything is written. The ledger records how the release
    ended, also when a stage fails (``outcome.ledger``).

    ``<workspace>/outcome.json`` records how far the release got, also when a stage fails; the
    first stage's error is then raised, and nothing is promoted. Input refused by the preflight
    (a reused release id among it) writes nothing at all.
    """
    from .store.claim import Lease

    candidate, claim = claim_release(spec, ws, services, promote=promote, holder=holder)
    log.debug("release %s: MLflow %s, store %s, workspace %s, canary %s", ws.release_id,
              redact(services.tracking_uri or "(MLflow's default)"), spec.promote.store, ws.path,
              services.triton_endpoint or "a local Triton")
    outcome = ReleaseOutcome(release_id=ws.release_id, workspace=str(ws.path))
    ahead: ChampionAhead | None = None
    # the canary's local Triton stops on a thread while judging, reporting and promotion go on: joined here
    later = contextlib.ExitStack()
    lease = Lease(services.store(spec.promote.store), claim) if claim is not None else None
    try:
        with lease or contextlib.nullcontext():
            intake = run_intake(spec, ws, services, candidate=candidate)
            ahead = ChampionAhead(spec, ws, services)  # the champion is fetched while the candidate exports
            export = run_export(spec, ws, intake)
            tensorrt = run_tensorrt(spec, ws, export)
            assembled = run_assemble(spec, ws, intake, export, tensorrt)
            outcome.canary = run_canary(spec, ws, services, intake, export, assembled, keep_rejected=promote,
                                        champion_ahead=ahead, later=later)
            if promote:
                if lease is not None:
                    lease.check()  # a claim another run took over while this one stalled: promote nothing
                outcome.promoted = run_promote(spec, ws, services, export, assembled, outcome.canary)
    except ModelReleaseError as exc:
        outcome.error, outcome.error_kind, outcome.error_stage = str(exc), exc.kind, exc.stage
        if isinstance(exc, CarriesResult) and isinstance(exc.result, CanaryResult):
            outcome.canary = exc.result
        raise
    finally:
        later.close()
        if ahead is not None:
            ahead.close()
        if claim is not None:
            outcome.ledger = _settle(spec, ws, services, claim)
        atomic_write_json(ws.path / "outcome.json", outcome.to_dict())
    return outcome


def claim_release(spec: ReleaseSpec, ws: Workspace, services: Services, *, promote: bool = True,
                  holder: Holder | None = None) -> tuple[Candidate, Claim | None]:
    """How :func:`release` starts, as the DAG's start task does: :func:`preflight`, the candidate resolved
    once, claimed in the channel's ledger when promoting (a person's release may release again what the
    channel released or rejected), then the workspace claimed.

    Raises:
        ClaimHeld: another live run holds the candidate's claim; nothing was written.
    """
    from .intake.candidate import resolve_candidate
    from .store.claim import Holder as _Holder
    from .store.claim import take

    preflight(spec, services, promote=promote, ws=ws)  # refuses bad input before anything is written
    try:
        candidate = resolve_candidate(services.tracking_uri, spec)  # the one time this release asks the aliases
    except ModelReleaseError as exc:  # resolving the model is intake's part, wherever it runs: its errors say so
        exc.stage = exc.stage or INTAKE
        raise
    if not promote:
        ws.claim()
        return candidate, None
    claim, why = take(services.store(spec.promote.store), spec.promote.channel, candidate, release_id=ws.release_id,
                      holder=holder or _Holder.process(), retry_rejected=True, retry_released=True)
    if claim is None:  # pragma: no cover - a person's release retries what the channel settled: only a live holder refuses
        raise ConflictError(why)
    ws.claim()
    return candidate, claim


def _settle(spec: ReleaseSpec, ws: Workspace, services: Services, claim: Claim) -> dict[str, Any]:
    """Settle the release's claim from its workspace; a store that cannot be reached leaves the claim to lapse."""
    from .store.claim import settle

    try:
        state, reason, entry = settle(services.store(spec.promote.store), claim.to_dict(), ws, run=claim.run,
                                      promote_asked=True)
    except Exception as exc:  # noqa: BLE001 - the release's own outcome stands; say why the ledger lacks it
        why = exc.message if isinstance(exc, ModelReleaseError) else type(exc).__name__
        log.warning("the ledger could not record how release %s ended (%s); its claim on %s v%s lapses %g s after its "
                    "last renewal", ws.release_id, why, claim.model, claim.version, claim.lease_s or 0)
        return {"version": claim.version, "state": None, "reason": why, "recorded": False}
    return {"version": claim.version, "state": state, "reason": reason, "recorded": entry is not None}


class ChampionAhead:
    """The served champion (:func:`~model_release.canary.champion.fetch_served`) fetched on a thread of
    its own from when it is made, so that the store's download overlaps the export stage.

    Only :func:`release` uses it: an Airflow DAG runs export and canary as separate tasks, where the
    canary finds its champion itself. The fetch goes to a hidden folder of the workspace, which
    :meth:`take` moves to the canary's champion folder (where the canary would have fetched it);
    :meth:`close` removes what was not taken. Whatever the fetch raised is raised by :meth:`take`,
    inside the canary stage, as if the canary had fetched it itself.
    """

    def __init__(self, spec: ReleaseSpec, ws: Workspace, services: Services) -> None:
        import tempfile
        import threading
        from pathlib import Path

        self._folder = Path(tempfile.mkdtemp(prefix=".champion-ahead-", dir=ws.path))
        self._found: Any = None
        self._error: BaseException | None = None
        self._taken = False
        self._thread = threading.Thread(target=self._fetch, args=(spec, services), name="champion-ahead", daemon=True)
        self._thread.start()

    def _fetch(self, spec: ReleaseSpec, services: Services) -> None:
        from .canary.champion import fetch_served

        try:  # files only: the champion's code is parsed by take(), on the caller's thread (see FetchedRelease)
            self._found = fetch_served(spec, self._folder / "champion", store=services.store(spec.promote.store))
        except BaseException as exc:  # noqa: BLE001 - raised again by take(), in the canary stage
            self._error = exc

    def take(self, folder: Any) -> Any:
        """The served champion moved to ``folder`` (None when the channel had no pointer); raises what the fetch raised.

        Taken once: a second call (a retried canary in the same process) returns None, so the caller looks again.
        """
        import shutil
        from pathlib import Path

        self._thread.join()
        if self._taken:
            return None
        self._taken = True
        if self._error is not None:
            raise self._error
        found = self._found
        if found is None:
            return None
        folder = Path(folder)
        if folder.exists():
            shutil.rmtree(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(self._folder / "champion"), str(folder))
        return found.champion(folder)

    def close(self) -> None:
        """Wait for the fetch and remove its folder (what :meth:`take` moved away is not in it)."""
        import shutil

        self._thread.join()
        shutil.rmtree(self._folder, ignore_errors=True)


@dataclass
class ReleaseRef(_Serialisable):
    """The small reference a release's Airflow tasks pass each other in XCom.

    Stage results live in the workspace; the reference names the release, where its workspace
    and spec are, and carries each finished stage's one-line summary (``stages``).
    """

    release_id: str
    workspace_root: str
    spec_path: str
    overrides: dict[str, Any] = field(default_factory=dict)
    promote: bool = True
    model: str = ""
    connections: dict[str, str] = field(default_factory=dict)
    #: stage -> small facts of its result (digests, verdicts, paths)
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the object-store prefix the workspace is published to (``s3://BUCKET/workspaces``); None: every
    #: task reaches ``workspace_root`` (one machine, or a shared mount)
    workspace_store: str | None = None
    #: the run that makes the release: dag_id, run_id, run_type, bundle name and version, code digest
    run: dict[str, Any] = field(default_factory=dict)
    #: the claim start took in the channel's ledger (:class:`~.store.claim.Claim` as a dict): the ledger's
    #: version and the candidate as start resolved it (each member's version and run), which intake downloads
    claim: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> ReleaseSpec:
        from .spec import load_spec

        return load_spec(self.spec_path, overrides=self.overrides or None)

    def workspace(self, *, local_root: str | None = None,
                  open_mirror: Callable[[str], Any] | None = None) -> Workspace:
        """The release's workspace on this worker.

        With ``workspace_store`` the folder is this worker's own (``local_root``, default
        ``$MODEL_RELEASE_WORKSPACE`` or ``./.work/workspace``) and stages are fetched from and
        published to the store (``open_mirror`` builds the mirror, e.g. with an Airflow
        connection's credentials); without it, ``workspace_root`` is the folder every task shares.
        """
        if self.workspace_store:
            from .workspace import default_root
            from .workspace_mirror import StoreMirror

            mirror = (open_mirror or StoreMirror.open)(self.workspace_store)
            return Workspace(self.release_id, local_root or default_root(), mirror=mirror)
        return Workspace(self.release_id, self.workspace_root)

    def after(self, stage: str, facts: dict[str, Any]) -> "ReleaseRef":
        """A copy with ``stage``'s facts added (XCom values are never mutated in place)."""
        return ReleaseRef.from_dict({**self.to_dict(), "stages": {**self.stages, stage: facts}})
