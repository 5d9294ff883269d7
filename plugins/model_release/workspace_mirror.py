"""A release workspace published in an object store, so the workers of a release share no disk.

Layout under the mirror's URI (``s3://BUCKET/workspaces`` or ``file:///PATH``; keys from
:mod:`model_release.store.keys`)::

    <release_id>/<stage>/...                 the stage folder's files, as the worker left them
    <release_id>/<stage>/.published.json     written last: {"files": {relative path: {sha256, size}}, ...}
    <release_id>/.owner                      who claimed the release (an Airflow run; see Workspace.claim)

Protocol (one writer per stage at a time: Airflow runs one try of a task at a time):

* **publish**: read the previous index, delete it (from here on readers see the stage as not
  published), upload every file whose SHA-256 differs from the previous index's, delete the
  objects the folder no longer has, then write the new index. A worker killed half way leaves no
  index, so no reader takes half a stage for a whole one; the retry publishes again.
* **fetch**: read the index; absent means "not published" (the caller treats the stage's result
  as missing). Files already here with the index's digest are kept, the others downloaded and
  checked against it, files the index does not list removed, and the index copied last, so a
  second fetch of an unchanged stage costs one GET.

Objects go through the model store's own backends (:mod:`model_release.store`), so the S3 and
the local-folder mirror behave alike, errors are converted the same way (``ServiceUnavailable``
when the endpoint is down, ``StoreError`` when it refuses) and no credential reaches a message.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import StoreError
from .store.keys import WORKSPACE_INDEX as INDEX
from .store.keys import workspace_owner_key, workspace_stage_prefix
from .workspace import atomic_write, atomic_write_bytes, sha256_file


def _is_temporary(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name == INDEX or (name.startswith(".") and name.endswith(".tmp"))


def local_files(folder: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every file under ``folder`` (temporary files and the index left out)."""
    files: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return files
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if not _is_temporary(rel):
            files[rel] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return files


class StoreMirror:
    """Stage folders of release workspaces under one object-store prefix.

    Args:
        uri: the mirror's root, ``s3://BUCKET[/PREFIX]`` or ``file:///ABSOLUTE/PATH``.
        backend: the store backend over that root (see :meth:`open`).
    """

    def __init__(self, uri: str, backend: Any) -> None:
        self.uri = uri
        self.backend = backend

    @classmethod
    def open(cls, uri: str, *, s3_client: Any | None = None) -> "StoreMirror":
        """The mirror at ``uri``; ``s3_client`` as for :func:`model_release.store.open_store`.

        Raises:
            SpecError: ``uri`` is not a store URI.
        """
        from .store.model_store import open_store

        return cls(uri, open_store(uri, s3_client=s3_client).backend)

    def _prefix(self, release_id: str, stage: str) -> str:
        return workspace_stage_prefix(release_id, stage)

    def _index(self, release_id: str, stage: str) -> dict[str, Any] | None:
        got = self.backend.get_bytes(self._prefix(release_id, stage) + INDEX)
        if got is None:
            return None
        try:
            index = json.loads(got[0])
        except ValueError:
            index = None
        if not isinstance(index, dict) or not isinstance(index.get("files"), dict):
            raise StoreError(
                f"{self.uri}/{self._prefix(release_id, stage)}{INDEX} is not a workspace index (not JSON with a "
                f"'files' object); delete that prefix and rerun the {stage} task"
            )
        return index

    def publish(self, release_id: str, stage: str, folder: Path) -> None:
        """Publish ``folder`` as the stage's content, replacing what was published before, whole."""
        from .store.backend import hash_file

        prefix = self._prefix(release_id, stage)
        previous = (self._index(release_id, stage) or {}).get("files", {})
        self.backend.delete([prefix + INDEX])
        files = local_files(folder)
        for rel, meta in files.items():
            if previous.get(rel) == meta:
                continue
            path = folder / rel
            _, parts = hash_file(path, self.backend.part_size(meta["size"]))
            self.backend.put_file(prefix + rel, path, sha256=meta["sha256"], size=meta["size"], part_digests=parts)
        stale = [o.key for o in self.backend.list(prefix) if o.key[len(prefix):] not in files and o.key != prefix + INDEX]
        if stale:
            self.backend.delete(stale)
        index = {"files": files, "published_at": datetime.now(timezone.utc).isoformat(), "by": socket.gethostname(),
                 "pid": os.getpid()}
        self.backend.put_bytes(prefix + INDEX, json.dumps(index, indent=1, sort_keys=True).encode())

    def fetch(self, release_id: str, stage: str, folder: Path) -> bool:
        """Make ``folder`` what is published for the stage; False (and nothing changed) when nothing is.

        Raises:
            StoreError: a downloaded file does not match the published digest (the message names it).
        """
        index = self._index(release_id, stage)
        if index is None:
            return False
        mine = folder / INDEX
        if mine.is_file():
            try:
                if json.loads(mine.read_text()) == index:
                    return True
            except ValueError:
                pass
        prefix = self._prefix(release_id, stage)
        have = local_files(folder)
        for rel, meta in index["files"].items():
            if have.get(rel) == meta:
                continue
            got = self.backend.get_bytes(prefix + rel)
            data = got[0] if got is not None else None
            import hashlib

            if data is None or hashlib.sha256(data).hexdigest() != meta["sha256"]:
                raise StoreError(
                    f"workspace file {self.uri}/{prefix}{rel} is {'missing' if data is None else 'not the one published'} "
                    f"(index sha256 {meta['sha256'][:12]}...); the {stage} stage of {release_id} must be run again: "
                    f"clear its task"
                )
            atomic_write_bytes(folder / rel, data)
        for rel in set(have) - set(index["files"]):
            (folder / rel).unlink(missing_ok=True)
        for d in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
            if not any(d.iterdir()):
                shutil.rmtree(d, ignore_errors=True)
        atomic_write(mine, lambda f: f.write(json.dumps(index).encode()))
        return True

    def owner(self, release_id: str) -> str | None:
        """Who claimed the release's workspace (``<release_id>/.owner``), None when nobody did."""
        got = self.backend.get_bytes(workspace_owner_key(release_id))
        return got[0].decode(errors="replace") if got is not None else None

    def claim(self, release_id: str, owner: str) -> str:
        """Write ``owner`` as the claimant unless one is there already (a conditional write, so two
        claimants cannot both win); returns who holds the claim now."""
        from .store.backend import PreconditionFailed

        try:
            self.backend.put_bytes(workspace_owner_key(release_id), owner.encode(), if_none_match=True)
        except PreconditionFailed:
            return self.owner(release_id) or "another claimant"
        return owner

    def stages(self, release_id: str) -> list[str]:
        """The stage folders published for a release (whole or not)."""
        return self.backend.list_dirs(f"{release_id}/")

    def remove(self, release_id: str) -> int:
        """Delete everything published for a release; returns how many objects were deleted."""
        keys = [o.key for o in self.backend.list(f"{release_id}/")]
        if keys:
            self.backend.delete(keys)
        return len(keys)
