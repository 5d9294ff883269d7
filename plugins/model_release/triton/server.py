"""A Triton in explicit model-control mode: readiness, metadata, models loaded in dependency order and unloaded.

Works the same on the embedded local Triton (:class:`model_release.triton.local.LocalTriton`) and on
a remote Triton given by endpoint, as long as it runs in explicit model-control mode and its
model repository holds the models asked for. Triton's errors are converted here: a model that fails to
load is the candidate's fault (:class:`CanaryRejected`), a server that cannot be reached is not
(:class:`ServiceUnavailable`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.dtypes import wire_type
from ..errors import CanaryRejected, ServiceUnavailable


@dataclass
class EntryModel:
    """What the canary needs to know about the model it replays through."""

    name: str
    inputs: dict[str, str]  # name -> Triton wire datatype
    outputs: dict[str, str]
    max_batch_size: int


@dataclass
class LoadedModels:
    order: list[str]
    versions: dict[str, list[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


class TritonServer:
    """A tritonclient.http connection used to load models and read metadata.

    Args:
        url: ``host:port`` of Triton's HTTP endpoint.
        ready_timeout: seconds to wait for the server to report live.
    """

    def __init__(self, url: str, *, ready_timeout: float = 30) -> None:
        import tritonclient.http as httpclient

        self.url = url
        self._client = httpclient.InferenceServerClient(url, connection_timeout=60, network_timeout=300)
        self._wait_live(ready_timeout)

    def _wait_live(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                if self._client.is_server_live():
                    return
            except Exception as exc:  # noqa: BLE001 - any transport error means "not yet"
                last = exc
            time.sleep(0.2)
        raise ServiceUnavailable(
            f"the canary Triton at {self.url} is not reachable or not live after {timeout:g} s ({last}); "
            "start it, or check the endpoint",
        )

    def metadata(self) -> dict[str, Any]:
        """Server name, version and extensions."""
        return dict(self._client.get_server_metadata())

    def load(self, order: list[str]) -> LoadedModels:
        """Load ``order`` one by one (dependencies first) through the repository API.

        Raises:
            CanaryRejected: a model failed to load; the message names it and quotes Triton's error.
            ServiceUnavailable: the server stopped answering.
        """
        return self._load_each(order, lambda name: {})

    def _load_each(self, order: list[str], request: Callable[[str], dict[str, Any]]) -> LoadedModels:
        from tritonclient.utils import InferenceServerException

        loaded = LoadedModels(order=list(order))
        for name in order:
            t0 = time.perf_counter()
            try:
                self._client.load_model(name, **request(name))
            except InferenceServerException as exc:
                raise CanaryRejected(
                    f'model "{name}" failed to load on the canary Triton ({self.url}): {_first_lines(exc.message())}. '
                    "Fix the model (its config.pbtxt or model.py) and re-run the assemble stage.",
                ) from None
            except OSError as exc:
                raise ServiceUnavailable(f"the canary Triton at {self.url} stopped answering while loading {name!r}: {exc}") from None
            loaded.seconds[name] = round(time.perf_counter() - t0, 3)
        for name in order:  # models pushed with files do not appear in the repository index: ask each one
            try:
                loaded.versions[name] = [str(v) for v in self._client.get_model_metadata(name).get("versions", [])]
            except InferenceServerException:
                loaded.versions[name] = []
        return loaded

    def push(self, repository: Path, order: list[str]) -> LoadedModels:
        """Load models from a local folder the server cannot see: config and files go through the load API.

        Each model of ``order`` (dependencies first) is sent as its config.pbtxt (as JSON) and every
        file of its version folders (``file:<version>/<name>`` overrides), so the server needs no
        shared disk. Triton keeps such models in its own temporary folders.

        Raises:
            CanaryRejected: a model failed to load; the message names it and quotes Triton's error.
            ServiceUnavailable: the server stopped answering.
        """
        from google.protobuf import json_format

        from ..repository.config import CONFIG_FILE, read_config

        def request(name: str) -> dict[str, Any]:
            folder = Path(repository) / name
            config = json_format.MessageToJson(read_config(folder / CONFIG_FILE), preserving_proto_field_name=True)
            files = {f"file:{p.relative_to(folder).as_posix()}": p.read_bytes()
                     for p in sorted(folder.rglob("*")) if p.is_file() and p.name != CONFIG_FILE}
            return {"config": config, "files": files}

        return self._load_each(order, request)

    def statistics(self) -> dict[str, dict[str, float]]:
        """Cumulative per-model statistics (Triton's statistics extension), summed over versions.

        Keys per model: ``success_count``, ``success_ns`` (request duration), ``queue_ns``,
        ``compute_input_ns``, ``compute_infer_ns``, ``compute_output_ns``, ``execution_count``
        (batches executed) and ``inference_count`` (rows).
        """
        out: dict[str, dict[str, float]] = {}
        for model in self._client.get_inference_statistics().get("model_stats", []):
            stats = model.get("inference_stats", {})
            entry = out.setdefault(model["name"], {})
            figures = {
                "success_count": stats.get("success", {}).get("count", 0), "success_ns": stats.get("success", {}).get("ns", 0),
                "queue_ns": stats.get("queue", {}).get("ns", 0),
                "compute_input_ns": stats.get("compute_input", {}).get("ns", 0),
                "compute_infer_ns": stats.get("compute_infer", {}).get("ns", 0),
                "compute_output_ns": stats.get("compute_output", {}).get("ns", 0),
                "execution_count": model.get("execution_count", 0), "inference_count": model.get("inference_count", 0),
            }
            for key, value in figures.items():
                entry[key] = entry.get(key, 0) + int(value)
        return out

    def load_with_config(self, name: str, config: Any) -> float:
        """(Re)load ``name`` from its repository with ``config`` (a ModelConfig) in place of its config.pbtxt.

        Returns:
            The seconds the load took.

        Raises:
            CanaryRejected: Triton refused the configuration (its message quoted).
        """
        from google.protobuf import json_format
        from tritonclient.utils import InferenceServerException

        t0 = time.perf_counter()
        try:
            self._client.load_model(name, config=json_format.MessageToJson(config, preserving_proto_field_name=True))
        except InferenceServerException as exc:
            raise CanaryRejected(f'model "{name}" refused a tuning configuration: {_first_lines(exc.message())}') from None
        return time.perf_counter() - t0

    def config(self, name: str) -> Any:
        """The loaded model's configuration as Triton holds it (a ModelConfig)."""
        from google.protobuf import json_format
        from tritonclient.grpc import model_config_pb2

        return json_format.ParseDict(self._client.get_model_config(name), model_config_pb2.ModelConfig(), ignore_unknown_fields=True)

    def unload(self, order: list[str]) -> None:
        """Unload ``order`` in reverse, ignoring errors (a remote canary must not keep the candidate)."""
        for name in reversed(order):
            try:
                self._client.unload_model(name)
            except Exception:  # noqa: BLE001 - best effort
                pass

    def entry(self, name: str) -> EntryModel:
        """Inputs, outputs and max_batch_size of the (loaded) entry model."""
        from tritonclient.utils import InferenceServerException

        try:
            config = self._client.get_model_config(name)
        except InferenceServerException as exc:
            raise CanaryRejected(f'entry model "{name}" is not ready on the canary Triton: {exc.message()}') from None
        return EntryModel(
            name=name,
            inputs={i["name"]: wire_type(i["data_type"]) for i in config.get("input", [])},
            outputs={o["name"]: wire_type(o["data_type"]) for o in config.get("output", [])},
            max_batch_size=int(config.get("max_batch_size", 0)),
        )

    def close(self) -> None:
        self._client.close()


def _first_lines(text: str, n: int = 6) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[:n])
