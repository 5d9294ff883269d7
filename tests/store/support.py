"""Test support for the model store: release folders, a cuttable TCP proxy, a fault trigger."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from model_release.errors import ServiceUnavailable
from model_release.store.backend import ObjectInfo


def make_release(root: Path, *, name: str = "iris", version: str = "1", small: int = 6, small_size: int = 512,
                 big: int = 0, seed: str = "a") -> Path:
    """A release folder: release.json + models/ (a tiny Triton repository) + reports/, random content."""
    rng = hashlib.sha256(seed.encode()).digest()
    files: dict[str, bytes] = {
        f"models/{name}/config.pbtxt": f'name: "{name}"\nbackend: "python"\n# {seed}\n'.encode(),
        f"models/{name}/1/model.py": f"# model {seed}\n".encode(),
        "reports/report.json": json.dumps({"passed": True, "seed": seed}).encode(),
        "reports/report.html": f"<html>{seed}</html>".encode(),
        # what the assembler writes into an ensemble's version folder: empty, and a dotfile
        f"models/{name}_ensemble/1/.keep": b"",
    }
    for i in range(small):
        files[f"models/{name}/1/data/part-{i:04d}.bin"] = (rng + os.urandom(small_size))[:small_size]
    if big:
        files[f"models/{name}/1/model.onnx"] = os.urandom(big)
    manifest: dict[str, Any] = {"format": 1, "model": {"name": name, "version": version}, "files": {}}
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (root / "release.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return root


class CuttableProxy:
    """A TCP proxy between boto3 and moto that can be cut (the endpoint goes away, moto keeps its
    state) and restored. ``cut_after_bytes`` cuts once that many request bytes were forwarded."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.cut = threading.Event()
        self.bytes_up = 0
        self.cut_at: int | None = None
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns |= {client, upstream}
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upward: bool) -> None:
        try:
            while not self.cut.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if upward:
                    with self._lock:
                        if self.cut_at is not None and self.bytes_up + len(data) > self.cut_at:
                            self.cut.set()
                            break
                        self.bytes_up += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(src, dst)
            if self.cut.is_set():
                self._close_all()

    def _close(self, *socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
            with self._lock:
                self._conns.discard(s)

    def _close_all(self) -> None:
        with self._lock:
            conns = list(self._conns)
        self._close(*conns)

    def go_away(self) -> None:
        """Cut now: every open connection is dropped and new ones are closed on arrival."""
        self.cut.set()
        self._close_all()

    def cut_after_bytes(self, n: int) -> None:
        with self._lock:
            self.cut_at = self.bytes_up + n

    def restore(self) -> None:
        with self._lock:
            self.cut_at = None
        self.cut.clear()

    def close(self) -> None:
        self._stop.set()
        self.go_away()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self.sock.close()
        self._thread.join(5)


class TriggerBackend:
    """A StoreBackend wrapper that calls ``on_trigger`` before the first operation ``trigger``
    accepts, then delegates. With ``fail_after_trigger`` every later call raises
    ServiceUnavailable (the local-folder store's stand-in for an endpoint going away)."""

    def __init__(self, inner: Any, trigger: Callable[[str, str], bool], on_trigger: Callable[[], None] | None = None,
                 *, fail_after_trigger: bool = False) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.trigger = trigger
        self.on_trigger = on_trigger
        self.fail_after_trigger = fail_after_trigger
        self.fired = threading.Event()
        self._lock = threading.Lock()

    def fire(self) -> None:
        with self._lock:
            if self.fired.is_set():
                return
            self.fired.set()
        if self.on_trigger:
            self.on_trigger()

    def _gate(self, op: str, key: str) -> None:
        if not self.fired.is_set() and self.trigger(op, key):
            self.fire()
        if self.fired.is_set() and self.fail_after_trigger:
            raise ServiceUnavailable(f"test outage: {op} {key}")

    def head(self, key: str) -> ObjectInfo | None:
        self._gate("head", key)
        return self.inner.head(key)

    def get_bytes(self, key: str) -> tuple[bytes, str] | None:
        self._gate("get", key)
        return self.inner.get_bytes(key)

    def put_bytes(self, key: str, data: bytes, **kw: Any) -> str:
        self._gate("put_bytes", key)
        return self.inner.put_bytes(key, data, **kw)

    def put_file(self, key: str, path: Path, **kw: Any) -> None:
        self._gate("put_file", key)
        return self.inner.put_file(key, path, **kw)

    def part_size(self, size: int) -> int | None:
        return self.inner.part_size(size)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        self._gate("list", prefix)
        return self.inner.list(prefix)

    def list_dirs(self, prefix: str) -> list[str]:
        self._gate("list", prefix)
        return self.inner.list_dirs(prefix)

    def delete(self, keys: list[str]) -> None:
        self._gate("delete", keys[0] if keys else "")
        return self.inner.delete(keys)

    def sha256_of(self, key: str) -> str | None:
        self._gate("get", key)
        return self.inner.sha256_of(key)

    def pending_uploads(self, prefix: str) -> list[Any]:
        self._gate("list", prefix)
        return self.inner.pending_uploads(prefix)

    def abort_upload(self, upload: Any) -> None:
        self._gate("delete", upload.key)
        return self.inner.abort_upload(upload)

    def check(self, *, write: bool) -> None:
        self._gate("head", "")
        return self.inner.check(write=write)


def history_agrees(store: Any, channel: str) -> list[Any]:
    """Assert the channel's history is an unbroken chain ending at the pointer; return it."""
    from model_release.store import history, read_channel

    entries = history(store, channel)
    pointer = read_channel(store, channel)
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1)), [e.seq for e in entries]
    for before, after in zip(entries, entries[1:]):
        assert after.previous_release == before.release_id, (before, after)
    assert pointer is not None and entries[-1].release_id == pointer.release_id and entries[-1].seq == pointer.seq
    return entries
