"""What a serving agent asks its Triton: the repository API's index, load, unload and readiness, over gRPC.

:class:`TritonControl` is the interface the agent's convergence (:mod:`.converge`) speaks; the real
one is :class:`GrpcTriton`, a fake one (tests, the scale benchmark) implements the same calls
in memory. Why gRPC and not HTTP, measured on 2.51 (benchmarks/bench_rollout.py prints it): Triton's
HTTP frontend answers a repository load on the thread that received it and holds HTTP inference
requests behind it for as long as the load takes (a python model whose ``initialize`` takes 2 s
stalled every HTTP request for 2.2 s), while a load sent over gRPC left HTTP traffic untouched (p99
as before). Loading a new version beside a serving one does not reload the serving one (its
``initialize`` does not run again; Triton logs ``loading: m:1`` all the same).

The same server's metrics endpoint gives what the repository API does not: requests still pending
(``nv_inference_pending_request_count``, for a drain) and memory (``nv_gpu_memory_*_bytes``, or
``nv_cpu_memory_*_bytes`` on a server started with ``--allow-cpu-metrics=true``).
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any, Protocol

from .errors import LoadRefused, RolloutStopped

#: seconds one load may take before the agent gives up on it (a large TensorRT engine takes minutes)
LOAD_TIMEOUT_S = 900.0
#: seconds any other call may take
CALL_TIMEOUT_S = 10.0


def first_lines(text: object, n: int = 4) -> str:
    """The first ``n`` non-empty lines of ``text`` on one line (Triton's messages carry tracebacks)."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return " | ".join(lines[:n])


class TritonControl(Protocol):
    """The calls an agent makes to its Triton. Every method raises :class:`~.errors.RolloutStopped`
    (the server did not answer) except where it says otherwise."""

    name: str

    def live(self) -> bool:
        """Whether the server answers and is live (never raises)."""
        ...

    def states(self) -> dict[str, dict[int, str]]:
        """model -> {version: state} from the repository index (READY, LOADING, UNLOADING, UNAVAILABLE)."""
        ...

    def load(self, model: str, config: Any) -> float:
        """Load ``model`` with ``config`` (a ModelConfig, in place of its config.pbtxt); the seconds it took.

        Raises:
            LoadRefused: Triton refused the load (its words quoted).
        """
        ...

    def unload(self, model: str) -> None:
        """Unload every version of ``model``."""
        ...

    def is_ready(self, model: str, version: int | None = None) -> bool:
        """Whether ``model`` (at ``version``) is READY (never raises)."""
        ...

    def loaded_config(self, model: str) -> Any | None:
        """The configuration ``model`` is loaded with (a ModelConfig), or None when it is not loaded."""
        ...

    def infer_zeros(self, model: str, version: int, config: Any) -> float:
        """One request of zeros shaped by ``config`` to ``model`` at ``version``; its seconds."""
        ...

    def pending_requests(self) -> int | None:
        """Requests accepted and not yet answered, over every model (None: the server does not say)."""
        ...

    def memory(self) -> tuple[int, int] | None:
        """(total bytes, used bytes) of the memory models load into (a GPU's, or the host's), or None."""
        ...


class GrpcTriton:
    """One Triton's repository API over gRPC, and its metrics endpoint.

    Args:
        name: the server's name (messages name it).
        grpc_url: ``host:port`` of Triton's gRPC endpoint.
        metrics_url: its metrics endpoint (None: no pending count, no memory figures).
    """

    def __init__(self, name: str, grpc_url: str, metrics_url: str | None = None) -> None:
        import tritonclient.grpc as grpcclient

        self.name, self.url, self.metrics_url = name, grpc_url, metrics_url
        self._grpc = grpcclient
        self._client = grpcclient.InferenceServerClient(grpc_url)

    def _down(self, doing: str, why: object) -> RolloutStopped:
        return RolloutStopped(f"server {self.name} ({self.url}) did not answer while {doing}: {first_lines(why)}")

    def live(self) -> bool:
        try:
            return bool(self._client.is_server_live(client_timeout=CALL_TIMEOUT_S))
        except Exception:  # noqa: BLE001 - any transport error: not live
            return False

    def states(self) -> dict[str, dict[int, str]]:
        try:
            rows = self._client.get_model_repository_index(as_json=True, client_timeout=CALL_TIMEOUT_S).get("models", [])
        except Exception as exc:  # noqa: BLE001
            raise self._down("reading its repository index", exc) from None
        out: dict[str, dict[int, str]] = {}
        for row in rows:
            if str(row.get("version", "")).isdigit():
                out.setdefault(row["name"], {})[int(row["version"])] = str(row.get("state", ""))
        return out

    def load(self, model: str, config: Any) -> float:
        from google.protobuf import json_format
        from tritonclient.utils import InferenceServerException

        t0 = time.perf_counter()
        try:
            self._client.load_model(model, config=json_format.MessageToJson(config, preserving_proto_field_name=True),
                                    client_timeout=LOAD_TIMEOUT_S)
        except InferenceServerException as exc:
            status = str(exc.status() or "")
            if "UNAVAILABLE" in status or "DEADLINE" in status:
                raise self._down(f"loading {model}", exc.message()) from None
            raise LoadRefused(first_lines(exc.message(), 6)) from None
        return time.perf_counter() - t0

    def unload(self, model: str) -> None:
        try:
            self._client.unload_model(model, client_timeout=CALL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            raise self._down(f"unloading {model}", exc) from None

    def is_ready(self, model: str, version: int | None = None) -> bool:
        try:
            return bool(self._client.is_model_ready(model, "" if version is None else str(version),
                                                    client_timeout=CALL_TIMEOUT_S))
        except Exception:  # noqa: BLE001
            return False

    def loaded_config(self, model: str) -> Any | None:
        from google.protobuf import json_format
        from tritonclient.grpc import model_config_pb2

        if not self.is_ready(model):
            return None
        try:
            doc = self._client.get_model_config(model, as_json=True, client_timeout=CALL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            raise self._down(f"reading {model}'s config", exc) from None
        return json_format.ParseDict(doc.get("config", {}), model_config_pb2.ModelConfig(), ignore_unknown_fields=True)

    def infer_zeros(self, model: str, version: int, config: Any) -> float:
        import numpy as np

        from ..model.dtypes import numpy_from_triton
        from ..repository.config import wire_name

        inputs = []
        for t in config.input:
            dims = [d if d > 0 else 1 for d in t.dims]
            shape = ([1] + dims) if config.max_batch_size > 0 else dims
            datatype = wire_name(t.data_type)
            array = np.full(shape, b"0", dtype=object) if datatype == "BYTES" else np.zeros(shape, numpy_from_triton(datatype))
            tensor = self._grpc.InferInput(t.name, shape, datatype)
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        t0 = time.perf_counter()
        try:
            self._client.infer(model, inputs, model_version=str(version), client_timeout=LOAD_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            raise RolloutStopped(f"server {self.name} ({self.url}): a warm-up request to {model} version {version} "
                                 f"failed: {first_lines(exc)}") from None
        return time.perf_counter() - t0

    def _metrics(self) -> dict[str, dict[Any, float]] | None:
        if not self.metrics_url:
            return None
        from .watch.metrics import MetricsFormatError, parse_metrics

        try:
            with urllib.request.urlopen(self.metrics_url, timeout=CALL_TIMEOUT_S) as resp:  # noqa: S310 - its own endpoint
                return parse_metrics(resp.read().decode("utf-8", errors="replace"))
        except (OSError, MetricsFormatError, json.JSONDecodeError):
            return None

    def pending_requests(self) -> int | None:
        samples = self._metrics()
        if samples is None or "nv_inference_pending_request_count" not in samples:
            return None
        return int(sum(samples["nv_inference_pending_request_count"].values()))

    def memory(self) -> tuple[int, int] | None:
        samples = self._metrics()
        return memory_from_metrics(samples) if samples is not None else None

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


def memory_from_metrics(samples: dict[str, dict[Any, float]]) -> tuple[int, int] | None:
    """(total, used) bytes: the GPU with the least free memory when Triton reports GPUs, else the host's RAM."""
    gpus_total, gpus_used = samples.get("nv_gpu_memory_total_bytes", {}), samples.get("nv_gpu_memory_used_bytes", {})
    if gpus_total:
        pairs = [(int(total), int(gpus_used.get(labels, 0))) for labels, total in gpus_total.items()]
        return min(pairs, key=lambda p: p[0] - p[1])
    total, used = samples.get("nv_cpu_memory_total_bytes", {}), samples.get("nv_cpu_memory_used_bytes", {})
    if total and used:
        return int(next(iter(total.values()))), int(next(iter(used.values())))
    return None
