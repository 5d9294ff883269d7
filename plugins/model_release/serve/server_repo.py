"""A serving Triton's own model repository, written by the agent beside it and read by nobody else.

Layout (one folder per server, fixed at the server's start-up)::

    <repo>/<model>/config.pbtxt          the release's config, version_policy specific [kept versions]
    <repo>/<model>/<v>/...               the release's version folder under its serving number <v>
    <repo>/<model>/<v>/pins.json         BLS models only: {callee: version}, read by the model's
                                         initialize (config.pbtxt is shared by all versions, a
                                         version folder is not)
    <repo>/<model>/<v>/.model-release.json   which release and content digest this folder holds
    <repo>/<model>/<v>/__pycache__/      python models: model.py compiled before the rename (below)
    <repo>/<model>/warmup/<input>-<sha12>    warm-up samples' data (named by digest: add only)
    <repo>/<entry>/1/                    the entry ensemble: one version; its steps pin versions

A version folder is written beside its final name and renamed into place, so the server never
sees half a folder; a folder already in place with the same digest is not copied again.
A python model's ``model.py`` is compiled into the folder before the rename: the python stub
otherwise writes ``__pycache__`` there as it first loads the model, Triton then sees a modified
model, and the entry ensemble's load loads that step a second time (about 1.3 s per python step and
server on the CPU fleet). The bytecode is the roll-out's own interpreter's; a stub running another
Python version ignores it and writes its own (the second load comes back, nothing else changes).
Release files come from the agent's content cache (:mod:`.release_cache`): fetched from the store
verified against the manifest's sha256 and, on the CPU fleet, with ONNX leaves served through the
canary's onnxruntime shim (:mod:`model_release.triton.shim`).

:class:`ModelRepository` is what the agent's convergence (:mod:`.converge`) writes through;
:class:`FolderRepository` is the real one (this module's functions on one folder), and the scale
benchmark's fake Triton keeps its repository in memory behind the same calls.
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..repository.config import CONFIG_FILE, read_config, write_config
from ..repository.warmup_samples import WARMUP_FOLDER
from .versions import ENSEMBLE_VERSION

PINS_FILE = "pins.json"
MARKER_FILE = ".model-release.json"


@dataclass
class ReleaseFiles:
    """A release ready to be copied onto serving Tritons."""

    release_id: str
    manifest: dict[str, Any]
    models_dir: Path
    versions: dict[str, int]
    shimmed: list[str] = field(default_factory=list)
    _configs: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def repository(self) -> dict[str, Any]:
        return self.manifest.get("repository", {})

    @property
    def entry(self) -> str:
        return str(self.repository["entry_model"])

    def release_version(self, model: str) -> str:
        """The version folder the release itself wrote (``repository.model_version``)."""
        return str(self.repository["models"][model])

    def _read(self, model: str) -> Any:
        if model not in self._configs:
            self._configs[model] = read_config(self.models_dir / model / CONFIG_FILE)
        return self._configs[model]

    def config(self, model: str) -> Any:
        """``model``'s config as released (a fresh copy: callers change it)."""
        copy = type(self._read(model))()
        copy.CopyFrom(self._read(model))
        return copy

    def is_ensemble(self, model: str) -> bool:
        return self._read(model).platform == "ensemble"

    def members(self) -> list[str]:
        """The models to load before the entry ensemble, dependencies first (leaves, then BLS)."""
        order = [m for m in self.repository.get("load_order", []) if not self.is_ensemble(m)]
        calls = self.repository.get("calls", {})
        bls = [m for m in order if calls.get(m) and not self.is_ensemble(m)]
        return [m for m in order if m not in bls] + bls

    def pins(self, model: str) -> dict[str, int]:
        """What ``model`` calls (ensemble steps or BLS calls) -> the serving version to call."""
        return {callee: self.versions[callee] for callee in self.repository.get("calls", {}).get(model, [])
                if callee in self.versions}


def folder_holds(repo: Path, model: str, version: int, digest: str) -> bool:
    """True when ``<repo>/<model>/<version>`` is in place and holds the content ``digest``."""
    marker = repo / model / str(version) / MARKER_FILE
    try:
        return json.loads(marker.read_text()).get("digest") == digest
    except (OSError, ValueError):
        return False


def stage_version(release: ReleaseFiles, model: str, repo: Path, digest: str) -> bool:
    """Put ``model``'s version folder of ``release`` in place under its serving number.

    Returns:
        True when files were copied, False when the folder was already there with this content.
    """
    version = release.versions[model]
    if folder_holds(repo, model, version, digest):
        return False
    _stage_warmup(release, model, repo)
    final = repo / model / str(version)
    work = repo / model / f".{version}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(release.models_dir / model / release.release_version(model), work)
    pins = release.pins(model)
    if pins:
        (work / PINS_FILE).write_text(json.dumps(pins, sort_keys=True))
    (work / MARKER_FILE).write_text(json.dumps({"release_id": release.release_id, "digest": digest}))
    compile_python_model(work)
    if final.exists():  # a folder left by an interrupted copy without its marker: never served
        shutil.rmtree(final)
    os.replace(work, final)
    return True


def compile_python_model(version_folder: Path) -> None:
    """Compile ``model.py`` of a python model's version folder where its stub will look for the bytecode.

    Best effort: a script that does not compile is left to the stub, which reports the error as it loads."""
    script = version_folder / "model.py"
    if script.is_file():
        try:
            py_compile.compile(str(script), cfile=importlib.util.cache_from_source(str(script)), doraise=True)
        except (py_compile.PyCompileError, OSError, ValueError):
            pass


