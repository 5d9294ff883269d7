"""The candidate a run releases, resolved once: the model version its alias names now, and every member's.

A run resolves its candidate exactly once, when it claims it (:mod:`model_release.store.claim`):
:func:`resolve_candidate` asks MLflow which version ``spec.model`` names (one registry call) and,
for a cascade or fan-out, which version each registered member's alias names (one call each). The
:class:`Candidate` it returns travels with the run (the Airflow tasks' reference, or the CLI's
process) and intake downloads exactly those versions: nothing resolves an alias a second time, so
an alias moved while the run goes on does not change what it releases, and the ledger's entry, the
intake and the manifest name one identity. Each version keeps the alias that named it at claim
time, which the manifest records.

This module imports neither the spec's loader nor a stage (the claim and intake both use it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import IntakeError
from ..safe_text import redact
from .members import RELEASE, Lineage, pipeline_identity, pipeline_members, resolve_members


@dataclass(frozen=True)
class Candidate:
    """One model version (and, for a pipeline, every member's version) pinned for one run.

    Attributes:
        model: the registered model's name (``spec.model.name``).
        version: the version the run releases.
        alias: the alias that named ``version`` when the run claimed it; None when the spec or
            trigger named the version itself.
        run_id: the MLflow run that produced the version.
        members: a cascade's or fan-out's members, key -> lineage (``release`` is this model); {} otherwise.
    """

    model: str
    version: str
    alias: str | None = None
    run_id: str | None = None
    members: dict[str, Lineage] = field(default_factory=dict)

    @property
    def identity(self) -> str | None:
        """Every member's version (:func:`~.members.pipeline_identity`); None for a model that is no pipeline."""
        return pipeline_identity(self.members) if self.members else None

    def describe(self) -> str:
        """``iris-small v3 (@candidate; large=iris-large v2 @candidate)``: what the run releases, in words."""
        named = f" @{self.alias}" if self.alias else ""
        parts = [f"{k}={v.name} v{v.version}" + (f" @{v.alias}" if v.alias else "") if v.kind == "registered"
                 else f"{k}={v.source}" for k, v in sorted(self.members.items()) if v.kind != RELEASE]
        return f"{self.model} v{self.version}{named}" + (f" with {', '.join(parts)}" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "version": self.version, "alias": self.alias, "run_id": self.run_id,
                "members": {k: v.to_dict() for k, v in self.members.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Candidate":
        fields = set(Lineage.__dataclass_fields__)
        members = {k: Lineage(**{f: v for f, v in item.items() if f in fields}) for k, item in (data.get("members") or {}).items()}
        return cls(str(data["model"]), str(data["version"]), data.get("alias"), data.get("run_id"), members)


def resolve_candidate(tracking_uri: str | None, spec: Any) -> Candidate:
    """The version ``spec.model`` names now and, for a pipeline, every registered member's version.

    One registry call for the model (its alias, or its fixed version to learn the run), one per
    registered member. The release's own model appears among the members as ``release``.

    Raises:
        IntakeError: the model, alias or version (or a member's) does not exist; it is named.
        ServiceUnavailable: MLflow could not be reached.
    """
    from ..mlflow_env import quiet_mlflow_env
    from .stage import find_version

    quiet_mlflow_env()
    from mlflow import MlflowClient

    ref = spec.model
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    found = find_version(client, ref.name, ref.alias, ref.version)
    version = str(found.version)
    members = pipeline_members(spec)
    lineage = resolve_members(tracking_uri, {k: v for k, v in members.items() if v != RELEASE}) if members else {}
    lineage.update({k: Lineage(k, RELEASE, ref.name, version, found.run_id, ref.alias, found.source)
                    for k, v in members.items() if v == RELEASE})
    # the candidate travels in XCom and the ledger: a source URI's credentials never do
    safe = {k: replace(v, source=redact(v.source)) if v.kind != "unregistered" and v.source else v
            for k, v in sorted(lineage.items())}
    return Candidate(ref.name, version, ref.alias, found.run_id, safe)


def pinned_spec(spec: Any, candidate: Candidate) -> Any:
    """``spec`` with ``model`` pinned to the candidate's version (its alias is not asked again)."""
    from ..spec import ModelRef

    if candidate.model != spec.model.name:
        raise IntakeError(f'the run claimed model "{candidate.model}" but the spec names "{spec.model.name}"; the spec '
                          "changed while the run went on: start a new run")
    return spec.model_copy(update={"model": ModelRef(name=spec.model.name, version=int(candidate.version))})
