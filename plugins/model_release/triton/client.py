"""Replay a golden set through a model with bounded concurrency, timing every request.

Replay talks to the server through the small :class:`InferenceClient` protocol: the real one
(:class:`TritonHttpClient`, one ``tritonclient.http`` client per worker thread) in the stage, a fake
in unit tests of the batching, ordering and timing logic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..model.dtypes import numpy_from_triton
from ..errors import CanaryRejected, ServiceUnavailable


class InferenceClient(Protocol):
    """One connection to a served model; used from one thread at a time."""

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Send one request (a batch of rows) and return every output by name."""
        ...

    def close(self) -> None: ...


@dataclass
class ReplayResult:
    """Outputs in golden-set order, and the timings."""

    outputs: dict[str, np.ndarray]
    latencies_ms: list[float]
    wall_s: float
    rows: int
    concurrency: int
    batch_rows: int
    warmup: int = 0

    def timing(self) -> dict[str, Any]:
        """p50/p95/p99 per request in ms, throughput in rows/s, request count."""
        lat = np.asarray(self.latencies_ms, dtype=np.float64)
        pct = (lambda q: float(np.percentile(lat, q))) if lat.size else (lambda q: float("nan"))
        return {
            "requests": int(lat.size),
            "rows": self.rows,
            "batch_rows": self.batch_rows,
            "concurrency": self.concurrency,
            "warmup_requests": self.warmup,
            "p50_ms": pct(50),
            "p95_ms": pct(95),
            "p99_ms": pct(99),
            "max_ms": float(lat.max()) if lat.size else float("nan"),
            "mean_ms": float(lat.mean()) if lat.size else float("nan"),
            "wall_s": self.wall_s,
            "throughput_rows_per_s": self.rows / self.wall_s if self.wall_s > 0 else float("nan"),
        }


def replay(
    golden: Mapping[str, np.ndarray],
    make_client: Callable[[], InferenceClient],
    *,
    batch_rows: int,
    concurrency: int,
    warmup: int = 1,
) -> ReplayResult:
    """Send ``golden`` in batches of ``batch_rows`` from ``concurrency`` threads, one client each.

    Args:
        golden: the inputs by name, all with the same number of rows.
        make_client: builds one client; called once per worker thread.
        batch_rows: rows per request.
        concurrency: requests in flight at most.
        warmup: untimed requests (the first batch) sent first on one client, so first-call costs
            (connections, lazy model initialisation) do not land in the percentiles.

    Returns:
        Every output concatenated in golden-set order, the latency of each request and the wall time.

    Raises:
        CanaryRejected: the server answered a request with an error (the model failed on the golden set).
        ServiceUnavailable: the server could not be reached.
    """
    if not golden:
        raise CanaryRejected("the golden set has no inputs; re-run the export stage")
    rows = {name: len(a) for name, a in golden.items()}
    if len(set(rows.values())) != 1:
        raise CanaryRejected(f"golden inputs have different row counts {rows}; re-run the export stage")
    n = next(iter(rows.values()))
    starts = list(range(0, n, batch_rows))
    local = threading.local()
    clients: list[InferenceClient] = []
    lock = threading.Lock()

    def send(start: int) -> tuple[int, dict[str, np.ndarray], float]:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = make_client()
            with lock:
                clients.append(client)
        batch = {name: a[start : start + batch_rows] for name, a in golden.items()}
        t0 = time.perf_counter()
        out = client.infer(batch)
        return start, out, (time.perf_counter() - t0) * 1000.0

    if warmup > 0:
        first = make_client()
        try:
            for _ in range(warmup):
                first.infer({name: a[:batch_rows] for name, a in golden.items()})
        finally:
            first.close()
    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="canary-replay") as pool:
            results = list(pool.map(send, starts))  # map keeps submission order
    finally:
        for c in clients:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
    wall = time.perf_counter() - t0
    outputs: dict[str, np.ndarray] = {}
    if results:
        for name in results[0][1]:
            outputs[name] = np.concatenate([r[1][name] for r in results], axis=0)
    return ReplayResult(
        outputs=outputs, latencies_ms=[r[2] for r in results], wall_s=wall, rows=n,
        concurrency=concurrency, batch_rows=batch_rows, warmup=warmup,
    )


class TritonHttpClient:
    """:class:`InferenceClient` over ``tritonclient.http`` for one model.

    Args:
        url: ``host:port`` of Triton's HTTP endpoint.
        model: the model to call.
        inputs: input name -> Triton datatype (golden arrays are cast to it).
        outputs: the output names to request.
    """

    def __init__(self, url: str, model: str, inputs: Mapping[str, str], outputs: list[str], *, timeout_s: float = 60) -> None:
        import tritonclient.http as httpclient

        self._http = httpclient
        self.url = url
        self.model = model
        self.inputs = dict(inputs)
        self.outputs = list(outputs)
        self._client = httpclient.InferenceServerClient(url, connection_timeout=timeout_s, network_timeout=timeout_s)

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        from tritonclient.utils import InferenceServerException

        req = []
        for name, datatype in self.inputs.items():
            if name not in inputs:
                raise CanaryRejected(
                    f'the golden set has no input "{name}" for model "{self.model}"; it has {sorted(inputs)}. '
                    "The golden set must be keyed by the entry model's input names; re-run the export stage.",
                )
            array = np.asarray(inputs[name])
            array = array.astype(numpy_from_triton(datatype), copy=False) if datatype != "BYTES" else array.astype(object)
            t = self._http.InferInput(name, list(array.shape), datatype)
            t.set_data_from_numpy(array, binary_data=True)
            req.append(t)
        wanted = [self._http.InferRequestedOutput(o, binary_data=True) for o in self.outputs]
        try:
            result = self._client.infer(self.model, req, outputs=wanted)
        except InferenceServerException as exc:
            raise CanaryRejected(
                f'model "{self.model}" answered a golden-set request with an error: {exc.message()}'
            ) from None
        except (ConnectionError, OSError) as exc:
            raise ServiceUnavailable(
                f"Triton at {self.url} could not be reached while replaying the golden set through {self.model!r}: "
                f"{exc}; check that the server is up",
            ) from None
        return {o: result.as_numpy(o) for o in self.outputs}

    def close(self) -> None:
        self._client.close()
