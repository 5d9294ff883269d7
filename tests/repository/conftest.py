from __future__ import annotations

from pathlib import Path

import pytest

from .support import LocalTriton, sklearn_onnx


@pytest.fixture(scope="session")
def onnx_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small iris models exported to ONNX: lr, weak, tree and regressor."""
    root = tmp_path_factory.mktemp("onnx")
    paths = {}
    for kind in ("lr", "weak", "tree", "regressor"):
        paths[kind] = root / f"{kind}.onnx"
        sklearn_onnx(paths[kind], kind)
    return paths


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory):
    """One local tritonserver per test module; models are loaded explicitly by the tests."""
    import tritonclient.http as httpclient

    server = LocalTriton(tmp_path_factory.mktemp("triton"))
    client = httpclient.InferenceServerClient(server.url, network_timeout=120.0)
    server.client = client
    try:
        yield server
    finally:
        client.close()
        server.stop()
