"""The remote canary: a Triton started on its own host, which shares no disk with the workers.

The server runs in explicit model-control mode with an empty model repository in the object store
(``--model-repository=s3://HOST:PORT/BUCKET/PREFIX`` for a private endpoint; Triton reads S3
itself). What the canary declares about itself comes from its Airflow connection
(:class:`RemoteCanary`). For each release the canary task delivers the candidate's models (and the
production champion's) in load order, in one of two ways:

- **pushed** through the repository load API: the model's config (as JSON) and every file of its
  version folders as ``file:<version>/<name>`` overrides. Nothing is written where the server
  reads, so nothing is left behind.
- **staged** in the server's object-store repository, then loaded by name: ensembles and the
  models they call as steps. Triton 2.51 cannot load an ensemble whose steps were pushed (it looks
  for them in its repositories: "failed to poll model ... not found in any model repository";
  triton-inference-server/server#4630), so an ensemble's whole step closure goes through the
  repository the server polls.

Afterwards, whatever happened, every model loaded is unloaded and every staged object deleted; a
canary killed half way leaves staged objects, which the next delivery clears first (one release
at a time uses a canary: the Airflow pool ``triton_canary``). The repository holds only
:data:`KEEP` between releases (Triton will not start on a prefix with no object in it).

On a CPU Triton (``gpu: false``: the python backend only) the shimmed copy of each repository is
delivered (:mod:`.shim`), and the report says so. A TensorRT plan is refused *before* anything is
loaded when its build stamp (TensorRT version, GPU compute capability, recorded by the TensorRT
stage in the manifest) differs from what the canary declares: a plan runs only on the TensorRT
version and GPU architecture it was built for. Likewise a canary that declares ``auto_complete:
false`` (started with ``--disable-auto-complete-config``) is given no repository that needs Triton
to complete its configs (:func:`~.shim.auto_complete_needed`): it would load the configs as
written, which is not the model the release describes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GpuUnavailable, InfraError, ServiceUnavailable
from .local import declared_auto_complete
from .server import LoadedModels, TritonServer

log = logging.getLogger(__name__)

PUSHED, STAGED = "pushed", "staged"
#: the one object an empty canary repository holds: Triton refuses to start on a prefix with no object
#: ("repository path is not a valid directory"); a top-level file is not a model, so it is ignored
KEEP = ".keep"
_PLAN_KINDS = ("tensorrt_plan", "tensorrt")


@dataclass(frozen=True)
class RemoteCanary:
    """A canary Triton started separately, and what it declares about itself.

    Attributes:
        url: ``host:port`` of its HTTP endpoint.
        repository: its model repository in the object store, as a store URI (``s3://BUCKET/PREFIX``);
            the canary stages ensembles there. None: only models without ensembles can be canaried.
        gpu: whether it has a GPU and the backends a release uses; False: a CPU Triton with the python
            backend only, so ONNX leaves are delivered through the onnxruntime shim.
        tensorrt: the TensorRT version its backend runs (``10.3.0``), for plans.
        compute_capability: its GPU's compute capability (``8.9``), for plans.
        auto_complete: whether it completes model configs (Triton's default); False for a server
            started with ``--disable-auto-complete-config``, as a serving fleet's may be.
    """

    url: str
    repository: str | None = None
    gpu: bool = True
    tensorrt: str | None = None
    compute_capability: str | None = None
    auto_complete: bool = True

    @classmethod
    def from_extra(cls, url: str, extra: dict[str, Any]) -> "RemoteCanary":
        """Build from a connection's extra (``repository``, ``gpu``, ``tensorrt``, ``compute_capability``,
        ``auto_complete``).

        Raises:
            SpecError: ``auto_complete`` is not a boolean (the rule of a serving fleet's entry).
        """
        gpu = extra.get("gpu", True)
        if isinstance(gpu, str):
            gpu = gpu.strip().lower() not in ("false", "0", "no")
        completes = declared_auto_complete(extra.get("auto_complete", True),
                                           f"the remote canary at {url}: connection extra auto_complete is")
        return cls(url=url, repository=extra.get("repository") or None, gpu=bool(gpu),
                   tensorrt=str(extra["tensorrt"]) if extra.get("tensorrt") else None,
                   compute_capability=str(extra["compute_capability"]) if extra.get("compute_capability") else None,
                   auto_complete=completes)

    def describe(self) -> str:
        kind = "GPU, backends as deployed" if self.gpu else "CPU, python-backend onnxruntime shim"
        return f"remote Triton at {self.url} ({kind})"


def _configs(repository: Path, names: list[str]) -> dict[str, Any]:
    from .shim import read_config

    return {name: read_config(repository / name / "config.pbtxt") for name in names}


def staged_closure(repository: Path, order: list[str]) -> set[str]:
    """The models that must be staged: every ensemble of ``order`` and, transitively, its steps."""
    configs = _configs(repository, order)
    staged: set[str] = set()
    todo = [n for n, c in configs.items() if c.platform == "ensemble"]
    while todo:
        name = todo.pop()
        if name in staged:
            continue
        staged.add(name)
        config = configs.get(name)
        if config is None and (repository / name / "config.pbtxt").is_file():
            config = _configs(repository, [name])[name]
        for step in (config.ensemble_scheduling.step if config is not None else []):
            todo.append(step.model_name)
    return staged


def check_plans(repository: Path, order: list[str], stamp: dict[str, Any] | None, canary: RemoteCanary, *, whose: str) -> None:
    """Refuse, before anything is loaded, a TensorRT plan the canary cannot run.

    Args:
        repository: the repository about to be delivered.
        order: its models.
        stamp: the manifest's ``tensorrt`` section (``environment`` holds the build's ``tensorrt``
            and ``compute_capability``), None when the release has none.
        canary: what the canary declares.
        whose: "the candidate" or the champion's name, for the message.

    Raises:
        GpuUnavailable: a plan is in ``repository`` and the canary has no GPU, declares no TensorRT
            version or compute capability, or declares others than the plan was built with.
    """
    plans = [n for n, c in _configs(repository, order).items() if (c.platform or c.backend) in _PLAN_KINDS]
    if not plans:
        return
    env = (stamp or {}).get("environment") or {}
    built = {"tensorrt": env.get("tensorrt"), "compute_capability": env.get("compute_capability")}
    if not canary.gpu:
        raise GpuUnavailable(
            f"{whose} holds TensorRT plan(s) {plans}, but the canary {canary.url} declares no GPU (connection extra gpu: false); "
            "run the canary on a GPU Triton, or release with tensorrt.mode: off")
    declared = {"tensorrt": canary.tensorrt, "compute_capability": canary.compute_capability}
    problems = []
    for key, what in (("tensorrt", "TensorRT version"), ("compute_capability", "GPU compute capability")):
        if not built[key]:
            problems.append(f"the plan records no {what} (its build stamp is {env or 'missing'})")
        elif not declared[key]:
            problems.append(f"the canary declares no {what} (set extra.{key} on its Airflow connection)")
        elif str(built[key]) != str(declared[key]):
            problems.append(f"{what} {built[key]} (plan) != {declared[key]} (canary)")
    if problems:
        raise GpuUnavailable(
            f"{whose}: TensorRT plan(s) {plans} cannot be loaded on the canary {canary.url}: " + "; ".join(problems)
            + ". A plan runs only on the TensorRT version and GPU architecture it was built for: build it on a GPU "
            "worker matching the canary (queue 'gpu'), or point the canary connection at a matching Triton. Nothing was loaded.")


@dataclass
class Delivery:
    """Delivers repositories to one remote canary and takes everything back afterwards.

    Args:
        server: the canary server's connection.
        canary: what the canary declares.
        open_store: opens a store URI (the canary's repository) with the task's credentials.
        workdir: where shimmed copies are prepared.
    """

    server: TritonServer
    canary: RemoteCanary
    open_store: Callable[[str], Any]
    workdir: Path
    how: dict[str, str] = field(default_factory=dict)
    shimmed: list[str] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    staged: list[str] = field(default_factory=list)
    _backend: Any = None
    _prepared: dict[str, Path] = field(default_factory=dict)

    def _repository_backend(self) -> Any:
        if self._backend is None:
            if not self.canary.repository:
                raise ServiceUnavailable(
                    f"the remote canary {self.canary.url} has no object-store repository (connection extra 'repository', "
                    "e.g. s3://BUCKET/canary), and this release has an ensemble, which Triton loads only from a repository "
                    "it polls; start the canary Triton with --model-repository on that prefix and name it in the connection")
            self._backend = self.open_store(self.canary.repository).backend
        return self._backend

    def clear(self) -> int:
        """Delete whatever an earlier (killed) delivery left in the canary's repository."""
        if not self.canary.repository:
            return 0
        backend = self._repository_backend()
        keys = [o.key for o in backend.list("") if o.key != KEEP]
        if keys:
            backend.delete(keys)
            log.warning("canary: removed %d object(s) an earlier canary left in %s", len(keys), self.canary.repository)
        return len(keys)

    def prepare(self, repository: Path, name: str, *, whose: str) -> Path:
        """The repository to deliver: a shimmed copy on a CPU canary, else ``repository`` itself.

        Prepared once per ``name``; the same path again after that.

        Raises:
            InfraError: the canary does not complete configs (``auto_complete: false``) and this
                repository needs it (``whose`` names it in the message); nothing was delivered.
        """
        if name in self._prepared:
            return self._prepared[name]
        path = Path(repository)
        if not self.canary.gpu:
            from .shim import prepare_canary_repository

            copy = prepare_canary_repository(path, self.workdir / name)
            self.shimmed += copy.shimmed
            path = copy.path
        if not self.canary.auto_complete:
            from .shim import auto_complete_needed

            why = auto_complete_needed(path)
            if why is not None:
                raise InfraError(
                    f"{whose} cannot be judged on the remote canary at {self.canary.url}: it declares auto_complete "
                    f"false (the server runs with --disable-auto-complete-config, so it would load the configs as "
                    f"written) and {why}, which needs Triton to complete it. Nothing was delivered. Declare every "
                    "input and output in config.pbtxt and drop auto_complete_config, or set auto_complete true in the "
                    "triton_canary connection's extra for a canary Triton started without that flag", stage="canary")
        self._prepared[name] = path
        return path

    def load(self, repository: Path, order: list[str]) -> LoadedModels:
        """Deliver ``order`` from ``repository`` (staged or pushed, see the module) and load it in order.

        Raises:
            CanaryRejected: a model failed to load (Triton's message quoted).
            ServiceUnavailable: the server or the canary's repository could not be reached.
        """
        staged = staged_closure(repository, order)
        if staged:
            self._stage(repository, sorted(staged))
        loaded = LoadedModels(order=list(order))
        for name in order:
            how = STAGED if name in staged else PUSHED
            self.how[name] = how
            self.loaded.append(name)
            step = self.server.load([name]) if how == STAGED else self.server.push(repository, [name])
            loaded.versions.update(step.versions)
            loaded.seconds.update(step.seconds)
        return loaded

    def _stage(self, repository: Path, names: list[str]) -> None:
        from ..store.backend import hash_file

        backend = self._repository_backend()
        for name in names:
            self.staged.append(name)
            for empty in sorted(d for d in (repository / name).rglob("*") if d.is_dir() and not any(d.iterdir())):
                # an object store has no empty folders: an ensemble's version folder needs an object in it
                backend.put_bytes(f"{name}/{empty.relative_to(repository / name).as_posix()}/{KEEP}", b"")
            for path in sorted(p for p in (repository / name).rglob("*") if p.is_file()):
                size = path.stat().st_size
                sha, parts = hash_file(path, backend.part_size(size))
                backend.put_file(f"{name}/{path.relative_to(repository / name).as_posix()}", path, sha256=sha, size=size,
                                 part_digests=parts)

    def close(self) -> dict[str, Any]:
        """Unload every model loaded (in reverse) and delete every staged object; never raises."""
        self.server.unload(self.loaded)
        removed = 0
        if self.staged:
            try:
                backend = self._repository_backend()
                keys = [o.key for name in self.staged for o in backend.list(f"{name}/")]
                if keys:
                    backend.delete(keys)
                removed = len(keys)
            except Exception as exc:  # noqa: BLE001 - the next delivery clears what is left
                log.warning("canary: could not delete the staged models %s (%s); the next canary run clears them",
                            self.staged, exc)
        return {"unloaded": list(reversed(self.loaded)), "staged_objects_removed": removed}

    def facts(self) -> dict[str, Any]:
        return {"delivery": dict(self.how), "staged_in": self.canary.repository, "shimmed_models": list(self.shimmed)}
