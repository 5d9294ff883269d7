"""Requests to a served model prepared once and sent as raw bytes, the way perf_analyzer sends them.

:func:`request_batches` cuts up to a few distinct requests of ``batch_rows`` rows out of a golden
set (cycled when the set is small); :class:`TritonRequester` builds each one's KServe v2 binary
body once, as ``tritonclient.http`` would, and sends it over one HTTP connection. :class:`Requester`
is the small interface a load generator drives (a fake in unit tests).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..model.dtypes import numpy_from_triton


class Requester:
    """One connection that sends one request at a time (the real one wraps tritonclient.http)."""

    def send(self, batch: int) -> None: ...

    def close(self) -> None: ...


class TritonRequester(Requester):
    """Requests prebuilt once (the KServe v2 binary body tritonclient.http would send) over one HTTP connection.

    Sending is one POST of ready bytes and one read of the response: the client does as little
    per request as perf_analyzer does, so the figures are the server's. A status other than 200
    is an error carrying Triton's message.
    """

    def __init__(self, url: str, model: str, inputs: Mapping[str, str], outputs: list[str],
                 batches: list[dict[str, np.ndarray]], timeout_s: float) -> None:
        from urllib.parse import quote

        import tritonclient.http as http
        from geventhttpclient import HTTPClient

        host, _, port = url.rpartition(":")
        self._client = HTTPClient(host, int(port), connection_timeout=timeout_s, network_timeout=timeout_s, concurrency=1)
        self._path = f"/v2/models/{quote(model)}/infer"
        wanted = [http.InferRequestedOutput(o, binary_data=True) for o in outputs]
        self._requests: list[tuple[bytes, dict[str, str]]] = []
        for batch in batches:
            tensors = []
            for name, datatype in inputs.items():
                array = batch[name]
                array = array.astype(object) if datatype == "BYTES" else array.astype(numpy_from_triton(datatype), copy=False)
                tensor = http.InferInput(name, list(array.shape), datatype)
                tensor.set_data_from_numpy(array, binary_data=True)
                tensors.append(tensor)
            body, json_size = http.InferenceServerClient.generate_request_body(tensors, outputs=wanted)
            headers = {"Inference-Header-Content-Length": str(json_size)} if json_size is not None else {}
            self._requests.append((body if isinstance(body, bytes) else body.encode(), headers))

    def send(self, batch: int) -> None:
        body, headers = self._requests[batch % len(self._requests)]
        response = self._client.post(self._path, body=body, headers=headers)
        data = response.read()
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {data[:300].decode(errors='replace')}")

    def close(self) -> None:
        self._client.close()


def request_batches(golden: Mapping[str, np.ndarray], batch_rows: int, *, at_most: int = 32) -> list[dict[str, np.ndarray]]:
    """Up to ``at_most`` distinct requests of ``batch_rows`` golden rows, cycled when the set is small."""
    rows = len(next(iter(golden.values())))
    batches = []
    for i in range(at_most):
        start = (i * batch_rows) % rows
        index = (np.arange(batch_rows) + start) % rows
        batches.append({k: np.ascontiguousarray(v[index]) for k, v in golden.items()})
        if (i + 1) * batch_rows >= rows and rows >= batch_rows:
            break
    return batches
