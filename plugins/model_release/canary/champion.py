"""The production champion the canary judges a candidate against.

Which champion, in order:

1. **served**: the release the channel's pointer names in the store (``promote.store``,
   ``promote.channel``). It is fetched from the store and verified against its manifest
   (:func:`~model_release.store.fetch.fetch_release`), its models renamed with
   :data:`CHAMPION_SUFFIX` so they load beside the candidate's on the same Triton, and replayed
   through the same golden rows. The pointer's release id is pinned: promotion refuses to replace
   any other release.
2. **native**: the channel has no release in the store but the MLflow alias
   (``promote.mlflow_alias``) names a model version: that version's native model answers the
   golden inputs. The report says the champion was not served.
3. **none**: the first release of a channel. Value gates still apply; change gates are skipped.

Renaming is exact: ``config.pbtxt`` names and ensemble steps are rewritten through Triton's
ModelConfig protobuf, and in a python model's ``model.py`` only string literals equal to a
model name of the repository are replaced (the same literals the linter reads as BLS targets).
"""

from __future__ import annotations

import ast
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelReleaseError
from ..model.roles import LABEL, PROBABILITIES, VARIABLE
from ..spec import ReleaseSpec
from ..types import ExportResult, IntakeResult
from ..workspace import Workspace, atomic_write_bytes, link_or_copy
from .judge.compare import Interface
from .judge.contract import Contract, contract_of, signature_contract

log = logging.getLogger(__name__)

#: appended to every model name of the champion's repository on the canary
CHAMPION_SUFFIX = "__champion"

SERVED, NATIVE, NONE = "served", "native", "none"


