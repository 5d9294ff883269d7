"""The local-folder backend, :class:`FolderBackend`: the same store layout and guarantees on one machine's disk.

Named for what it stores into (a folder, ``file:///PATH``), beside :mod:`.s3` (a bucket); the
module was ``localfs`` and the class ``FileBackend``, which read as one file's backend.

Objects are files under the root. Every write goes to a temporary file in the same folder and
is renamed into place (``os.replace``), so a reader sees a whole file or none. Conditional writes
take an exclusive ``flock`` on a per-key lock file under ``<root>/.locks/``, compare the current
content's SHA-256 (the local etag) and replace; ``flock`` locks belong to an open file, so they
exclude other threads as well as other processes. The stored checksum of an object is its
SHA-256, computed when asked (so checks read the bytes: local reads are cheap).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ..errors import SpecError, StoreError
from ..workspace import atomic_write, sha256_file
from .backend import ObjectInfo, PendingUpload, PreconditionFailed
from .keys import LOCKS


_LOCKS = LOCKS.rstrip("/")  # the lock files' folder, at the store root only
_TMP_SUFFIX = ".model-release-tmp"  # a write in progress: ".<name>.<random><suffix>"


def _is_temporary(name: str) -> bool:
    """Only this backend's own partial writes are hidden: a key may be a dotfile (``.keep``)."""
    return name.startswith(".") and name.endswith(_TMP_SUFFIX)


class FolderBackend:
    """Objects under a local folder ``root``, created by the first write (never by a read)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.uri = self.root.resolve().as_uri()

    @contextmanager
    def _writing(self, key: str) -> Iterator[None]:
        """The boundary for writes: an OSError becomes a StoreError naming the path."""
        try:
            yield
        except OSError as exc:
            raise StoreError(
                f"cannot write {key!r} in the local store folder {self.root}: {exc.strerror or type(exc).__name__}; "
                "check the folder exists or can be created, and is writable"
            ) from None

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise StoreError(f"store key {key!r} escapes the store root; keys are relative POSIX paths")
        return self.root / key

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        locks = self.root / _LOCKS
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / (key.replace("/", "__") + ".lock"), "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def _write_atomic(self, path: Path, writer) -> None:  # type: ignore[no-untyped-def]
        atomic_write(path, writer, suffix=_TMP_SUFFIX)

    # -- StoreBackend --------------------------------------------------------------------------
    def head(self, key: str) -> ObjectInfo | None:
        p = self._path(key)
        try:
            st = p.stat()
            digest = sha256_file(p)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return ObjectInfo(
            key=key,
            size=st.st_size,
            etag=digest,
            checksum_sha256=base64.b64encode(bytes.fromhex(digest)).decode(),
            last_modified=datetime.fromtimestamp(st.st_mtime, timezone.utc),
        )

    def get_bytes(self, key: str) -> tuple[bytes, str] | None:
        try:
            data = self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return data, hashlib.sha256(data).hexdigest()

    def put_bytes(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> str:
        p = self._path(key)
        with self._writing(key):
            if not if_none_match and if_match is None:
                self._write_atomic(p, lambda f: f.write(data))
                return hashlib.sha256(data).hexdigest()
            with self._locked(key):
                current = self.get_bytes(key)
                if if_none_match and current is not None:
                    raise PreconditionFailed(f"{key} exists")
                if if_match is not None and (current is None or current[1] != if_match):
                    raise PreconditionFailed(f"{key} changed")
                self._write_atomic(p, lambda f: f.write(data))
        return hashlib.sha256(data).hexdigest()

    def part_size(self, size: int) -> int | None:
        return None

    def put_file(self, key: str, path: Path, *, sha256: str, size: int, part_digests: list[bytes] | None) -> ObjectInfo | None:
        def copy(f) -> None:  # type: ignore[no-untyped-def]
            with open(path, "rb") as src:
                shutil.copyfileobj(src, f, 1 << 20)

        with self._writing(key):
            self._write_atomic(self._path(key), copy)
        return None  # no receipt: the caller reads the file back (hashing it)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        if not self.root.is_dir():
            return  # a store never written to
        base = self._path(prefix.rstrip("/")) if prefix.strip("/") else self.root
        start = base if base.is_dir() else base.parent
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(d for d in dirnames if not (dirpath == str(self.root) and d == _LOCKS))
            for name in sorted(filenames):
                if _is_temporary(name):
                    continue
                p = Path(dirpath) / name
                rel = p.relative_to(self.root).as_posix()
                if not rel.startswith(prefix):
                    continue
                try:
                    st = p.stat()
                except FileNotFoundError:
                    continue
                yield ObjectInfo(key=rel, size=st.st_size, last_modified=datetime.fromtimestamp(st.st_mtime, timezone.utc))

    def list_dirs(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/"))
        if not base.is_dir():
            return []
        return sorted(d.name for d in base.iterdir() if d.is_dir() and not (base == self.root and d.name == _LOCKS))

    def delete(self, keys: list[str]) -> None:
        parents: set[Path] = set()
        for key in keys:
            p = self._path(key)
            with self._writing(key):
                p.unlink(missing_ok=True)
            parents.add(p.parent)
        for parent in sorted(parents, key=lambda q: len(q.parts), reverse=True):
            while parent != self.root and parent.is_relative_to(self.root):
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent

    def sha256_of(self, key: str) -> str | None:
        try:
            return sha256_file(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def pending_uploads(self, prefix: str) -> list[PendingUpload]:
        """The temporary files of writes that never finished (a killed promotion leaves them)."""
        base = self._path(prefix.rstrip("/")) if prefix.strip("/") else self.root
        found: list[PendingUpload] = []
        for dirpath, _, filenames in os.walk(base):
            for name in filenames:
                if not _is_temporary(name):
                    continue
                p = Path(dirpath) / name
                try:
                    started = datetime.fromtimestamp(p.stat().st_mtime, timezone.utc)
                except FileNotFoundError:
                    continue  # finished meanwhile
                target = name[1 : -len(_TMP_SUFFIX)].rsplit(".", 1)[0]  # ".<name>.<random><suffix>"
                rel = p.relative_to(self.root).as_posix()
                found.append(PendingUpload(key=rel.rsplit("/", 1)[0] + "/" + target if "/" in rel else target,
                                           upload_id=rel, started=started))
        return sorted(found, key=lambda u: (u.started or datetime.min.replace(tzinfo=timezone.utc), u.upload_id))

    def abort_upload(self, upload: PendingUpload) -> None:
        self.delete([upload.upload_id])  # and the folders it leaves empty

    def check(self, *, write: bool) -> None:
        if not write:
            if not self.root.is_dir():
                why = "is not a folder" if self.root.exists() else "does not exist"
                raise SpecError(
                    f"local store folder {self.root} {why}; check the store URI (--store or the spec's promote.store): "
                    "read-only commands create nothing, a promotion creates the folder"
                )
            return
        # the folder, or the nearest existing parent a promotion would create it in
        existing = next((p for p in (self.root, *self.root.parents) if p.exists()), Path("/"))
        if existing == self.root:
            what = f"local store folder {self.root}"
        else:
            what = f"local store folder {self.root} cannot be created: its parent {existing}"
        if not existing.is_dir():
            raise StoreError(f"{what} is a file, not a folder; pick another store path")
        try:  # the probe: a temporary file created and removed at once
            fd, tmp = tempfile.mkstemp(dir=existing, prefix=".check-writable.", suffix=_TMP_SUFFIX)
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise StoreError(
                f"{what} is not writable ({exc.strerror or type(exc).__name__}); fix its permissions or pick another store path"
            ) from None
