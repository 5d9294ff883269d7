"""Fakes for the serving agent's logic and the scale benchmark: a Triton, an in-memory store, small releases.

:class:`FakeTriton` implements the two interfaces an agent speaks (:class:`~model_release.serve.control.TritonControl`
and :class:`~model_release.serve.server_repo.ModelRepository`) as Triton 2.51 behaves, measured in
tests/serve/test_triton_facts.py and the live tests: a load builds its new versions while the loaded
ones keep serving (and are not reloaded); if any new version fails, the new ones are unloaded and the
failure stays in the index as UNAVAILABLE with its reason, which makes a strictly ready server not
ready until a load of that number succeeds; an ensemble's load needs every pinned step READY; an
unload leaves the reason "unloaded". Load times come from ``load_time(model, versions)`` (a distribution in the
benchmark), failures from ``fails(model, version, digest)`` (the digest of the folder's content, as the
agent staged it: a copy of another version has that version's).

:class:`MemoryBackend` is a store backend in memory (the conditional writes of S3 under one lock), for
a thousand agents heartbeating in one process; :func:`pipeline_release` writes a small release (two
python members and a pinned ensemble) with a canary footprint, promotable with the store's own promote.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Iterator

from model_release.serve.errors import LoadRefused, RolloutStopped
from model_release.store.backend import ObjectInfo, PreconditionFailed


class FakeTriton:
    """One Triton (repository API and repository) in memory; ``kill()`` and ``restart()`` as a supervisor would."""

    def __init__(self, name: str, *, load_time: Callable[[str, list[int]], float] = lambda model, versions: 0.0,
                 fails: Callable[[str, int, str], bool] = lambda model, version, digest: False,
                 sleep: Callable[[float], None] = time.sleep, memory: tuple[int, int] | None = None) -> None:
        self.name, self.url = name, f"fake://{name}"
        self.load_time, self.fails, self.sleep, self._memory = load_time, fails, sleep, memory
        self.alive = True
        self.index: dict[str, dict[int, tuple[str, str]]] = {}
        self.loaded: dict[str, Any] = {}
        self.folders: dict[str, dict[int, str]] = {}
        self.configs: dict[str, Any] = {}
        self.loads: list[tuple[str, list[int]]] = []  # (model, versions built) per load call
        self.lock = threading.Lock()

    # ---- lifecycle ----------------------------------------------------------------------------
    def kill(self) -> None:
        self.alive = False

    def restart(self) -> None:
        """Back up, serving nothing (explicit mode loads nothing at start); the repository is kept (its disk)."""
        self.index, self.loaded, self.alive = {}, {}, True

    def _up(self, doing: str) -> None:
        if not self.alive:
            raise RolloutStopped(f"server {self.name} did not answer while {doing}: connection refused")

    # ---- TritonControl ------------------------------------------------------------------------
    def live(self) -> bool:
        return self.alive

    def states(self) -> dict[str, dict[int, str]]:
        self._up("reading its repository index")
        with self.lock:
            return {m: {v: s for v, (s, _) in vs.items()} for m, vs in self.index.items()}

    def server_ready(self) -> bool:
        """Strict readiness: every version READY, or unavailable because it was unloaded."""
        return self.alive and all(s == "READY" or r == "unloaded" for vs in self.index.values() for s, r in vs.values())

    def load(self, model: str, config: Any) -> float:
        self._up(f"loading {model}")
        t0 = time.perf_counter()
        if config.platform == "ensemble":
            return self._load_ensemble(model, config, t0)
        wanted = sorted(config.version_policy.specific.versions)
        with self.lock:
            current = self.index.setdefault(model, {})
            new = [v for v in wanted if current.get(v, ("", ""))[0] != "READY"]
        missing = [v for v in new if v not in self.folders.get(model, {})]
        if missing:
            raise LoadRefused(f"load failed for model '{model}': version {missing[0]} is specified but the version "
                              "directory is not present")
        self.loads.append((model, new))
        if new:
            self.sleep(self.load_time(model, new))
        failed = [v for v in new if self.fails(model, v, self.folders[model][v])]
        with self.lock:
            for v in new:
                current[v] = ("UNAVAILABLE", f"Internal: {model} version {v} failed to initialize") if v in failed \
                    else ("READY", "")
            if failed:
                for v in new:
                    if v not in failed:
                        current[v] = ("UNAVAILABLE", "unloaded")
                raise LoadRefused(f"load failed for model '{model}': version {failed[0]} is at UNAVAILABLE state: "
                                  f"Internal: {model} version {failed[0]} failed to initialize")
            for v, (state, _) in list(current.items()):
                if v not in wanted and state == "READY":
                    current[v] = ("UNAVAILABLE", "unloaded")
            self.loaded[model] = config
        return time.perf_counter() - t0

    def _load_ensemble(self, model: str, config: Any, t0: float) -> float:
        with self.lock:
            for step in config.ensemble_scheduling.step:
                if self.index.get(step.model_name, {}).get(step.model_version, ("", ""))[0] != "READY":
                    raise LoadRefused(f"load failed for model '{model}': ensemble {model} requires version "
                                      f"{step.model_version} of {step.model_name}, which is not loaded")
            self.index[model] = {1: ("READY", "")}
            self.loaded[model] = config
        return time.perf_counter() - t0

    def unload(self, model: str) -> None:
        self._up(f"unloading {model}")
        with self.lock:
            for v, (state, _) in list(self.index.get(model, {}).items()):
                if state == "READY":
                    self.index[model][v] = ("UNAVAILABLE", "unloaded")
            self.loaded.pop(model, None)

    def is_ready(self, model: str, version: int | None = None) -> bool:
        if not self.alive:
            return False
        with self.lock:
            states = self.index.get(model, {})
            return any(s == "READY" for s, _ in states.values()) if version is None else \
                states.get(version, ("", ""))[0] == "READY"

    def loaded_config(self, model: str) -> Any | None:
        self._up(f"reading {model}'s config")
        return self.loaded.get(model) if self.is_ready(model) else None

    def infer_zeros(self, model: str, version: int, config: Any) -> float:
        self._up(f"a request to {model}")
        return 0.001

    def pending_requests(self) -> int | None:
        return 0

    def memory(self) -> tuple[int, int] | None:
        return self._memory

    # ---- ModelRepository ----------------------------------------------------------------------
    def stage(self, release: Any, model: str, digest: str) -> bool:
        folders = self.folders.setdefault(model, {})
        version = release.versions[model]
        if folders.get(version) == digest:
            return False
        folders[version] = digest
        return True

    def write_config(self, model: str, config: Any) -> None:
        self.configs[model] = config

    def read_config(self, model: str) -> Any | None:
        return self.configs.get(model)

    def drop_version(self, model: str, version: int, previous: Any | None) -> None:
        self.folders.get(model, {}).pop(version, None)
        if previous is not None:
            self.configs[model] = previous

    def copy_version(self, model: str, source: int, target: int) -> None:
        self.folders[model][target] = self.folders[model][source]

    def prune(self, model: str, keep: set[int]) -> list[int]:
        gone = sorted(v for v in self.folders.get(model, {}) if v not in keep)
        for v in gone:
            del self.folders[model][v]
        return gone

    def ensure_entry_folder(self, entry: str) -> None:
        self.folders.setdefault(entry, {})[1] = "ensemble"

    def clean_partials(self) -> None:
        return None

    def check(self) -> str | None:
        return None


class MemoryBackend:
    """A store backend in memory: objects, etags and conditional writes under one lock."""

    def __init__(self, uri: str = "memory://fleet") -> None:
        self.uri = uri
        self._objects: dict[str, tuple[bytes, str]] = {}
        self._lock = threading.Lock()
        self._etags = itertools.count(1)

    @classmethod
    def copy_of(cls, backend: Any) -> "MemoryBackend":
        """A memory backend holding every object of ``backend`` (a store promoted into on disk)."""
        memory = cls()
        for info in backend.list(""):
            got = backend.get_bytes(info.key)
            if got is not None:
                memory.put_bytes(info.key, got[0])
        return memory

    def head(self, key: str) -> ObjectInfo | None:
        got = self._objects.get(key)
        return ObjectInfo(key, len(got[0]), got[1]) if got else None

    def get_bytes(self, key: str) -> tuple[bytes, str] | None:
        return self._objects.get(key)

    def put_bytes(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> str:
        with self._lock:
            current = self._objects.get(key)
            if if_none_match and current is not None:
                raise PreconditionFailed(f"{key} exists")
            if if_match is not None and (current is None or current[1] != if_match):
                raise PreconditionFailed(f"{key} changed")
            etag = f"e{next(self._etags)}"
            self._objects[key] = (bytes(data), etag)
            return etag

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        for key in sorted(k for k in list(self._objects) if k.startswith(prefix)):
            info = self.head(key)
            if info is not None:
                yield info

    def list_dirs(self, prefix: str) -> list[str]:
        return sorted({k[len(prefix):].split("/", 1)[0] for k in self._objects if k.startswith(prefix) and "/" in k[len(prefix):]})

    def delete(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._objects.pop(key, None)


PYTHON_MODEL = "import triton_python_backend_utils as pb_utils\n# {seed}\n"


def pipeline_release(root: Path, *, seed: str, leaf_seed: str | None = None, footprint: int | None = 200 << 20,
                     completes_itself: bool = False) -> Path:
    """A release folder: a python leaf and a python postprocess (each one version) and an ensemble pinning them.

    ``leaf_seed`` (default ``seed``) varies the leaf alone, so two releases can share the postprocess.
    ``footprint``: the canary's memory footprint recorded in the manifest (None: none recorded);
    ``completes_itself``: the postprocess defines ``auto_complete_config`` (it needs a Triton that completes configs).
    """
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    def pbtxt(doc: dict[str, Any]) -> bytes:
        return text_format.MessageToString(json_format.ParseDict(doc, model_config_pb2.ModelConfig())).encode()

    io = {"input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
          "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}]}
    step = {"input_map": {"IN": "IN"}, "output_map": {"OUT": "OUT"}}
    files = {
        "models/leaf/config.pbtxt": pbtxt({"name": "leaf", "backend": "python", **io}),
        "models/leaf/1/model.py": PYTHON_MODEL.format(seed=leaf_seed or seed).encode(),
        "models/post/config.pbtxt": pbtxt({"name": "post", "backend": "python", **io}),
        "models/post/1/model.py": (PYTHON_MODEL.format(seed="post") + (
            "class TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(config):\n        return config\n"
            if completes_itself else "")).encode(),
        "models/entry/config.pbtxt": pbtxt({"name": "entry", "platform": "ensemble", **io, "ensemble_scheduling": {
            "step": [{"model_name": "leaf", "model_version": -1, **step},
                     {"model_name": "post", "model_version": -1, "input_map": {"IN": "OUT"}, "output_map": {"OUT": "OUT"}}]}}),
        "models/entry/1/.keep": b"",
    }
    manifest: dict[str, Any] = {"format": 1, "model": {"name": "fake", "version": seed}, "files": {},
                                "repository": {"entry_model": "entry", "load_order": ["leaf", "post", "entry"],
                                               "models": {"leaf": "1", "post": "1", "entry": "1"}, "ensembles": ["entry"]}}
    if footprint is not None:
        manifest["canary"] = {"passed": True, "figures": {"memory": {"footprint_bytes": footprint, "how": "test"}}}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (root / "release.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return root
