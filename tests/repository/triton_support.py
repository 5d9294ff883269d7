"""The product's own local Triton and canary shim, arranged for the repository load tests.

Several generated repositories are installed side by side into one server's repository (ONNX
leaves through :func:`model_release.triton.shim.prepare_canary_repository`, exactly as the canary
serves them), and loaded explicitly by the tests.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from model_release.triton.shim import prepare_canary_repository
from model_release.triton.local import LocalTriton as _Server


class LocalTriton:
    """A started tritonserver serving ``<workdir>/models``; ``install`` adds repositories to it."""

    def __init__(self, workdir: Path, ready_timeout: float = 60.0) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.repository = workdir / "models"
        self.repository.mkdir()
        self._server = _Server(self.repository, work_dir=workdir / "server", ready_timeout=ready_timeout)
        self._server.start()
        self.url = self._server.http_url
        self.process = self._server.process

    def log_tail(self, lines: int = 40) -> str:
        return self._server.log_tail(lines)

    def install(self, repository: Path) -> None:
        """Copy a generated repository into the server's, ONNX leaves shimmed as the canary does."""
        with tempfile.TemporaryDirectory(dir=self.repository.parent) as staging:
            staged = prepare_canary_repository(repository, Path(staging) / "models")
            shutil.copytree(staged.path, self.repository, dirs_exist_ok=True)

    def stop(self) -> None:
        self._server.stop()
