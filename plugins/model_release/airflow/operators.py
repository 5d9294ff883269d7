"""Operators for a release in a DAG of your own: one per stage, each ``execute`` a few lines into :mod:`.tasks`.

In data-flow order (:func:`~model_release.airflow.task_group.release_task_group` chains them)::

    ReleaseStartOperator -> IntakeOperator -> ExportOperator -> TensorRTOperator (queue "gpu")
    -> AssembleOperator -> CanaryOperator (pool "triton_canary") -> PromoteOperator -> RolloutOperator
    -> ReleaseFinishOperator (trigger_rule "all_done")

:class:`ReleaseStartOperator` validates the spec and the run's parameters, pins and claims the candidate
version and returns the *release reference* (:class:`~model_release.pipeline.ReleaseRef` as a dict): the
small JSON every other operator takes as ``release`` (the upstream task's ``.output``, which also sets
the dependency) and returns with its own stage's facts added, as its XCom ``return_value``. Stage
results stay in the release workspace, never in XCom. :class:`ReleaseFinishOperator` settles the claim
whatever happened. :class:`RollbackOperator` moves a channel back (the ``model_release_rollback`` DAG).

Connections follow the provider convention ``<service>_conn_id`` with the hooks' defaults:
``mlflow_conn_id`` (:class:`~.hooks.MlflowHook`), ``aws_conn_id`` (:class:`~.hooks.ModelStoreHook`, also
the workspace store's), ``triton_conn_id`` (:class:`~.hooks.TritonCanaryHook`); each operator has those
its stage uses, all templated. Nothing heavy is imported here: the task bodies import the stages when
they run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..stages import PROMOTE
from .dags import NOTHING_NEW, channel_asset, watch_rollback_alias
from .hooks import MlflowHook, ModelStoreHook, TritonCanaryHook

if TYPE_CHECKING:
    from airflow.sdk import Context

#: every connection argument an operator may have, in the names the release reference carries them under
CONN_ARGS = ("mlflow_conn_id", "aws_conn_id", "triton_conn_id")
#: the DAG params that, when the DAG declares them and a run gives a value, override the start operator's own
RUN_PARAMS = ("version", "alias", "release_id", "promote", "workspace", "force_retry")


def _connections(op: BaseOperator) -> dict[str, str]:
    """The operator's connection ids, under :data:`CONN_ARGS`' names (the release reference's ``connections``)."""
    return {name: getattr(op, name) for name in CONN_ARGS if hasattr(op, name)}


def _with_connections(ref: dict[str, Any], op: BaseOperator) -> dict[str, Any]:
    """The release reference with the operator's connection ids (they win over those the start task recorded)."""
    return {**ref, "connections": {**(ref.get("connections") or {}), **_connections(op)}}


def _spec_path(op: Any) -> str:
    """The operator's rendered ``spec``; a relative literal (not a template) taken from the DAG file's folder."""
    if op.spec_in_dag_folder and op.dag is not None and op.dag.fileloc:
        return str(Path(op.dag.folder) / op.spec)
    return op.spec


def _unset(value: Any) -> bool:
    """A value not given: None, or what Jinja renders a missing or None param as (``""``, ``"None"``)."""
    return value is None or value in ("", "None")


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


class _ReleaseOperator(BaseOperator):
    """What every release operator shares: the model store's (and workspace store's) connection."""

    template_fields: Sequence[str] = ("aws_conn_id",)

    def __init__(self, *, aws_conn_id: str = ModelStoreHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.aws_conn_id = aws_conn_id


class ReleaseStageOperator(_ReleaseOperator):
    """A stage of a release: takes the release reference the task before returned, returns it with its facts.

    Args:
        release: the release reference (a dict), usually the upstream operator's ``.output``.
        aws_conn_id: the model store's and the workspace store's connection.
    """

    template_fields: Sequence[str] = ("release", *_ReleaseOperator.template_fields)

    def __init__(self, *, release: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.release = release

    def release_ref(self) -> dict[str, Any]:
        """The rendered release reference with this operator's connection ids (they win over the start task's)."""
        from airflow.sdk.exceptions import AirflowFailException

        ref = self.release
        if not isinstance(ref, dict) or "release_id" not in ref:
            raise AirflowFailException(
                f"{self.task_id}: release is {type(ref).__name__} {str(ref)[:80]!r}, not a release reference; pass the "
                "upstream release task's .output (for example release=intake.output), or use release_task_group()")
        return _with_connections(ref, self)


class ReleaseStartOperator(_ReleaseOperator):
    """Validate the spec and the run's parameters, pin and claim the candidate version: the release reference.

    Args:
        spec: the release spec (YAML). A relative path that is not a template resolves against the folder
            of the DAG file that defines the task; a template that renders relative resolves against the
            project home (``$MODEL_RELEASE_HOME``), as the ``model_release`` DAG's ``spec`` param does.
        version, alias: override the spec's ``model.version`` / ``model.alias`` (version wins).
        release_id: the release's id (default: ``<spec name>-<run time>-<digest of the run id>``).
        promote: False stops after the canary.
        workspace: ``s3://BUCKET/PREFIX`` when the workers share no disk, or a folder they all mount.
        scheduled: a scheduled run: skip (every task) unless the candidate is new to the channel.
        mlflow_conn_id, aws_conn_id: the registry's and the model store's connections.

    A DAG param of the same name (:data:`RUN_PARAMS`, and ``force_retry`` for a scheduled run) overrides
    the argument at trigger time when the DAG declares it and the run gives it a value; a run that gives
    ``version`` or ``alias`` replaces both arguments.
    """

    template_fields: Sequence[str] = ("spec", "version", "alias", "release_id", "promote", "workspace",
                                      "mlflow_conn_id", *_ReleaseOperator.template_fields)

    def __init__(self, *, spec: str, version: int | str | None = None, alias: str | None = None,
                 release_id: str | None = None, promote: bool = True, workspace: str | None = None,
                 scheduled: bool = False, mlflow_conn_id: str = MlflowHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.version, self.alias, self.release_id = str(spec), version, alias, release_id
        self.promote, self.workspace, self.scheduled, self.mlflow_conn_id = promote, workspace, scheduled, mlflow_conn_id
        self.spec_in_dag_folder = not _is_template(spec) and not Path(spec).is_absolute()

    def run_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """What :func:`.tasks.start` takes: the rendered arguments, then the run's params where given."""
        own = {"spec": _spec_path(self), "version": self.version, "alias": self.alias, "release_id": self.release_id,
               "promote": self.promote, "workspace": self.workspace}
        run = {key: params[key] for key in RUN_PARAMS if not _unset(params.get(key))}
        if run.keys() & {"version", "alias"}:  # the run names the model version its own way: ours goes
            own.update(version=None, alias=None)
        merged = {key: None if _unset(value) else value for key, value in {**own, **run}.items()}
        if isinstance(merged["version"], str) and merged["version"].isdigit():
            merged["version"] = int(merged["version"])  # a template renders text
        if isinstance(merged["promote"], str):
            merged["promote"] = merged["promote"].strip().lower() not in ("false", "0", "no")
        return merged

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from . import tasks

        ti = context["ti"]
        try:
            return tasks.start(self.run_params(dict(context["params"])), context["run_id"], context["dag_run"].run_after,
                               run=run_facts(context), scheduled=self.scheduled, connections=_connections(self),
                               is_active=lambda holder: _is_active(ti, holder))
        except AirflowSkipException as exc:  # finish tells "nothing to release" from "start failed" by this
            ti.xcom_push(key=NOTHING_NEW, value=str(exc))
            raise


class IntakeOperator(ReleaseStageOperator):
    """Intake: resolve the pinned model version in MLflow, download it, read its signature and lineage."""

    template_fields: Sequence[str] = (*ReleaseStageOperator.template_fields, "mlflow_conn_id")

    def __init__(self, *, mlflow_conn_id: str = MlflowHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mlflow_conn_id = mlflow_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        return tasks.intake(self.release_ref())


class ExportOperator(ReleaseStageOperator):
    """Export: the native model to ONNX, checked, with parity against the native model on the golden set."""

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        return tasks.export(self.release_ref())


class TensorRTOperator(ReleaseStageOperator):
    """TensorRT: build the plan (with parity) on a GPU worker, queue ``gpu`` by default; skipped with the
    reason recorded where the spec only asks for it and the worker has no GPU."""

    def __init__(self, *, queue: str = "gpu", **kwargs: Any) -> None:
        super().__init__(queue=queue, **kwargs)

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        return tasks.tensorrt(self.release_ref())


class AssembleOperator(ReleaseStageOperator):
    """Assemble: render the versioned Triton repository from the templates, and lint it."""

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        return tasks.assemble(self.release_ref())


class CanaryOperator(ReleaseStageOperator):
    """Canary: serve the candidate beside the champion, replay the golden set, judge every gate, report.

    Pool ``triton_canary`` by default (one release at a time on the canary Triton). A gate's refusal
    fails at once; an outage is retried; an inconclusive canary reschedules the task, its pool slot freed,
    as ``canary.inconclusive`` bounds it (:func:`.tasks.inconclusive_next`).
    """

    template_fields: Sequence[str] = (*ReleaseStageOperator.template_fields, "mlflow_conn_id", "triton_conn_id")

    def __init__(self, *, pool: str = "triton_canary", mlflow_conn_id: str = MlflowHook.default_conn_name,
                 triton_conn_id: str = TritonCanaryHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(pool=pool, **kwargs)
        self.mlflow_conn_id = mlflow_conn_id
        self.triton_conn_id = triton_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        return tasks.canary(self.release_ref(), reschedules=int(context.get("task_reschedule_count") or 0))


class PromoteOperator(ReleaseStageOperator):
    """Promote: upload, verify and move the channel pointer; emits an event on the channel's Asset.

    Args:
        channel: the channel whose Asset (:func:`~.dags.channel_asset`) the task's outlet is; decided
            when the DAG is parsed, so not templated. The event's ``extra`` names the release when the
            spec promoted to this channel.
    """

    template_fields: Sequence[str] = (*ReleaseStageOperator.template_fields, "mlflow_conn_id")

    def __init__(self, *, channel: str = "production", mlflow_conn_id: str = MlflowHook.default_conn_name,
                 **kwargs: Any) -> None:
        outlets = [*(kwargs.pop("outlets", None) or []), channel_asset(channel)]
        super().__init__(outlets=outlets, **kwargs)
        self.mlflow_conn_id = mlflow_conn_id
        self.channel = channel

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        ref = tasks.promote(self.release_ref())
        promoted = ref["stages"].get(PROMOTE)
        if promoted and promoted["channel"] == self.channel:
            context["outlet_events"][channel_asset(self.channel)].extra = {
                "action": "promote", "release_id": promoted["release_id"], "store": promoted["store_uri"],
                "prefix": promoted["release_prefix"], "channel": promoted["channel"],
                "previous_release": promoted["previous_release"],
            }
        return ref


class RolloutOperator(ReleaseStageOperator):
    """Roll out: write the plan the channel's serving agents follow, step by step (``serve.rollout.steps``), watched.

    Skipped without a promotion or with no serving agent registered; one at a time by its lease in the store. Its outlet is the
    channel's rollback alias (:func:`~.dags.watch_rollback_alias`): it emits the channel's Asset event
    only when its watch rolled the release back, never for an ordinary roll-out.
    """

    template_fields: Sequence[str] = (*ReleaseStageOperator.template_fields, "mlflow_conn_id")

    def __init__(self, *, channel: str = "production", mlflow_conn_id: str = MlflowHook.default_conn_name,
                 **kwargs: Any) -> None:
        outlets = [*(kwargs.pop("outlets", None) or []), watch_rollback_alias(channel)]
        super().__init__(outlets=outlets, **kwargs)
        self.mlflow_conn_id = mlflow_conn_id
        self.channel = channel

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        result = tasks.rollout(self.release_ref(), context["run_id"])
        extra = tasks.watch_rollback_event(result)
        if extra is not None and extra["channel"] == self.channel:  # the watch rolled back: the consumers hear it
            context["outlet_events"][watch_rollback_alias(self.channel)].add(channel_asset(self.channel), extra=extra)
        return result


class ReleaseFinishOperator(_ReleaseOperator):
    """Settle the run's claim in the channel's ledger, whatever happened (``trigger_rule="all_done"``).

    Its state is the run's: it fails when start failed or the release was rejected or failed.

    Args:
        start_task_id: the start task's id, whose reference it pulls (a failed or skipped start leaves
            none, and that is an answer too).
    """

    def __init__(self, *, start_task_id: str, trigger_rule: str = "all_done", **kwargs: Any) -> None:
        super().__init__(trigger_rule=trigger_rule, **kwargs)
        self.start_task_id = start_task_id

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        ti = context["ti"]
        ref = ti.xcom_pull(task_ids=self.start_task_id)
        return tasks.finish(ref and _with_connections(ref, self), nothing_new=ti.xcom_pull(task_ids=self.start_task_id, key=NOTHING_NEW))


class RollbackOperator(_ReleaseOperator):
    """Move a channel's pointer back to an earlier verified release, and the MLflow alias with it.

    Args:
        spec: the spec whose store and alias to use (resolved as :class:`ReleaseStartOperator`'s).
        channel: the channel (default: the spec's ``promote.channel``).
        to_release: the release to return to (default: the previous one).

    The DAG params ``channel`` and ``to_release`` override the arguments when given. When one of the
    task's outlets is the rolled-back channel's Asset, its event's ``extra`` says ``action: rollback``.
    """

    template_fields: Sequence[str] = ("spec", "channel", "to_release", "mlflow_conn_id",
                                      *_ReleaseOperator.template_fields)

    def __init__(self, *, spec: str, channel: str | None = None, to_release: str | None = None,
                 mlflow_conn_id: str = MlflowHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.channel, self.to_release = str(spec), channel, to_release
        self.mlflow_conn_id = mlflow_conn_id
        self.spec_in_dag_folder = not _is_template(spec) and not Path(spec).is_absolute()

    def execute(self, context: Context) -> dict[str, Any]:
        from . import tasks

        params = dict(context["params"])
        own = {"spec": _spec_path(self), "channel": self.channel, "to_release": self.to_release}
        run = {key: params[key] for key in ("channel", "to_release") if not _unset(params.get(key))}
        result = tasks.rollback({k: None if _unset(v) else v for k, v in {**own, **run}.items()},
                                connections=_connections(self))
        asset = channel_asset(result["channel"])
        if any(getattr(outlet, "name", None) == asset.name for outlet in self.outlets):
            context["outlet_events"][asset].extra = {
                "action": "rollback", "release_id": result["to_release"], "previous_release": result["from_release"],
                "store": result["store"], "channel": result["channel"],
            }
        return result


def run_facts(context: Context) -> dict[str, Any]:
    """The running DAG run, for the release manifest: DAG id, run type, the DAG bundle and its version."""
    bundle = getattr(context["ti"], "bundle_instance", None)
    return {
        "dag_id": context["dag"].dag_id,
        "run_type": str(getattr(context["dag_run"], "run_type", "") or ""),
        "bundle_name": getattr(bundle, "name", None),
        "bundle_version": getattr(bundle, "version", None),
    }


def _is_active(ti: Any, holder: dict[str, Any]) -> bool:
    """Whether the run holding a ledger claim is still queued or running (asked through the Task SDK)."""
    if not holder.get("dag_id") or not holder.get("run_id"):
        return False
    try:
        state = ti.get_dagrun_state(holder["dag_id"], holder["run_id"])
    except Exception:  # noqa: BLE001 - a run that cannot be found is not running
        return False
    return str(state).rsplit(".", 1)[-1].lower() in ("queued", "running")


__all__ = ["AssembleOperator", "CanaryOperator", "ExportOperator", "IntakeOperator", "PromoteOperator",
           "ReleaseFinishOperator", "ReleaseStageOperator", "ReleaseStartOperator", "RollbackOperator",
           "RolloutOperator", "TensorRTOperator"]