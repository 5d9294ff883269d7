"""What the roll-out asks a serving Triton: its repository index, loads with a config, readiness.

Over ``tritonclient.http``, like the canary's :class:`model_release.canary.server.CanaryServer`;
Triton's errors are converted here into :class:`~.errors.RolloutStopped` naming the server and
quoting Triton's message. Every load passes the config explicitly: a load without one after an
override keeps the override (measured on 2.51), so the file alone never decides what is served.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .errors import RolloutStopped
from .fleet import Server


def _first_lines(text: str, n: int = 4) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return " | ".join(lines[:n])


class ServingTriton:
    """One serving Triton in explicit model-control mode."""

    def __init__(self, server: Server, *, timeout_s: float = 300) -> None:
        import tritonclient.http as httpclient

        self.server = server
        self._client = httpclient.InferenceServerClient(server.url, connection_timeout=10, network_timeout=timeout_s)

    def _down(self, doing: str, exc: Exception) -> RolloutStopped:
        return RolloutStopped(f"server {self.server.name} ({self.server.url}) did not answer while {doing}: "
                              f"{_first_lines(exc)}; start it (or remove it from the fleet) and rerun the roll-out")

    def index(self) -> list[dict[str, Any]]:
        """Triton's repository index: every model version it knows, with its state."""
        try:
            return list(self._client.get_model_repository_index())
        except Exception as exc:  # noqa: BLE001 - transport errors of any kind mean the server is not there
            raise self._down("reading its repository index", exc) from None

    def states(self) -> dict[str, dict[int, str]]:
        """model -> {version: state} from the index (READY, LOADING, UNAVAILABLE...)."""
        out: dict[str, dict[int, str]] = {}
        for row in self.index():
            if str(row.get("version", "")).isdigit():
                out.setdefault(row["name"], {})[int(row["version"])] = str(row.get("state", ""))
        return out

    def wait_settled(self, model: str, timeout_s: float = 120) -> dict[int, str]:
        """Wait while any version of ``model`` is LOADING/UNLOADING (never touch a model while it loads)."""
        deadline = time.monotonic() + timeout_s
        while True:
            states = self.states().get(model, {})
            if not any(s in ("LOADING", "UNLOADING") for s in states.values()) or time.monotonic() > deadline:
                return states
            time.sleep(0.2)

    def load(self, model: str, config: Any, *, what: str) -> float:
        """Load ``model`` with ``config`` (a ModelConfig); the seconds it took.

        Raises:
            RolloutStopped: Triton refused the load (its message quoted) or stopped answering.
        """
        from google.protobuf import json_format
        from tritonclient.utils import InferenceServerException

        t0 = time.perf_counter()
        try:
            self._client.load_model(model, config=json_format.MessageToJson(config, preserving_proto_field_name=True))
        except InferenceServerException as exc:
            raise RolloutStopped(
                f"server {self.server.name} ({self.server.url}) refused to load {what}: {_first_lines(exc.message())}; "
                "it keeps serving the release it had. Fix the model (or the server) and rerun the roll-out"
            ) from None
        except Exception as exc:  # noqa: BLE001
            raise self._down(f"loading {what}", exc) from None
        return time.perf_counter() - t0

    def is_ready(self, model: str, version: int | None = None) -> bool:
        try:
            return bool(self._client.is_model_ready(model, "" if version is None else str(version)))
        except Exception:  # noqa: BLE001
            return False

    def loaded_pins(self, entry: str) -> dict[str, int] | None:
        """The steps of the loaded entry ensemble -> the version each pins; None when it is not loaded."""
        if not self.is_ready(entry):
            return None
        try:
            config = self._client.get_model_config(entry)
        except Exception as exc:  # noqa: BLE001
            raise self._down(f"reading {entry}'s config", exc) from None
        steps = config.get("ensemble_scheduling", {}).get("step", [])
        return {s["model_name"]: int(s.get("model_version", -1)) for s in steps}

    def infer_zeros(self, model: str, version: int, config: Any, rows: int = 1) -> float:
        """One request of zeros shaped by ``config`` to ``model`` at ``version``; its seconds."""
        import numpy as np
        import tritonclient.http as httpclient

        from ..dtypes import numpy_from_triton
        from ..repository.config import wire_name

        inputs = []
        for t in config.input:
            dims = [d if d > 0 else 1 for d in t.dims]
            shape = ([rows] + dims) if config.max_batch_size > 0 else dims
            datatype = wire_name(t.data_type)
            array = np.zeros(shape, dtype=object if datatype == "BYTES" else numpy_from_triton(datatype))
            if datatype == "BYTES":
                array[...] = b"0"
            tensor = httpclient.InferInput(t.name, shape, datatype)
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        t0 = time.perf_counter()
        try:
            self._client.infer(model, inputs, model_version=str(version))
        except Exception as exc:  # noqa: BLE001
            raise RolloutStopped(f"server {self.server.name} ({self.server.url}): a warm-up request to {model} version "
                                 f"{version} failed: {_first_lines(exc)}; the entry model was not switched") from None
        return time.perf_counter() - t0

    def close(self) -> None:
        self._client.close()


def describe_config(config: Any) -> str:
    """A ModelConfig as one line of JSON (for records)."""
    from google.protobuf import json_format

    return json.dumps(json_format.MessageToDict(config, preserving_proto_field_name=True), sort_keys=True)