def _stage_warmup(release: ReleaseFiles, model: str, repo: Path) -> None:
    """Copy the model's warm-up data files (``<model>/warmup/``, beside the versions; named by digest, so add only)."""
    source = release.models_dir / model / WARMUP_FOLDER
    if not source.is_dir():
        return
    target = repo / model / WARMUP_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.is_file() and not (target / path.name).is_file():
            tmp = target / f".{path.name}.partial-{os.getpid()}"
            shutil.copyfile(path, tmp)
            os.replace(tmp, target / path.name)


def clean_partials(repo: Path) -> None:
    """Remove version folders an interrupted roll-out left half-copied (never loaded: not under a number)."""
    for partial in repo.glob("*/.*.partial-*"):
        shutil.rmtree(partial, ignore_errors=True)


def member_config(release: ReleaseFiles, model: str, keep: set[int]) -> Any:
    """``model``'s config from ``release`` serving exactly ``keep`` (its new version among them)."""
    config = release.config(model)
    config.version_policy.specific.versions[:] = sorted(keep)
    return config


def entry_config(release: ReleaseFiles) -> Any:
    """The entry ensemble's config with every step pinned to the release's serving versions."""
    config = release.config(release.entry)
    for step in config.ensemble_scheduling.step:
        step.model_version = release.versions[step.model_name]
    config.version_policy.specific.versions[:] = [ENSEMBLE_VERSION]
    return config


def write_model_config(repo: Path, model: str, config: Any) -> None:
    """Write ``<repo>/<model>/config.pbtxt`` atomically (a restarted server loads what was served)."""
    folder = repo / model
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{CONFIG_FILE}.partial-{os.getpid()}"
    write_config(tmp, config)
    os.replace(tmp, folder / CONFIG_FILE)


def ensure_entry_folder(repo: Path, entry: str) -> None:
    """The entry ensemble's (empty) version folder, which Triton wants to exist."""
    folder = repo / entry / str(ENSEMBLE_VERSION)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".keep").touch()


def drop_version(repo: Path, model: str, version: int, previous: Any | None) -> None:
    """Undo a refused load: remove the new version folder and put the previous config back."""
    shutil.rmtree(repo / model / str(version), ignore_errors=True)
    if previous is not None:
        write_model_config(repo, model, previous)


def copy_version(repo: Path, model: str, source: int, target: int) -> None:
    """Put a copy of ``<model>/<source>`` in place as ``<model>/<target>`` (replacing what is there).

    Triton 2.51 keeps a version that failed to load in its index as UNAVAILABLE with the failure as
    its reason, and a server with strict readiness answers not ready while any such version is there;
    neither a load without that version nor an unload of the model clears it. Loading a version that
    loads (a copy of the serving one) under the failed number and unloading it again leaves the
    reason "unloaded", which readiness accepts: this is how the agent unloads a failed version.
    """
    work = repo / model / f".{target}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(repo / model / str(source), work)
    final = repo / model / str(target)
    if final.exists():
        shutil.rmtree(final)
    os.replace(work, final)


def prune(repo: Path, model: str, keep: set[int]) -> list[int]:
    """Remove ``model``'s version folders not in ``keep`` (releases no longer served); the versions removed."""
    folder = repo / model
    gone = [int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit() and int(p.name) not in keep] \
        if folder.is_dir() else []
    for version in gone:
        shutil.rmtree(folder / str(version), ignore_errors=True)
    return sorted(gone)


class ModelRepository(Protocol):
    """What the agent writes into its server's repository (each call as the function of this module it names)."""

    def stage(self, release: ReleaseFiles, model: str, digest: str) -> bool: ...  # stage_version

    def write_config(self, model: str, config: Any) -> None: ...  # write_model_config

    def read_config(self, model: str) -> Any | None: ...  # the config.pbtxt in place, None when absent

    def drop_version(self, model: str, version: int, previous: Any | None) -> None: ...  # drop_version

    def copy_version(self, model: str, source: int, target: int) -> None: ...  # copy_version

    def prune(self, model: str, keep: set[int]) -> list[int]: ...  # prune

    def ensure_entry_folder(self, entry: str) -> None: ...  # ensure_entry_folder

    def clean_partials(self) -> None: ...  # clean_partials

    def check(self) -> str | None: ...  # why the repository cannot be written, or None


@dataclass
class FolderRepository:
    """:class:`ModelRepository` on a folder the server was started on (``--model-repository``)."""

    root: Path

    def stage(self, release: ReleaseFiles, model: str, digest: str) -> bool:
        return stage_version(release, model, self.root, digest)

    def write_config(self, model: str, config: Any) -> None:
        write_model_config(self.root, model, config)

    def read_config(self, model: str) -> Any | None:
        path = self.root / model / CONFIG_FILE
        return read_config(path) if path.is_file() else None

    def drop_version(self, model: str, version: int, previous: Any | None) -> None:
        drop_version(self.root, model, version, previous)

    def copy_version(self, model: str, source: int, target: int) -> None:
        copy_version(self.root, model, source, target)

    def prune(self, model: str, keep: set[int]) -> list[int]:
        return prune(self.root, model, keep)

    def ensure_entry_folder(self, entry: str) -> None:
        ensure_entry_folder(self.root, entry)

    def clean_partials(self) -> None:
        clean_partials(self.root)

    def check(self) -> str | None:
        """Why the folder cannot be written (missing, read-only, full), or None."""
        probe = self.root / f".write-check-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            return f"{self.root} cannot be written ({exc.strerror or type(exc).__name__})"
        return None