@dataclass
class Champion:
    """The champion found for a release, ready to be served or already answered.

    Attributes:
        kind: ``served``, ``native`` or ``none``.
        channel: the channel whose champion it is.
        release_id: the release the channel's pointer named when read (None: no pointer). Promotion pins it.
        name: how the report names it (``release iris-2 (iris-classifier v3)``).
        reason: for ``native`` and ``none``, why no served champion.
        repository: (served) the renamed repository, ready to load.
        entry: (served) the renamed entry model; load_order the renamed models in dependency order.
        interface: how to read its outputs (its own roles and labels).
        contract: its entry's contract with clients.
        manifest: (served) its release.json.
        outputs: (native) its native outputs on the golden inputs.
        model_version: the MLflow model version it was built from.
    """

    kind: str
    channel: str
    release_id: str | None = None
    name: str = ""
    reason: str = ""
    repository: Path | None = None
    entry: str = ""
    load_order: list[str] = field(default_factory=list)
    interface: Interface = field(default_factory=Interface)
    contract: Contract | None = None
    manifest: dict[str, Any] | None = None
    outputs: dict[str, np.ndarray] | None = None
    model_version: str | None = None
    #: the channel's pointer was read (so ``release_id`` None means "no pointer"): promotion pins it
    pinned: bool = False
    #: (served) model -> the models it calls, renamed
    calls: dict[str, list[str]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """What the report records about the champion."""
        return {
            "kind": self.kind, "channel": self.channel, "release_id": self.release_id, "name": self.name,
            "reason": self.reason or None, "model_version": self.model_version,
            "entry": self.entry or None, "load_order": self.load_order or None, "pinned": self.pinned,
        }


def find_champion(
    spec: ReleaseSpec, folder: Path, *, store: Any | None, tracking_uri: str | None, intake: IntakeResult,
    export: ExportResult,
) -> Champion:
    """The champion of ``spec.promote.channel``: served from the store, else native from MLflow, else none.

    Args:
        spec: the release spec (``promote.store``, ``channel``, ``mlflow_alias``).
        folder: where a served champion is fetched and renamed (``<folder>/release``, ``<folder>/models``).
        store: the opened model store, or None when the canary runs without one (then only MLflow is asked).
        tracking_uri: MLflow, for the native fallback.
        intake: the candidate (a champion that *is* the candidate's model version is still judged).
        export: the golden inputs, for the native fallback.

    Raises:
        ServiceUnavailable: the store could not be read (the canary is retried, never judged without it).
        ModelReleaseError: the champion's release is damaged (a checksum mismatch names the file).
    """
    channel = spec.promote.channel
    if store is not None:
        served = served_champion(spec, folder, store=store)
        if served is not None:
            return served
    champion = _native(spec, folder, tracking_uri, intake, export)
    if champion is None:
        where = f"channel {channel!r} of {spec.promote.store}" if store is not None else f"channel {channel!r}"
        alias = f" and MLflow has no {spec.promote.mlflow_alias!r} alias" if spec.promote.mlflow_alias else ""
        champion = Champion(NONE, channel, reason=f"{where} has no release yet{alias}: this is its first release")
    champion.pinned = store is not None
    return champion


def served_champion(spec: ReleaseSpec, folder: Path, *, store: Any) -> Champion | None:
    """The release the channel's pointer names, fetched into ``folder`` and renamed (pinned); None when
    the channel has no pointer. The first step of :func:`find_champion`, which needs nothing of the
    candidate: :func:`model_release.pipeline.release` runs its first half, :func:`fetch_served`, while the
    candidate exports.

    Raises:
        ServiceUnavailable: the store could not be read.
        ModelReleaseError: the champion's release is damaged (a checksum mismatch names the file).
    """
    fetched = fetch_served(spec, folder, store=store)
    return fetched.champion() if fetched is not None else None


@dataclass
class FetchedRelease:
    """The channel's release as fetched into ``folder / "release"``: files only, its code not read yet.

    :meth:`champion` renames it (its python models' sources are parsed) and reads it as the champion.
    The two halves are apart because CPython 3.11's ``ast`` is not safe on two threads at once
    (``SystemError: AST constructor recursion depth mismatch``, fixed in later Pythons): a fetch on a
    thread of its own beside an export that parses code (torch's does) must not parse any itself.
    """

    release_id: str
    channel: str
    folder: Path
    manifest: dict[str, Any]

    def champion(self, folder: Path | None = None) -> Champion:
        """The champion, renamed and pinned; ``folder``: where the fetched folder was moved since (default: where fetched)."""
        champion = _champion_of(self.manifest, self.release_id, self.channel, Path(folder or self.folder))
        champion.pinned = True
        return champion


def fetch_served(spec: ReleaseSpec, folder: Path, *, store: Any) -> FetchedRelease | None:
    """The first half of :func:`served_champion`: the pointer's release fetched into ``folder`` (None: no pointer)."""
    from ..store.fetch import fetch_release
    from ..store.pointer import read_channel

    pointer = read_channel(store, spec.promote.channel)
    if pointer is None:
        return None
    manifest = fetch_release(store, pointer.release_id, folder / "release", under="models/")
    return FetchedRelease(pointer.release_id, spec.promote.channel, folder, manifest)


def _champion_of(manifest: dict[str, Any], release_id: str, channel: str, folder: Path) -> Champion:
    """A fetched release (``folder / "release"``) renamed into ``folder / "models"`` and read as the champion."""
    fetched = folder / "release"
    repo = manifest.get("repository") or {}
    names = {m: m + CHAMPION_SUFFIX for m in (repo.get("models") or {})}
    renamed = rename_repository(fetched / "models", folder / "models", names)
    labels = repo.get("labels")
    if labels is None:  # a release written before labels were recorded: its spec names them
        labels = ((manifest.get("spec") or {}).get("repository") or {}).get("labels")
    roles = repo.get("roles") or _roles_from_names(renamed, names[repo["entry_model"]])
    entry = names[repo["entry_model"]]
    model = manifest.get("model") or {}
    return Champion(
        SERVED, channel, release_id=release_id,
        name=f"release {release_id} ({model.get('name')} v{model.get('version')})",
        repository=renamed, entry=entry, load_order=[names[m] for m in repo.get("load_order", [])],
        interface=Interface(roles, labels, repo.get("classes")),
        contract=contract_of(renamed, entry, labels if LABEL in roles else None),
        manifest=manifest, model_version=str(model.get("version")),
        calls={names.get(m, m): [names.get(c, c) for c in cs] for m, cs in (repo.get("calls") or {}).items()},
    )


def _roles_from_names(repository: Path, entry: str) -> dict[str, str]:
    """Roles of a release that recorded none: outputs named after a role play it."""
    contract = contract_of(repository, entry, None)
    return {r: r for r in (PROBABILITIES, LABEL, VARIABLE) if r in contract.outputs}


def _native(spec: ReleaseSpec, folder: Path, tracking_uri: str | None, intake: IntakeResult, export: ExportResult) -> Champion | None:
    """The model version MLflow's alias names, answering natively; None without an alias or version."""
    alias = spec.promote.mlflow_alias
    if not alias:
        return None
    from ..intake.stage import resolve

    try:
        prod_spec = spec.model_copy(update={"model": spec.model.model_copy(update={"alias": alias, "version": None})})
        prod = resolve(prod_spec, Workspace("production", root=folder), tracking_uri=tracking_uri)
    except ModelReleaseError as exc:
        log.info("canary: no native champion behind alias %r (%s)", alias, exc)
        return None
    champion = Champion(
        NATIVE, spec.promote.channel, name=f"{prod.model_name} v{prod.version} (MLflow alias {alias!r}, native)",
        reason=f"channel {spec.promote.channel!r} has no release in {spec.promote.store}; the champion is the model "
               f"version MLflow's alias {alias!r} names, run natively (not served)",
        interface=Interface({}, None, prod.classes),
        contract=signature_contract(prod.model_uri, prod.inputs, prod.outputs, prod.classes),
        model_version=prod.version,
    )
    inputs = {t.name: (t.datatype, tuple(t.dims)) for t in prod.inputs}
    if inputs != {t.name: (t.datatype, tuple(t.dims)) for t in intake.inputs}:
        champion.reason += "; its inputs differ from the candidate's, so it was not run on the golden set"
        return champion
    from ..model.native import load_native

    with np.load(export.golden_path, allow_pickle=False) as golden:
        outputs = load_native(prod)({k: golden[k] for k in golden.files})
    champion.outputs = {k: np.asarray(v) for k, v in outputs.items()}
    # native outputs are named after their roles (label/probabilities, variable; see model_release.model.native)
    champion.interface = Interface({r: r for r in (LABEL, PROBABILITIES, VARIABLE) if r in outputs}, None, prod.classes)
    return champion


# --- renaming a repository's models -------------------------------------------------------------


def rename_repository(source: Path, destination: Path, names: dict[str, str]) -> Path:
    """Copy a Triton model repository with every model renamed by ``names`` (old -> new).

    Folder names, each config's ``name``, ensemble steps' ``model_name`` and the model-name string
    literals of python models change; nothing else does.
    """
    from ..repository.config import CONFIG_FILE, read_config, write_config

    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    for old, new in names.items():
        target = destination / new
        shutil.copytree(source / old, target, copy_function=link_or_copy)  # what changes below is replaced whole
        config = read_config(target / CONFIG_FILE)
        config.name = new
        for step in config.ensemble_scheduling.step:
            step.model_name = names.get(step.model_name, step.model_name)
        write_config(target / CONFIG_FILE, config)
        for script in target.glob("*/model.py"):
            atomic_write_bytes(script, rename_literals(script.read_text(encoding="utf-8"), names).encode("utf-8"))
    return destination


def rename_literals(source: str, names: dict[str, str]) -> str:
    """``source`` with every string literal that equals a key of ``names`` replaced by its value."""
    lines = source.splitlines(keepends=True)
    spans = sorted(
        ((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, names[node.value])
         for node in ast.walk(ast.parse(source))
         if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
         and node.lineno == node.end_lineno),
        reverse=True,
    )
    for lineno, start, _, end, new in spans:
        line = lines[lineno - 1].encode("utf-8")  # ast offsets are in bytes
        lines[lineno - 1] = (line[:start] + repr(new).encode("utf-8") + line[end:]).decode("utf-8")
    return "".join(lines)
