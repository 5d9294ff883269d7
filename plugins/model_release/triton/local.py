"""A local Triton Inference Server 2.51 for the embedded canary, launched from its own runtime venv.

The ``nvidia-pytriton`` wheel carries a real ``tritonserver`` binary with the python backend only.
This module runs it the way /work/shared/ENVIRONMENT.md measured it working::

    with LocalTriton(Path("repo")) as triton:        # explicit model control, 127.0.0.1, free ports
        client = triton.client()                     # tritonclient.http, closed on exit
        client.load_model("iris")

What it does, in order: copies ``pytriton/tritonserver`` (binary, python backend, cache) to a work
folder, adds the python-backend stub built for the runtime venv's Python, puts that Python's LIBDIR
and ``nvidia_pytriton.libs`` on ``LD_LIBRARY_PATH`` and the venv's ``bin`` first on ``PATH`` (the
stub finds its interpreter and site-packages through ``python3``; each stub gets one OpenBLAS
thread, :data:`STUB_THREADS_ENV`), starts the server in its own process group, and waits for
``/v2/health/ready`` with a timeout (a wrong stub hangs rather than exits). On exit it closes its
clients, sends SIGTERM, waits, then SIGKILLs the process group; an ``atexit`` guard does the same if
the caller never exits the context. A caller with other work to do meanwhile stops it with
:meth:`LocalTriton.stop_in_background` and joins the thread it returns.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import secrets
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import source_checkout
from ..errors import ServiceUnavailable, SpecError
from ..workspace import link_or_copy
from ..local.ports import free_port as _free_port

#: the setting that names the local Triton's runtime venv (nvidia-pytriton without deps, numpy<2, onnxruntime)
RUNTIME_ENV = "MODEL_RELEASE_TRITON_RUNTIME"
SETUP_HINT = (f"set ${RUNTIME_ENV} to a venv with nvidia-pytriton==0.7.0 (--no-deps), numpy<2 and onnxruntime; "
              "in a clone, `bash infra/local/setup.sh` (make setup) creates .venv-triton")


def runtime_venv() -> Path:
    """The local Triton's runtime venv: ``$MODEL_RELEASE_TRITON_RUNTIME``, else the ``.venv-triton`` that
    ``make setup`` creates in the clone an editable install imports this package from.

    Raises:
        ServiceUnavailable: neither: an installed package has no default (the message names the setting).
    """
    env = os.environ.get(RUNTIME_ENV)
    if env:
        return Path(env)
    clone = source_checkout()
    if clone is None:
        raise ServiceUnavailable(f"local triton: no runtime venv: ${RUNTIME_ENV} is not set; {SETUP_HINT}", stage="canary")
    return clone / ".venv-triton"


_RUNTIME_PROBE = (
    "import json, sys, sysconfig;"
    "print(json.dumps({'version': '%d.%d' % sys.version_info[:2],"
    " 'libdir': sysconfig.get_config_var('LIBDIR'), 'purelib': sysconfig.get_paths()['purelib']}))"
)


def runtime_facts(runtime_venv: Path) -> dict[str, str]:
    """Python version, LIBDIR and site-packages of the runtime venv, checked to hold pytriton.

    Raises:
        ServiceUnavailable: the venv, its Python or the pytriton wheel is missing.
    """
    python = runtime_venv / "bin" / "python"
    if not python.exists():
        raise ServiceUnavailable(
            f"local triton: the runtime venv {str(runtime_venv)!r} does not exist (no bin/python); {SETUP_HINT}",
            stage="canary",
        )
    try:
        out = subprocess.run([str(python), "-c", _RUNTIME_PROBE], capture_output=True, text=True, timeout=30, check=True)
        facts = json.loads(out.stdout)
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        raise ServiceUnavailable(
            f"local triton: the runtime venv's Python {str(python)!r} does not run ({exc}); {SETUP_HINT}", stage="canary"
        ) from None
    server_dir = Path(facts["purelib"]) / "pytriton" / "tritonserver"
    if not (server_dir / "bin" / "tritonserver").is_file():
        raise ServiceUnavailable(
            f"local triton: the runtime venv {str(runtime_venv)!r} has no pytriton/tritonserver/bin/tritonserver "
            f"(nvidia-pytriton is not installed in it); {SETUP_HINT}",
            stage="canary",
        )
    facts["server_dir"] = str(server_dir)
    return facts


def precompile_models(repository: Path, python: Path) -> list[Path]:
    """Compile each ``<model>/<version>/model.py`` of ``repository`` with ``python`` (the stub's own
    interpreter, so the bytecode's tag and magic are the ones the stub looks for); return the files.

    Triton treats a model whose folder changed since it was loaded as modified, and the python stub
    writes ``<version>/__pycache__`` the first time it imports ``model.py``. Compiled beforehand,
    the stub finds current bytecode and writes nothing, so a later load that checks the model
    (an ensemble's load checks its steps) does not load it again. Best effort: a file that cannot
    be compiled is left to the stub (which reports a syntax error itself), and a failure to run
    ``python`` only costs the second load.
    """
    scripts = sorted(p for p in Path(repository).glob("*/*/model.py") if p.parent.name.isdigit())
    if not scripts:
        return []
    try:
        subprocess.run([str(python), "-m", "py_compile", *map(str, scripts)], capture_output=True, timeout=60, check=False)
    except (subprocess.SubprocessError, OSError):
        pass
    return scripts


def _distinct_ports(count: int) -> list[int]:
    """``count`` free ports, no two equal: each is picked at random, and tritonserver refuses to start
    when two of its endpoints share one ("cannot listen to HTTP requests and GRPC requests at the same
    address and port"), which is not the "address already in use" that :meth:`LocalTriton.start` retries."""
    ports: list[int] = []
    while len(ports) < count:
        port = _free_port()
        if port not in ports:
            ports.append(port)
    return ports


#: Triton's flag that turns auto-complete off: the server loads each config.pbtxt as written
#: (:func:`~.shim.auto_complete_needed` says when a repository can be served so)
NO_AUTO_COMPLETE = "--disable-auto-complete-config"

#: What every python model's stub process gets unless the caller's environment sets it: one OpenBLAS
#: thread. Each instance of a python model is a process of its own, and numpy's OpenBLAS starts a
#: thread per core in each at import, which waits for work busily while a core is free before it
#: sleeps, for BLAS calls that pre- and postprocessing steps do not make. On a quiet 2-core machine
#: a server with 5 python stubs spent 1.45 CPU-s against 2.19 (benchmarks/bench_stub_threads.py).
#: Triton's ``instance_group`` count is how a python model serves in parallel.
STUB_THREADS_ENV = {"OPENBLAS_NUM_THREADS": "1"}


def declared_auto_complete(value: Any, subject: str) -> bool:
    """What a server declares with ``auto_complete`` (a serving fleet's entry, a remote canary's
    connection): a JSON boolean, which callers default to True (Triton's default) when the key is absent.

    Raises:
        SpecError: ``value`` is not a boolean; the message starts with ``subject`` (what holds the
            value, worded to run straight into it: ``"server 'a' has auto_complete"``).
    """
    if not isinstance(value, bool):
        raise SpecError(f"{subject} {value!r}; it must be true (Triton's default) or false (the server runs with "
                        f"{NO_AUTO_COMPLETE}), as a JSON boolean, not a string")
    return value


class LocalTriton:
    """A tritonserver process bound to 127.0.0.1 on free ports, as a context manager.

    Args:
        model_repository: the folder Triton serves (``--model-repository``), or an object-store
            repository Triton reads itself (``s3://HOST:PORT/BUCKET/PREFIX``; credentials from ``env``).
        runtime_venv: the venv holding nvidia-pytriton, numpy<2 and onnxruntime; :func:`runtime_venv`
            (the setting) when None, looked up at :meth:`start`.
        work_dir: where the server's binary, backends and log go; a temporary folder (removed on
            exit) when None.
        ready_timeout: seconds to wait for ``/v2/health/ready`` before giving up.
        model_control: ``explicit`` (load through the repository API), ``none`` or ``poll``.
        log_path: the server log; ``<work_dir>/tritonserver.log`` when None.
        env: extra environment for the server (``AWS_ACCESS_KEY_ID``... for an S3 repository).
        server_args: more tritonserver arguments, after this class's own (for example
            ``["--metrics-config=summary_latencies=true"]`` for the p99 summaries the watch reads).
        precompile: before the server starts, compile every python model's ``model.py`` of a local
            repository with the runtime venv's Python (see :func:`precompile_models`). The stub
            otherwise writes ``__pycache__`` into the version folder as it loads the model, which
            changes the model's folder under Triton: loading an ensemble after its steps then loads
            those steps a second time (seconds per python model on the CPU canary).

    Raises:
        ServiceUnavailable: the runtime venv is missing, the server exits early or is not ready in time
            (the message holds the tail of the server log).
    """

    def __init__(
        self,
        model_repository: Path | str,
        *,
        runtime_venv: Path | None = None,
        work_dir: Path | None = None,
        ready_timeout: float = 60,
        model_control: str = "explicit",
        log_path: Path | None = None,
        exit_timeout: float = 15,
        env: dict[str, str] | None = None,
        server_args: Sequence[str] = (),
        precompile: bool = False,
    ) -> None:
        if model_control not in ("explicit", "none", "poll"):
            raise ValueError(f"model_control {model_control!r} is not valid; valid: explicit, none, poll")
        remote = isinstance(model_repository, str) and model_repository.startswith("s3://")
        self.model_repository: Path | str = model_repository if remote else Path(model_repository).resolve()
        self.extra_env = dict(env or {})
        self.server_args = list(server_args)
        self.precompile = precompile
        self._runtime_venv = Path(runtime_venv) if runtime_venv is not None else None
        self.runtime_venv = Path()  # the venv in use, once start() has looked it up
        self._own_work_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.ready_timeout = ready_timeout
        self.model_control = model_control
        self._log_path = Path(log_path) if log_path is not None else None
        self.exit_timeout = exit_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.http_port = self.grpc_port = self.metrics_port = 0
        self.runtime: dict[str, str] = {}
        self._clients: list[Any] = []
        self._lock = threading.Lock()
        self._shm_prefix = f"model_release_triton_{os.getpid()}_{secrets.token_hex(4)}_"

    # ---- addresses ------------------------------------------------------------------------
    @property
    def http_url(self) -> str:
        """``127.0.0.1:PORT`` of the HTTP endpoint (tritonclient.http's ``url``)."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_path(self) -> Path:
        assert self.work_dir is not None or self._log_path is not None, "the server has not been started"
        return self._log_path or (self.work_dir / "tritonserver.log")  # type: ignore[operator]

    def client(self, **kwargs: Any) -> Any:
        """A ``tritonclient.http.InferenceServerClient`` for this server, closed when the server stops."""
        import tritonclient.http as httpclient

        if self.process is None:
            raise ServiceUnavailable("local triton: client() called before the server was started", stage="canary")
        c = httpclient.InferenceServerClient(self.http_url, **kwargs)
        with self._lock:
            self._clients.append(c)
        return c

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    # ---- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> "LocalTriton":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Lay out the server folder, launch tritonserver and wait until it is ready."""
        if isinstance(self.model_repository, Path) and not self.model_repository.is_dir():
            raise ServiceUnavailable(
                f"local triton: model repository {str(self.model_repository)!r} is not a folder", stage="canary"
            )
        self.runtime_venv = self._runtime_venv or runtime_venv()
        self.runtime = runtime_facts(self.runtime_venv)
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="local-triton-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.precompile and isinstance(self.model_repository, Path):
            precompile_models(self.model_repository, self.runtime_venv / "bin" / "python")
        server_dir = self._lay_out()
        env = self._environment()
        for attempt in range(3):  # a free port can be taken between picking and binding
            self.http_port, self.grpc_port, self.metrics_port = _distinct_ports(3)
            self._launch(server_dir, env)
            try:
                self._wait_ready()
                return
            except ServiceUnavailable:
                port_clash = "address already in use" in self.log_tail(80).lower()
                self.stop(remove_work_dir=False)
                if not port_clash or attempt == 2:
                    if self._log_path is not None:  # else the work folder stays, with the whole server log
                        self._cleanup_work_dir()
                    raise

    def restart(self) -> None:
        """Start the server again on the ports it had, after it exited or was killed (as a kubelet restarts a
        container: clients and agents keep their addresses). A server still running is left as it is.

        Raises:
            ServiceUnavailable: it exits again or is not ready in time (the log's tail in the message).
        """
        if self.work_dir is None or not self.http_port:
            raise ServiceUnavailable("local triton: restart() called before the server was started", stage="canary")
        if self.process is not None and self.process.poll() is None:
            return
        if self.process is not None:
            from ..local.procs import stop_group

            stop_group(self.process, timeout=self.exit_timeout, leader_only=True, kill_rest=True)  # stubs it left behind
        for region in Path("/dev/shm").glob(f"{self._shm_prefix}*"):
            region.unlink(missing_ok=True)
        self._launch(self.work_dir / "tritonserver", self._environment())
        self._wait_ready()

    def _lay_out(self) -> Path:
        assert self.work_dir is not None
        src = Path(self.runtime["server_dir"])
        dst = self.work_dir / "tritonserver"
        stub = src / "python_backend_stubs" / self.runtime["version"] / "triton_python_backend_stub"
        if not stub.is_file():
            stubs = src / "python_backend_stubs"
            have = sorted(p.name for p in stubs.iterdir()) if stubs.is_dir() else []
            raise ServiceUnavailable(
                f"local triton: no python backend stub for Python {self.runtime['version']} in {str(src)!r} "
                f"(have: {have}); recreate the runtime venv with one of those Pythons ({SETUP_HINT})",
                stage="canary",
            )
        for sub in ("bin", "backends", "caches"):
            for f in (src / sub).rglob("*"):
                if f.is_file() and not (dst / f.relative_to(src)).exists():
                    link_or_copy(f, dst / f.relative_to(src))
        target = dst / "backends" / "python" / "triton_python_backend_stub"
        if not target.exists():
            link_or_copy(stub, target)
        return dst

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        libs = [self.runtime["libdir"], str(Path(self.runtime["purelib"]) / "nvidia_pytriton.libs")]
        if env.get("LD_LIBRARY_PATH"):
            libs.append(env["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
        env["PATH"] = os.pathsep.join([str(self.runtime_venv.resolve() / "bin"), env.get("PATH", "")])
        env["VIRTUAL_ENV"] = str(self.runtime_venv.resolve())
        for var, value in STUB_THREADS_ENV.items():
            env.setdefault(var, value)
        env.update(self.extra_env)
        for var in ("PYTHONPATH", "PYTHONHOME"):  # the pipeline's must not leak into the stub
            env.pop(var, None)
        return env

    def _launch(self, server_dir: Path, env: dict[str, str]) -> None:
        cmd = [
            str(server_dir / "bin" / "tritonserver"),
            f"--model-repository={self.model_repository}",
            f"--model-control-mode={self.model_control}",
            f"--backend-directory={server_dir / 'backends'}",
            f"--cache-directory={server_dir / 'caches'}",
            "--http-address=127.0.0.1",
            f"--http-port={self.http_port}",
            "--grpc-address=127.0.0.1",
            f"--grpc-port={self.grpc_port}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            "--allow-gpu-metrics=false",
            f"--exit-timeout-secs={max(1, int(self.exit_timeout) - 2)}",
            "--log-verbose=0",
            # python stubs' shared memory under a name of our own, so stop() can remove what a killed stub leaves
            f"--backend-config=python,shm-region-prefix-name={self._shm_prefix}",
            *self.server_args,
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                cmd, cwd=self.work_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        atexit.register(self._atexit_stop)

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout
        url = f"http://{self.http_url}/v2/health/ready"
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServiceUnavailable(
                    f"local triton: tritonserver exited with code {code} before it was ready "
                    f"(repository {str(self.model_repository)!r}); the server log {str(self.log_path)!r} ends with:\n"
                    f"{self.log_tail()}",
                    stage="canary",
                )
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ServiceUnavailable(
                    f"local triton: tritonserver (pid {self.process.pid}) was not ready at {url} within "
                    f"{self.ready_timeout:g} s (a python backend stub that does not match the runtime Python hangs "
                    f"instead of exiting; raise ready_timeout only if the models are slow to load); "
                    f"the server log {str(self.log_path)!r} ends with:\n{self.log_tail()}",
                    stage="canary",
                )
            time.sleep(0.1)

    def stop(self, *, remove_work_dir: bool = True) -> None:
        """Close clients, SIGTERM the server, wait, then SIGKILL its process group. Idempotent."""
        with self._lock:
            clients, self._clients = self._clients, []
        for c in clients:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        proc = self.process
        if proc is not None:
            from ..local.procs import stop_group

            if proc.poll() is None and self.model_control == "explicit":
                self._unload_everything(min(5.0, self.exit_timeout / 2))

            # start_new_session: the server leads its own group. SIGTERM to the server alone (it
            # stops its stubs), then SIGKILL the group: the server if it ignored SIGTERM, and any
            # python stub it left behind, until they are gone
            stop_group(proc, timeout=self.exit_timeout, leader_only=True, kill_rest=True)
            atexit.unregister(self._atexit_stop)
            for region in Path("/dev/shm").glob(f"{self._shm_prefix}*"):
                region.unlink(missing_ok=True)
        if remove_work_dir:
            self._cleanup_work_dir()

    def _unload_everything(self, budget_s: float) -> None:
        """Unload every model through the repository API and wait (polling every 20 ms) until none is live.

        On SIGTERM Triton unloads its models too, but it checks whether they are gone once a second
        and exits only at the check after the last: up to a second after its python stubs have ended
        (the example repository's 7 models stopped in 3.4-4.0 s, and in 2.4-2.6 s unloaded first).
        Unloaded first, the server finds nothing live at its first check and exits at once. Best
        effort, within ``budget_s``: a server that does not answer, or still has a model live, gets SIGTERM as before.
        """
        base = f"http://{self.http_url}/v2/repository"
        deadline = time.monotonic() + budget_s

        def post(path: str) -> bytes:  # one request: at most a second, and not far past the budget
            request = urllib.request.Request(base + path, data=b"{}", method="POST")
            with urllib.request.urlopen(request, timeout=max(0.1, min(1.0, deadline - time.monotonic()))) as resp:
                return resp.read()

        def live() -> list[str] | None:
            try:
                index = json.loads(post("/index") or b"[]")
            except (urllib.error.URLError, OSError, ValueError):
                return None
            return sorted({m["name"] for m in index if m.get("state") in ("READY", "LOADING", "UNLOADING")})

        names = live()
        if not names:
            return
        for name in names:
            try:
                post(f"/models/{urllib.parse.quote(name, safe='')}/unload")  # answered once the unload has started
            except (urllib.error.URLError, OSError):
                pass
        while time.monotonic() < deadline:
            left = live()
            if not left:  # none live, or the server stopped answering: SIGTERM either way
                return
            time.sleep(0.02)

    def stop_in_background(self, *, remove_work_dir: bool = True) -> threading.Thread:
        """Start :meth:`stop` on a thread of its own and return it; the caller joins it before it returns.

        Triton's own shutdown takes seconds after SIGTERM (it unloads every model, waits for the
        python stubs to exit and checks once a second), while a caller that has read everything it
        needs from the server has other work to do meanwhile (judging, the report). The thread is not
        a daemon: the interpreter waits for it, and :meth:`stop` reaps the server and kills what is
        left of its process group exactly as in the foreground.
        """
        thread = threading.Thread(target=self.stop, kwargs={"remove_work_dir": remove_work_dir},
                                  name=f"local-triton-stop-{self.pid}", daemon=False)
        thread.start()
        return thread

    def _cleanup_work_dir(self) -> None:
        if self._own_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def _atexit_stop(self) -> None:
        try:
            self.stop()
        except Exception:  # noqa: BLE001 - interpreter is exiting
            pass

    def __repr__(self) -> str:
        return f"LocalTriton(repository={str(self.model_repository)!r}, http={self.http_url}, pid={self.pid})"
