"""The release workspace: where one release's stages leave their artifacts for the next.

Each worker has its own workspace root (``$MODEL_RELEASE_WORKSPACE`` or ``./.work/workspace``): a
local folder. Alone, that is the embedded setup (every stage in one place). With a *mirror*
(:class:`~model_release.workspace_mirror.StoreMirror`, an object-store prefix such as
``s3://BUCKET/workspaces``) the workers share no disk: saving a stage's result publishes the stage's
folder to ``<mirror>/<release_id>/<stage>/``, and loading an earlier stage's result first fetches its
folder, so any worker can run any task and a retried task finds what it needs. Both go through the
same two calls, :meth:`Workspace.save_result` and :meth:`Workspace.load_result`, which the pipeline's
stage runner and the Airflow tasks use. Layout::

    <root>/<release_id>/
        intake/      the downloaded MLflow model, intake.json
        export/      model.onnx, golden.npz, parity.json, failing rows, reproduce.sh, export.json
        tensorrt/    model.plan, tensorrt.json
        repository/  the Triton model repository (+ manifest release.json)
        canary/      report.json, report.html, canary.json
        promote/     promote.json

A stage writes its files first and its ``<stage>.json`` result last, atomically, so a retried task
either finds a whole earlier result (and may reuse it) or none at all.

Results name files by absolute path while a stage runs, but are saved with the paths under the
release folder written ``@workspace/<stage>/...`` and resolved against the loading worker's own
folder, so a result saved on one machine points at the right files on another.

A release id names one release: :meth:`Workspace.check_unused` refuses an id whose folder
already holds another release (before anything is written), and :meth:`Workspace.claim` takes the
folder, recording its owner in ``<release_id>/.owner`` (an Airflow run, so that its own retries
find it theirs). The owner file is local to a worker's folder, never published to the mirror:
another worker running a later task of the same run does not claim, it fetches the stages it needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol, TypeVar

from .errors import UserError
from .names import check_release_id
from .safe_text import echo, redact_tree
from .stages import STAGE_FOLDERS

T = TypeVar("T")

#: how a saved result writes a path inside the release folder (resolved again on load)
WORKSPACE_MARK = "@workspace/"
#: the failure a stage left (its error's kind and message), beside where its result would be
ERROR_FILE = "error.json"


class WorkspaceMirror(Protocol):
    """Where stage folders are published for other workers (see :mod:`model_release.workspace_mirror`)."""

    uri: str

    def publish(self, release_id: str, stage: str, folder: Path) -> None:
        """Make ``folder`` the published content of ``stage``, whole (readers never see half of it)."""
        ...

    def fetch(self, release_id: str, stage: str, folder: Path) -> bool:
        """Make ``folder`` the published content of ``stage``; False when nothing is published."""
        ...

    def stages(self, release_id: str) -> list[str]:
        """The stage folders published for a release (whole or not)."""
        ...

    def owner(self, release_id: str) -> str | None:
        """Who claimed the release's workspace in the mirror, None when nobody did."""
        ...

    def claim(self, release_id: str, owner: str) -> str:
        """Record ``owner`` as the release's claimant unless someone is already; returns who holds it."""
        ...


