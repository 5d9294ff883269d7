"""The release workspace: where one release's stages leave their artifacts for the next.

Every worker of a release reaches the same workspace: a local folder in the embedded setup (the
default, ``$MODEL_RELEASE_WORKSPACE`` or ``./.work/workspace``), a shared mount or synced prefix in a
distributed one. Layout::

    <root>/<release_id>/
        intake/      the downloaded MLflow model, intake.json
        export/      model.onnx, golden.npz, parity.json, failing rows, reproduce.sh, export.json
        tensorrt/    model.plan, tensorrt.json
        repository/  the Triton model repository (+ manifest release.json)
        canary/      report.json, report.html, canary.json
        promote/     promote.json

A stage writes its files first and its ``<stage>.json`` result last, atomically, so a retried task
either finds a whole earlier result (and may reuse it) or none at all.

A release id names one release: :meth:`Workspace.check_unused` refuses an id whose folder
already holds another release (before anything is written), and :meth:`Workspace.claim` takes the
folder, recording its owner in ``<release_id>/.owner`` (an Airflow run, so that its own retries
find it theirs).
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
from typing import Any, BinaryIO, TypeVar

from .errors import UserError
from .names import check_release_id
from .safe_text import echo, redact_tree

T = TypeVar("T")

STAGES = ("intake", "export", "tensorrt", "repository", "canary", "promote")


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
    """One release's folder in the workspace root."""

    def __init__(self, release_id: str, root: str | Path | None = None) -> None:
        self.release_id = check_release_id(release_id)
        if root is not None and (not str(root).strip() or "\x00" in str(root)):
            raise UserError(f"workspace root {echo(str(root))} is not a folder name; pass --workspace a folder "
                            "(or leave it out for $MODEL_RELEASE_WORKSPACE or ./.work/workspace)")
        self.root = Path(root) if root is not None else default_root()
        self.path = self.root / release_id

    def check_unused(self, owner: str | None = None) -> None:
        """Refuse, before anything is written, a workspace that cannot be made or holds another release.

        Args:
            owner: who is about to claim it (an Airflow run); a folder that ``owner`` claimed
                earlier is its own (a retry), not another release.

        Raises:
            UserError: the root is not a folder or cannot be created or written, or the release id
                already has a workspace (another release's results would be overwritten).
        """
        _check_creatable(self.root, "workspace root", "pass --workspace a writable folder")
        if not self.path.exists() and not self.path.is_symlink():
            return
        if not self.path.is_dir() or self.path.is_symlink():
            raise UserError(f"release id {self.release_id!r}: {self.path} exists and is not a folder; "
                            "choose another release id or remove it")
        held = sorted(p.name for p in self.path.iterdir())
        if not held or (owner is not None and self.owner() == owner):
            return
        stages = [s for s in STAGES if (self.path / s).is_dir()] or held[:8]
        raise UserError(
            f"release id {self.release_id!r} is taken: its workspace {self.path} already holds a release "
            f"({', '.join(stages)}); nothing was written. Choose another --release-id (or leave it out for a new one); "
            "to release this id again from scratch, remove that folder first"
        )

    def claim(self, owner: str | None = None) -> None:
        """Take the release's folder (after :meth:`check_unused`): create it, record ``owner``.

        Raises:
            UserError: another process claimed it meanwhile.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self.path.mkdir()
        except FileExistsError:
            self.check_unused(owner)  # empty, or this owner's own: take it
        if self.owner() is None:
            atomic_write_bytes(self.path / OWNER_FILE, (owner or f"pid {os.getpid()}").encode())

    def owner(self) -> str | None:
        """Who claimed this workspace (its `.owner` file), None when nobody did."""
        try:
            return (self.path / OWNER_FILE).read_text(errors="replace")
        except OSError:
            return None

    def stage_dir(self, stage: str, *, fresh: bool = False) -> Path:
        """The stage's folder, created; ``fresh`` empties it first (a retried stage replaces its output whole)."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; valid: {STAGES}")
        d = self.path / stage
        if fresh and d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def result_path(self, stage: str) -> Path:
        return self.path / stage / f"{stage}.json"

    def save_result(self, stage: str, result: Any) -> Path:
        p = self.result_path(stage)
        atomic_write_json(p, result.to_dict() if hasattr(result, "to_dict") else result)
        return p

    def load_result(self, stage: str, cls: type[T]) -> T | None:
        p = self.result_path(stage)
        if not p.is_file():
            return None
        return cls.from_dict(json.loads(p.read_text()))  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r})"


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
