"""A local S3 endpoint whose buckets survive a restart: moto's server, with its state saved to a file.

``model-release up`` runs it as ``python -m model_release.local.moto_persistent --port P --state FILE``.
moto keeps buckets and objects in memory; this process loads them from ``FILE`` at start-up and
writes them back (atomically: a temporary file, then a rename) about a second after every request
that may change them, and once more when it is stopped (SIGTERM, SIGINT, SIGHUP). So stopping the
stack, or even killing this process, loses at most the last second of writes.

What is kept is moto's own S3 model, pickled: every bucket with its settings (versioning, object
lock), every object version with its version id, ETag, checksums and tags. Requests that change
state are run one at a time (:func:`.moto_process.one_write_at_a_time`), so a snapshot never sees
half a request and a conditional write is checked and stored as one step; reads run concurrently.
moto accepts any credentials, so this endpoint is for one machine, bound to 127.0.0.1.

Named for what sets it apart from :mod:`.moto_process` (a throwaway in-memory moto child): its
state persists. It was ``s3_server``; a state file written under that name still loads.
"""

from __future__ import annotations

import argparse
import copyreg
import io
import logging
import os
import pickle
import signal
import sys
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("model_release.local.moto_persistent")


def _versioned_store(items: list[tuple[str, list[Any]]]) -> Any:
    from moto.s3.utils import _VersionedKeyStore

    store = _VersionedKeyStore()
    for key, versions in items:
        store.setlist(key, versions)
    return store


def _reduce_versioned_store(store: Any) -> tuple[Any, tuple[Any, ...]]:
    # moto's key store is a dict of version lists whose items() yields only the newest version:
    # pickle it by its lists, or every older version would be lost on the way through a file
    from model_release.local.moto_persistent import _versioned_store as rebuild  # by module name, also when run as __main__

    return rebuild, ([(key, list(dict.__getitem__(store, key))) for key in dict.keys(store)],)


#: the name this module had when older state files were written (``local/s3_server.py``)
_FORMER_NAME = "model_release.local.s3_server"


class _Unpickler(pickle.Unpickler):
    """Reads a state file, also one written before the module was renamed (it names the old module)."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class("model_release.local.moto_persistent" if module == _FORMER_NAME else module, name)


class Snapshots:
    """Saves and loads moto's S3 state (``moto.backends.get_backend("s3")``) to one file."""

    def __init__(self, path: Path) -> None:
        from moto.s3.utils import _VersionedKeyStore

        copyreg.pickle(_VersionedKeyStore, _reduce_versioned_store)
        self.path = Path(path)
        self.lock = threading.Lock()  # held by requests that change state and by save()
        self.dirty = threading.Event()

    def load(self) -> int:
        """Put the saved state into moto; returns how many buckets it holds (0 without a file)."""
        from moto.backends import get_backend

        if not self.path.is_file():
            return 0
        try:
            state = _Unpickler(io.BytesIO(self.path.read_bytes())).load()  # noqa: S301 - our own file, mode 0600
            state["backends"], state["bucket_accounts"]  # noqa: B018 - the shape save() writes
        except Exception as exc:  # a torn or foreign file: refuse to start rather than start empty
            raise SystemExit(
                f"moto_persistent: cannot read the saved S3 state {str(self.path)!r} ({type(exc).__name__}: {exc}). "
                "Move it aside to start with an empty store, or restore it from a backup."
            ) from None
        backend = get_backend("s3")
        backend.update(state["backends"])
        # which account holds each bucket name: without it a CreateBucket would replace a loaded bucket
        backend.bucket_accounts.update(state["bucket_accounts"])
        return len(state["bucket_accounts"])

    def save(self) -> None:
        """Write the state to ``path`` atomically (a temporary file beside it, then a rename)."""
        from moto.backends import get_backend

        with self.lock:
            self.dirty.clear()
            backend = get_backend("s3")
            state = {"backends": dict(backend), "bucket_accounts": dict(backend.bucket_accounts)}
            data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def autosave(self, stop: threading.Event, *, delay: float = 1.0) -> None:
        """Until ``stop`` is set: save about ``delay`` seconds after the state last changed."""
        while not stop.is_set():
            if self.dirty.wait(0.5) and not stop.wait(delay):
                try:
                    self.save()
                except OSError as exc:
                    log.error("could not save the S3 state to %s: %s", self.path, exc)


def serve(host: str, port: int, state: Path) -> None:
    """Serve S3 on ``host:port`` with its state in ``state`` until a stop signal arrives."""
    from model_release.local.moto_process import make_moto_server  # by module name, also when run as __main__

    snapshots = Snapshots(state)
    buckets = snapshots.load()
    server = make_moto_server(host, port, lock=snapshots.lock, after_write=snapshots.dirty.set)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    saver = threading.Thread(target=snapshots.autosave, args=(stop,), name="s3-autosave", daemon=True)
    saver.start()
    log.info("S3 endpoint on http://%s:%d, %d bucket(s) loaded from %s", host, port, buckets, state)
    try:
        server.serve_forever()
    finally:
        stop.set()
        saver.join(timeout=5)
        snapshots.save()
        log.info("S3 state saved to %s", state)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m model_release.local.moto_persistent", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True, help="the file the S3 state is loaded from and saved to")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    args.state.parent.mkdir(parents=True, exist_ok=True)
    serve(args.host, args.port, args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
