"""A local tritonserver (python backend only) for the load tests, and the onnxruntime shim."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sysconfig
import time
import urllib.error
import urllib.request
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from model_release.repository.config import CONFIG_FILE, ConfigParseError, read_config, write_config

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-triton"
SHIM = Path(__file__).with_name("ort_shim.py")


def shim_repository(source: Path, target: Path) -> None:
    """Copy a repository, serving every onnxruntime leaf through the python-backend shim instead."""
    shutil.copytree(source, target, dirs_exist_ok=True)
    for config_path in sorted(target.glob(f"*/{CONFIG_FILE}")):
        try:
            config = read_config(config_path)
        except ConfigParseError:
            continue  # left as it is: Triton will say what is wrong with it
        if config.backend != "onnxruntime" and config.platform != "onnxruntime_onnx":
            continue
        config.backend, config.platform = "python", ""
        for group in config.instance_group:
            group.kind = mc.ModelInstanceGroup.KIND_CPU
        write_config(config_path, config)
        for version in config_path.parent.iterdir():
            if (version / "model.onnx").is_file():
                shutil.copyfile(SHIM, version / "model.py")


def _die_with_parent() -> None:
    """In the child before exec: the kernel sends SIGTERM to the server if this process dies first."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalTriton:
    """tritonserver from .venv-triton in explicit model control, on 127.0.0.1 and free ports."""

    def __init__(self, workdir: Path, ready_timeout: float = 60.0) -> None:
        site = VENV / "lib" / "python3.11" / "site-packages"
        if not (site / "pytriton" / "tritonserver" / "bin" / "tritonserver").is_file():
            raise FileNotFoundError(f"no tritonserver under {site}; run infra/local/setup.sh")
        self.server_dir = workdir / "tritonserver"
        shutil.copytree(site / "pytriton" / "tritonserver", self.server_dir)
        stub = site / "pytriton" / "tritonserver" / "python_backend_stubs" / "3.11" / "triton_python_backend_stub"
        shutil.copy2(stub, self.server_dir / "backends" / "python" / "triton_python_backend_stub")
        self.repository = workdir / "models"
        self.repository.mkdir()
        self.log_path = workdir / "tritonserver.log"
        self.http_port, grpc_port = _free_port(), _free_port()
        env = dict(os.environ)
        env["PATH"] = f"{VENV / 'bin'}:{env.get('PATH', '')}"
        env["LD_LIBRARY_PATH"] = ":".join(
            p for p in (sysconfig.get_config_var("LIBDIR"), str(site / "nvidia_pytriton.libs"), env.get("LD_LIBRARY_PATH")) if p
        )
        env.pop("PYTHONPATH", None)
        command = [
            str(self.server_dir / "bin" / "tritonserver"),
            f"--model-repository={self.repository}",
            "--model-control-mode=explicit",
            f"--backend-directory={self.server_dir / 'backends'}",
            f"--cache-directory={self.server_dir / 'caches'}",
            "--http-address=127.0.0.1", f"--http-port={self.http_port}",
            "--grpc-address=127.0.0.1", f"--grpc-port={grpc_port}",
            "--allow-metrics=false",
            "--exit-timeout-secs=10",
        ]
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent
        )
        self.url = f"127.0.0.1:{self.http_port}"
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://{self.url}/v2/health/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"tritonserver not ready after {timeout} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def install(self, repository: Path) -> None:
        """Copy a generated repository into the server's, leaves shimmed."""
        shim_repository(repository, self.repository)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
