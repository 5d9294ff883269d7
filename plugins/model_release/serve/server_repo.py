"""A serving Triton's own model repository, written by the roll-out and read by nobody else.

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
Release files come from :func:`prepare_release`: fetched from the store verified against the
manifest's sha256 (:func:`model_release.store.fetch.fetch_release`) and, on the CPU fleet, with
ONNX leaves served through the canary's onnxruntime shim (:mod:`model_release.triton.shim`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..repository.config import CONFIG_FILE, read_config, write_config
from ..repository.warmup_samples import WARMUP_FOLDER
from ..store.fetch import fetch_release
from ..store.model_store import ModelStore
from .versions import ENSEMBLE_VERSION

PINS_FILE = "pins.json"
MARKER_FILE = ".model-release.json"
_COMPLETE = ".prepared"


@dataclass
class ReleaseFiles:
    """A release ready to be copied onto serving Tritons."""

    release_id: str
    manifest: dict[str, Any]
    models_dir: Path
    versions: dict[str, int]
    shimmed: list[str] = field(default_factory=list)

    @property
    def repository(self) -> dict[str, Any]:
        return self.manifest.get("repository", {})

    @property
    def entry(self) -> str:
        return str(self.repository["entry_model"])

    def release_version(self, model: str) -> str:
        """The version folder the release itself wrote (``repository.model_version``)."""
        return str(self.repository["models"][model])

    def config(self, model: str) -> Any:
        return read_config(self.models_dir / model / CONFIG_FILE)

    def is_ensemble(self, model: str) -> bool:
        return self.config(model).platform == "ensemble"

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


def prepare_release(store: ModelStore, release_id: str, versions: dict[str, int], cache_dir: Path, *,
                    shim: bool) -> ReleaseFiles:
    """Fetch ``release_id``'s models once into ``cache_dir`` (verified), shimmed when ``shim``.

    Raises:
        StoreError, ChecksumMismatch: the release is missing, incomplete or damaged in the store.
        GpuUnavailable: ``shim`` and a model the CPU fleet cannot serve (a TensorRT plan).
    """
    from ..triton.shim import prepare_canary_repository

    done = cache_dir / release_id / ("shimmed" if shim else "plain")
    if not (done / _COMPLETE).is_file():
        work = done.with_name(done.name + f".partial-{os.getpid()}")
        manifest = fetch_release(store, release_id, work / "fetched", under="models/")
        served = prepare_canary_repository(work / "fetched" / "models", work / "models") if shim else None
        if not shim:
            shutil.move(str(work / "fetched" / "models"), str(work / "models"))
        (work / "release.json").write_text(json.dumps(manifest))
        (work / _COMPLETE).write_text(json.dumps({"shimmed": served.shimmed if served else []}))
        shutil.rmtree(work / "fetched", ignore_errors=True)
        if done.exists():
            shutil.rmtree(done)
        os.replace(work, done)
    manifest = json.loads((done / "release.json").read_text())
    shimmed = json.loads((done / _COMPLETE).read_text())["shimmed"]
    return ReleaseFiles(release_id, manifest, done / "models", dict(versions), shimmed)


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
