"""What the roll-out asks a serving Triton, on the house's explicit-mode server handle.

:class:`ServingTriton` is :class:`model_release.triton.server.TritonServer` (connection, live wait,
load with a config, loaded config) plus what a roll-out reads: the repository index with each
version's state, readiness per version, the versions the loaded entry ensemble pins, and one
direct request to a version (warm-up). Every error becomes :class:`~.errors.RolloutStopped`
naming the server and quoting Triton's message. Measured on 2.51, and why every load here passes
its config AND the roll-out writes the same config.pbtxt first:

- a load without a config after an override keeps the override (the file is not re-read);
- loading an ensemble reloads its composing models from their files on disk when those changed,
  so a member loaded by override alone (file still ``specific [1]``) is reloaded back to version 1
  by the next ensemble load, and the ensemble then fails: "required version 2 is not loaded".
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ModelReleaseError
from ..triton.server import TritonServer
from .errors import RolloutStopped
from .fleet import Server


def _first_lines(text: object, n: int = 4) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return " | ".join(lines[:n])


class ServingTriton(TritonServer):
    """One serving Triton in explicit model-control mode.

    Raises:
        RolloutStopped: the server is not live within ``live_timeout_s``.
    """

    def __init__(self, server: Server, *, live_timeout_s: float = 5) -> None:
        self.server = server
        try:
            super().__init__(server.url, ready_timeout=live_timeout_s)
        except ModelReleaseError as exc:
            raise self._down("connecting", exc.message) from None

    def _down(self, doing: str, why: object) -> RolloutStopped:
        return RolloutStopped(f"server {self.server.name} ({self.server.url}) did not answer while {doing}: "
                              f"{_first_lines(why)}; start it (or remove it from the fleet) and rerun the roll-out")

    def states(self) -> dict[str, dict[int, str]]:
        """model -> {version: state} from Triton's repository index (READY, LOADING, UNAVAILABLE...)."""
        try:
            rows = list(self._client.get_model_repository_index())
        except Exception as exc:  # noqa: BLE001 - any transport error: the server is not there
            raise self._down("reading its repository index", exc) from None
        out: dict[str, dict[int, str]] = {}
        for row in rows:
            if str(row.get("version", "")).isdigit():
                out.setdefault(row["name"], {})[int(row["version"])] = str(row.get("state", ""))
        return out

    def wait_settled(self, model: str, timeout_s: float = 120) -> dict[int, str]:
        """Wait while a version of ``model`` is LOADING/UNLOADING (never touch a model while it loads)."""
        deadline = time.monotonic() + timeout_s
        while True:
            states = self.states().get(model, {})
            if not any(s in ("LOADING", "UNLOADING") for s in states.values()) or time.monotonic() > deadline:
                return states
            time.sleep(0.2)

    def load(self, model: str, config: Any, *, what: str) -> float:  # type: ignore[override]
        """Load ``model`` with ``config`` (a ModelConfig); the seconds it took.

        Raises:
            RolloutStopped: Triton refused the load (its message quoted) or stopped answering.
        """
        try:
            return self.load_with_config(model, config)
        except ModelReleaseError as exc:  # CanaryRejected: "model "m" refused a tuning configuration: <Triton's words>"
            said = exc.message.split(": ", 1)[-1]
            raise RolloutStopped(
                f"server {self.server.name} ({self.server.url}) refused to load {what}: {said}; it keeps serving the "
                "release it had. Fix the model (or the server) and rerun the roll-out"
            ) from None
        except Exception as exc:  # noqa: BLE001 - the connection broke
            raise self._down(f"loading {what}", exc) from None

    def is_ready(self, model: str, version: int | None = None) -> bool:
        try:
            return bool(self._client.is_model_ready(model, "" if version is None else str(version)))
        except Exception:  # noqa: BLE001
            return False

    def loaded_pins(self, entry: str) -> dict[str, int] | None:
        """The loaded entry ensemble's steps -> the version each pins; None when it is not loaded."""
        if not self.is_ready(entry):
            return None
        try:
            config = self.config(entry)
        except Exception as exc:  # noqa: BLE001
            raise self._down(f"reading {entry}'s config", exc) from None
        return {s.model_name: int(s.model_version) for s in config.ensemble_scheduling.step}

    def infer_zeros(self, model: str, version: int, config: Any, rows: int = 1) -> float:
        """One request of zeros shaped by ``config`` straight to ``model`` at ``version``; its seconds.

        Raises:
            RolloutStopped: the request failed (the entry model is not switched).
        """
        import numpy as np
        import tritonclient.http as httpclient

        from ..model.dtypes import numpy_from_triton
        from ..repository.config import wire_name

        inputs = []
        for t in config.input:
            dims = [d if d > 0 else 1 for d in t.dims]
            shape = ([rows] + dims) if config.max_batch_size > 0 else dims
            datatype = wire_name(t.data_type)
            array = np.full(shape, b"0", dtype=object) if datatype == "BYTES" else np.zeros(shape, numpy_from_triton(datatype))
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