def relative_paths(value: Any, base: str) -> Any:
    """``value`` with every string under ``base`` (a folder) written ``@workspace/<rest>``."""
    if isinstance(value, str):
        return WORKSPACE_MARK + value[len(base) + 1 :] if value.startswith(base + os.sep) else value
    if isinstance(value, dict):
        return {k: relative_paths(v, base) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [relative_paths(v, base) for v in value]
    return value


def absolute_paths(value: Any, base: str) -> Any:
    """The inverse of :func:`relative_paths`, against this worker's release folder ``base``."""
    if isinstance(value, str):
        return os.path.join(base, value[len(WORKSPACE_MARK) :]) if value.startswith(WORKSPACE_MARK) else value
    if isinstance(value, dict):
        return {k: absolute_paths(v, base) for k, v in value.items()}
    if isinstance(value, list):
        return [absolute_paths(v, base) for v in value]
    return value


def default_root() -> Path:
    return Path(os.environ.get("MODEL_RELEASE_WORKSPACE", Path.cwd() / ".work" / "workspace"))


def new_release_id(name: str, *, now: datetime | None = None) -> str:
    """``<name>-<UTC timestamp>-<4 hex>``: sortable by time, unique without coordination."""
    now = now or datetime.now(timezone.utc)
    return f"{name}-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"


def sha256_file(path: str | Path, *, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """Hard-link ``src`` to ``dst`` (same bytes, no copy), copying where links are not possible.

    Usable as ``shutil.copytree(..., copy_function=link_or_copy)``.
    """
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def atomic_write(path: str | Path, writer: Callable[[BinaryIO], Any], *, suffix: str = ".tmp") -> None:
    """Write a file so readers see the old content or the new, never half of it.

    ``writer`` fills a temporary file beside ``path`` (named ``.<name>.<random><suffix>``), which
    is synced and renamed over ``path``; on any error the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """:func:`atomic_write` of ``data``."""
    atomic_write(path, lambda f: f.write(data))


def atomic_write_json(path: str | Path, data: Any) -> None:
    """:func:`atomic_write` of ``data`` as JSON, with any credential in its strings redacted."""
    atomic_write_bytes(path, (json.dumps(redact_tree(data), indent=2, sort_keys=True, default=str) + "\n").encode())


#: the file in a release's folder naming who claimed it
OWNER_FILE = ".owner"


class Workspace:
    """One release's folder in this worker's workspace root, published through ``mirror`` when given.

    Args:
        release_id: the release.
        root: this worker's workspace root (default :func:`default_root`).
        mirror: where stage folders are published and fetched; None keeps everything in ``root``
            (one machine, or a folder every worker mounts).
    """

    def __init__(self, release_id: str, root: str | Path | None = None, *, mirror: WorkspaceMirror | None = None) -> None:
        self.release_id = check_release_id(release_id)
        if root is not None and (not str(root).strip() or "\x00" in str(root)):
            raise UserError(f"workspace root {echo(str(root))} is not a folder name; pass --workspace a folder "
                            "(or leave it out for $MODEL_RELEASE_WORKSPACE or ./.work/workspace)")
        self.root = Path(root) if root is not None else default_root()
        self.path = self.root / release_id
        self.mirror = mirror

    def check_unused(self, owner: str | None = None) -> None:
        """Refuse, before anything is written, a workspace that cannot be made or holds another release.

        Args:
            owner: who is about to claim it (an Airflow run); a folder that ``owner`` claimed
                earlier is its own (a retry), not another release. With a mirror, the mirror's
                claim and published stages count, whichever worker made them.

        Raises:
            UserError: the root is not a folder or cannot be created or written, or the release id
                already has a workspace (another release's results would be overwritten).
        """
        _check_creatable(self.root, "workspace root", "pass --workspace a writable folder")
        self._check_mirror(owner)
        if not self.path.exists() and not self.path.is_symlink():
            return
        if not self.path.is_dir() or self.path.is_symlink():
            raise UserError(f"release id {self.release_id!r}: {self.path} exists and is not a folder; "
                            "choose another release id or remove it")
        held = sorted(p.name for p in self.path.iterdir())
        if not held or (owner is not None and self.owner() == owner):
            return
        stages = [s for s in STAGE_FOLDERS if (self.path / s).is_dir()] or held[:8]
        raise UserError(
            f"release id {self.release_id!r} is taken: its workspace {self.path} already holds a release "
            f"({', '.join(stages)}); nothing was written. Choose another --release (or leave it out for a new one); "
            "to release this id again from scratch, remove that folder first"
        )

    def _check_mirror(self, owner: str | None) -> None:
        """With a mirror, the release's published stages and its claim there are the workspace too."""
        if self.mirror is None:
            return
        held_by = self.mirror.owner(self.release_id)
        stages = self.mirror.stages(self.release_id)
        if (held_by is None and not stages) or (owner is not None and held_by == owner):
            return
        raise UserError(
            f"release id {self.release_id!r} is taken: the workspace store {self.mirror.uri} already holds a release "
            f"({', '.join(stages) or 'claimed by ' + echo(held_by or '?')}); nothing was written. Choose another "
            "--release (or leave it out for a new one); to release this id again from scratch, remove its prefix "
            "from the workspace store first"
        )

    def claim(self, owner: str | None = None) -> None:
        """Take the release's folder (after :meth:`check_unused`): create it, record ``owner`` in it
        and, with a mirror, in the mirror (so the owner's retries on any worker find it theirs).

        Raises:
            UserError: another process claimed it meanwhile.
        """
        owner = owner or f"pid {os.getpid()}"
        if self.mirror is not None:
            held_by = self.mirror.claim(self.release_id, owner)
            if held_by != owner:
                raise UserError(f"release id {self.release_id!r} is taken: {echo(held_by)} claimed it in the "
                                f"workspace store {self.mirror.uri} meanwhile; nothing was written. Choose another --release")
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self.path.mkdir()
        except FileExistsError:
            self.check_unused(owner)  # empty, or this owner's own: take it
        if self._local_owner() is None:
            atomic_write_bytes(self.path / OWNER_FILE, owner.encode())

    def owner(self) -> str | None:
        """Who claimed this workspace (the mirror's claim when there is a mirror, else the folder's
        ``.owner`` file), None when nobody did."""
        if self.mirror is not None:
            return self.mirror.owner(self.release_id)
        return self._local_owner()

    def _local_owner(self) -> str | None:
        try:
            return (self.path / OWNER_FILE).read_text(errors="replace")
        except OSError:
            return None

    def stage_dir(self, stage: str, *, fresh: bool = False) -> Path:
        """The stage's folder, created; ``fresh`` empties it first (a retried stage replaces its output whole)."""
        if stage not in STAGE_FOLDERS:
            raise ValueError(f"unknown stage {stage!r}; valid: {STAGE_FOLDERS}")
        d = self.path / stage
        if fresh and d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def result_path(self, stage: str) -> Path:
        return self.path / stage / f"{stage}.json"

    def save_result(self, stage: str, result: Any) -> Path:
        """Write the stage's result (paths in the release folder made relative), then publish the stage's folder."""
        p = self.result_path(stage)
        data = result.to_dict() if hasattr(result, "to_dict") else result
        (p.parent / ERROR_FILE).unlink(missing_ok=True)
        atomic_write_json(p, relative_paths(data, str(self.path)))
        self.publish(stage)
        return p

    def save_error(self, stage: str, error: dict[str, Any]) -> None:
        """Record why ``stage`` failed (kind, message) beside its result, and publish the folder."""
        self.stage_dir(stage)
        atomic_write_json(self.path / stage / ERROR_FILE, relative_paths(error, str(self.path)))
        self.publish(stage)

    def load_error(self, stage: str) -> dict[str, Any] | None:
        """What :meth:`save_error` recorded for ``stage`` (fetched from the mirror first), or None."""
        self.fetch(stage)
        p = self.path / stage / ERROR_FILE
        return absolute_paths(json.loads(p.read_text()), str(self.path)) if p.is_file() else None

    def load_result(self, stage: str, cls: type[T]) -> T | None:
        """The stage's result, its paths resolved in this worker's release folder; None when there is none.

        With a mirror, the stage's published folder is fetched first (files already here with the
        published digest are kept), so the result and the files it names are the ones published.
        """
        if not self.fetch(stage):
            return None
        p = self.result_path(stage)
        if not p.is_file():
            return None
        data = absolute_paths(json.loads(p.read_text()), str(self.path))
        return cls.from_dict(data)  # type: ignore[attr-defined]

    def publish(self, stage: str) -> None:
        if self.mirror is not None:
            self.mirror.publish(self.release_id, stage, self.path / stage)

    def fetch(self, stage: str) -> bool:
        """Bring the stage's published folder here (a no-op without a mirror); False when none is published."""
        if self.mirror is None:
            return True
        return self.mirror.fetch(self.release_id, stage, self.path / stage)

    def __repr__(self) -> str:
        via = f", mirror={self.mirror.uri!r}" if self.mirror is not None else ""
        return f"Workspace({str(self.path)!r}{via})"


def _check_creatable(folder: Path, what: str, fix: str) -> None:
    """Refuse ``folder`` unless it is a writable folder, or could be created as one (nothing is created).

    Raises:
        UserError: it, or the nearest existing folder above it, is not a folder or not writable.
    """
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        at = "it exists and is not a folder" if probe == folder else f"{probe} exists and is not a folder"
        raise UserError(f"{what} {echo(str(folder))} cannot be a folder: {at}; {fix}")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{what} {echo(str(folder))} cannot be written ({probe} is not writable for this user); {fix}")
