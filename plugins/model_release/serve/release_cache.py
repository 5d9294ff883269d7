"""A serving agent's cache of released models, by content: a model unchanged between releases is fetched once.

Layout under the agent's cache folder::

    content/<model>/<digest>[-shim]/config.pbtxt   one model's files as released (shimmed on a CPU fleet),
    content/<model>/<digest>[-shim]/version/...    its version folder (whatever number the release gave it),
    content/<model>/<digest>[-shim]/warmup/...     and its warm-up data, when it has any
    releases/<release_id>[-shim]/models/<model>/   a release's view: links into content/, laid out as the
                                                   release's own repository (what :class:`ReleaseFiles` reads)

``<digest>`` is the model's content digest (:func:`~.versions.model_digest`: its config and version
folder files' sha256, the version number left out), so the next release that keeps a model finds
it here and fetches nothing for it. Each model is fetched from the store verified against the
release's manifest (:func:`~model_release.store.fetch.fetch_release`, which refuses a release
without its ``_COMPLETE`` record or a file whose sha256 differs), into a folder beside its final
name, renamed into place whole. Several agents may share one cache folder (the scale benchmark's
do): a content folder that appears while this one fetched is kept, and the fetched copy dropped.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from ..repository.config import CONFIG_FILE
from ..repository.warmup_samples import WARMUP_FOLDER
from ..store.fetch import fetch_release
from ..store.model_store import ModelStore
from .server_repo import ReleaseFiles
from .versions import model_digest

_VERSION = "version"
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


class ReleaseCache:
    """Prepares releases for one agent (or several sharing ``root``).

    Args:
        store: the model store the releases are in.
        root: the cache folder.
        shim: serve ONNX leaves through the python-backend onnxruntime shim (the CPU fleet's Triton).
    """

    def __init__(self, store: ModelStore, root: Path, *, shim: bool) -> None:
        self.store, self.root, self.shim = store, Path(root), shim
        self._prepared: dict[str, ReleaseFiles] = {}
        self.fetched: list[str] = []  # content keys fetched by this cache, in order (what a test counts)

    def prepare(self, release_id: str, versions: dict[str, int]) -> ReleaseFiles:
        """``release_id``'s models as a repository view, fetching only the content not cached yet.

        Raises:
            StoreError, ChecksumMismatch: the release is missing, incomplete or damaged in the store.
            GpuUnavailable: ``shim`` and a model the CPU fleet cannot serve (a TensorRT plan).
        """
        key = f"{release_id}{'-shim' if self.shim else ''}"
        if key in self._prepared:
            return self._prepared[key]
        got = self.store.read_manifest(release_id)
        if got is None:
            from ..errors import StoreError

            raise StoreError(f"release {release_id!r} has no release.json in {self.store.uri}; it was never promoted there "
                             "or it is damaged (see `model-release store verify`)")
        manifest = got[0]
        view = self.root / "releases" / key / "models"
        shimmed: list[str] = []
        for model, version in sorted(manifest.get("repository", {}).get("models", {}).items()):
            content, was_shimmed = self._content(release_id, manifest, model)
            shimmed += [model] if was_shimmed else []
            _link_view(view / model, content, str(version))
        release = ReleaseFiles(release_id, manifest, view, dict(versions), shimmed)
        self._prepared[key] = release
        return release

    def _content(self, release_id: str, manifest: dict, model: str) -> tuple[Path, bool]:
        """The content folder of one model (fetched now when absent) and whether it was shimmed."""
        digest = model_digest(manifest, model)
        final = self.root / "content" / model / f"{digest}{'-shim' if self.shim else ''}"
        with _lock(str(final)):
            if not (final / CONFIG_FILE).is_file():
                self._fetch(release_id, manifest, model, final)
        return final, (final / ".shimmed").is_file()

    def _fetch(self, release_id: str, manifest: dict, model: str, final: Path) -> None:
        work = final.with_name(f".{final.name}.partial-{os.getpid()}-{threading.get_ident()}")
        shutil.rmtree(work, ignore_errors=True)
        try:
            fetch_release(self.store, release_id, work / "fetched", under=f"models/{model}/")
            source = work / "fetched" / "models"
            if self.shim:
                from ..triton.shim import prepare_canary_repository

                served = prepare_canary_repository(source, work / "served")
                source = served.path
                if served.shimmed:
                    (source / model / ".shimmed").touch()
            version = str(manifest["repository"]["models"][model])
            os.replace(source / model / version, source / model / _VERSION)
            final.parent.mkdir(parents=True, exist_ok=True)
            if not final.exists():
                os.replace(source / model, final)
                self.fetched.append(f"{model}@{final.name}")
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _link_view(folder: Path, content: Path, version: str) -> None:
    """``folder`` as a model folder of the release: links to the content's config, version folder and warm-up."""
    folder.mkdir(parents=True, exist_ok=True)
    links = {CONFIG_FILE: content / CONFIG_FILE, version: content / _VERSION}
    if (content / WARMUP_FOLDER).is_dir():
        links[WARMUP_FOLDER] = content / WARMUP_FOLDER
    for name, target in links.items():
        link = folder / name
        if link.is_symlink() and os.readlink(link) == str(target):
            continue
        tmp = folder / f".{name}.link-{os.getpid()}-{threading.get_ident()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, link)
