"""Small releases promoted to a local store, a fleet of local serving Tritons, a bounded request loop.

Releases are built with the product's own assemble (classifier shape: an ONNX leaf, a python
postprocess, the entry ensemble) and promoted with the store's own promote, so the roll-out is
tested on exactly what a release holds. Each release's expected probabilities are computed here
with onnxruntime on its own ONNX file: a response that matches neither release row by row, or
matches one release on some rows and another on others, is a mix.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from model_release.triton.local import LocalTriton
from model_release.repository.assemble import assemble
from model_release.repository.manifest import finalize_manifest
from model_release.serve.fleet import Fleet, Server
from model_release.serve.local_server import SERVING_ARGS
from model_release.store.model_store import ModelStore, open_store
from model_release.store.promote import promote
from model_release.workspace import Workspace

from ..repository.support import INPUT, export_result, intake_result, iris, make_spec, sklearn_onnx

NAME = "iris"
CHANNEL = "production"
LABELS = ["setosa", "versicolor", "virginica"]


@dataclass
class Release:
    release_id: str
    expected: np.ndarray  # probabilities for every iris row
    release_dir: Path

    def promote(self, store: ModelStore, channel: str = CHANNEL) -> None:
        promote(self.release_dir, self.release_id, store, channel)


def build_release(tmp: Path, store: ModelStore, kind: str, release_id: str, *, channel: str = CHANNEL,
                  promote_it: bool = True, tweak: Callable[[Path], None] | None = None,
                  cascade_large: str | None = None, threshold: float = 0.9, footprint: int | None = None) -> Release:
    """Assemble a classifier release from a ``kind`` iris model (tests/repository/support.py kinds) and promote it.

    ``tweak(models_dir)`` changes the assembled models before the manifest is re-hashed (a model that
    refuses to load on some servers, a slow first request); ``footprint`` is recorded as the canary's
    memory figure (what a side-by-side roll-out checks each server's free memory against).
    """
    import onnxruntime as ort

    onnx_path = tmp / f"{release_id}-onnx" / "model.onnx"
    sklearn_onnx(onnx_path, kind)
    np.savez(onnx_path.parent / "golden.npz", **{INPUT: iris()[0]})  # assemble's warm-up samples come from it
    if cascade_large is None:
        spec = make_spec(NAME, shape="classifier", labels=LABELS, max_batch_size=16)
    else:  # a BLS router over the release (small) and a fixed large model
        spec = make_spec(NAME, shape="cascade", max_batch_size=16, cascade={"large": cascade_large, "threshold": threshold})
    result = assemble(spec, intake_result(), export_result(onnx_path), Workspace(release_id, tmp / release_id))
    if tweak is not None:
        tweak(Path(result.repository_dir))
    if tweak is not None or footprint is not None:
        memory = {"footprint_bytes": footprint, "how": "set by the test"} if footprint is not None else None
        finalize_manifest(result.manifest_path, Path(result.manifest_path).parent,
                          canary={"passed": True, "figures": {"memory": memory}})
    x, _ = iris()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, {INPUT: x})))["probabilities"]
    if cascade_large is not None:
        large = ort.InferenceSession(cascade_large, providers=["CPUExecutionProvider"])
        big = dict(zip([o.name for o in large.get_outputs()], large.run(None, {INPUT: x})))["probabilities"]
        unsure = expected.max(axis=1) < threshold
        expected = np.where(unsure[:, None], big, expected)
    release = Release(release_id, np.asarray(expected, dtype=np.float32), Path(result.manifest_path).parent)
    if promote_it:
        release.promote(store, channel)
    return release


def local_store(tmp: Path) -> ModelStore:
    return open_store((tmp / "store").resolve().as_uri())


class LiveFleet:
    """Serving Tritons in explicit mode (as the local stack runs them: ``SERVING_ARGS``), each on its own repository
    with its agent beside it (a thread of this process, its readiness endpoint on 127.0.0.1), following ``channel``
    of ``store``. Each agent serves the channel's current release by itself: :meth:`wait_ready`."""

    def __init__(self, tmp: Path, store: ModelStore, channel: str = CHANNEL) -> None:
        self.tmp, self.store, self.channel = Path(tmp), store, channel
        self.tritons: dict[str, LocalTriton] = {}
        self.agents: dict[str, Any] = {}
        self.servers: dict[str, Server] = {}
        self._stops: list[threading.Event] = []
        self._threads: list[threading.Thread] = []
        self._endpoints: list[Any] = []

    @property
    def fleet(self) -> Fleet:
        return Fleet(self.channel, tuple(self.servers.values()))

    def add(self, name: str, *, env: dict[str, str] | None = None, memory_budget: int | None = None,
            metrics_url: str | None = None) -> Server:
        """Start a Triton and its agent (``metrics_url``: what the agent reports instead of the real one)."""
        from model_release.serve.agent import AgentConfig, local_agent
        from model_release.serve.agent_http import ReadinessServer

        repo = self.tmp / name / "models"
        repo.mkdir(parents=True, exist_ok=True)
        triton = LocalTriton(repo, work_dir=self.tmp / name / "server", ready_timeout=120, env=env or {},
                             server_args=SERVING_ARGS)
        triton.start()
        self.tritons[name] = triton
        config = AgentConfig(name, self.channel, triton.http_url, metrics_url or triton.metrics_url, auto_complete=False,
                             shim=True, poll_s=0.2, heartbeat_s=1.0, memory_budget=memory_budget, drain_grace_s=0.5)
        agent = local_agent(config, self.store, triton.grpc_url, repo, self.tmp / name / "agent-cache")
        self._endpoints.append(ReadinessServer(agent))
        stop = threading.Event()
        thread = threading.Thread(target=agent.run, args=(stop,), name=f"agent-{name}", daemon=True)
        thread.start()
        self.agents[name], self._stops, self._threads = agent, [*self._stops, stop], [*self._threads, thread]
        self.servers[name] = Server(name, triton.http_url, config.metrics_url, agent.ready_url, auto_complete=False)
        return self.servers[name]

    def wait_ready(self, names: list[str] | None = None, timeout_s: float = 120) -> None:
        """Wait until the agents of ``names`` (all) report ready (each serves the channel's current release)."""
        deadline = time.monotonic() + timeout_s
        for name in names or list(self.agents):
            while not self.agents[name].ready:
                assert time.monotonic() < deadline, f"agent {name} not ready in {timeout_s:g} s: {self.agents[name].state}"
                time.sleep(0.05)

    def close(self) -> None:
        for stop in self._stops:
            stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        for endpoint in self._endpoints:
            endpoint.close()
        for agent in self.agents.values():
            agent.control.close()
        for triton in self.tritons.values():
            triton.stop()


@contextlib.contextmanager
def local_fleet(tmp: Path, store: ModelStore, count: int = 2, channel: str = CHANNEL,
                envs: list[dict[str, str]] | None = None, ready: bool = True):
    """``count`` serving Tritons with agents (:class:`LiveFleet`), each with ``envs[i]``; ready unless ``ready`` is false."""
    live = LiveFleet(tmp, store, channel)
    try:
        for i in range(count):
            live.add(f"serve-{i + 1}", env=(envs or [{}] * count)[i])
        if ready:
            live.wait_ready()
        yield live
    finally:
        live.close()


def fast_options(**kw: Any) -> Any:
    """Roll-out options for live tests: the steps of ``serve.rollout`` as given, the roll-out polling its agents often."""
    from model_release.serve.rollout import RolloutOptions
    from model_release.spec.serve import RolloutSpec

    rollout = {k: kw.pop(k) for k in list(kw) if k in RolloutSpec.model_fields}
    return RolloutOptions(spec=RolloutSpec(**rollout), poll_s=0.1, **kw)


@dataclass
class Traffic:
    """What a request loop saw: responses by the release they matched, failures, mixes."""

    by_release: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    mixed: list[str] = field(default_factory=list)
    sequence: list[tuple[str, str]] = field(default_factory=list)  # (server, release) in order

    @property
    def total(self) -> int:
        return sum(self.by_release.values()) + len(self.failures) + len(self.mixed)


def classify(probabilities: np.ndarray, rows: np.ndarray, releases: list[Release], atol: float = 1e-5) -> str | None:
    """The one release whose expected probabilities match every row; None for a mix or no match."""
    hits = [r.release_id for r in releases if np.allclose(probabilities, r.expected[rows], atol=atol)]
    return hits[0] if len(hits) == 1 else None


class _Loop:
    """Threads that send requests until the ``with`` block ends; what they saw is in ``traffic``."""

    def __init__(self) -> None:
        self.traffic = Traffic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> "Any":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)

    def count(self) -> int:
        with self._lock:
            return self.traffic.total

    def wait_for(self, more: int, timeout_s: float = 60) -> None:
        """Wait until ``more`` further requests were answered (traffic before/after a step)."""
        target = self.count() + more
        deadline = time.monotonic() + timeout_s
        while self.count() < target and time.monotonic() < deadline:
            time.sleep(0.05)


class RequestLoop(_Loop):
    """Threads sending steady requests to each server's entry model until stopped (bounded by ``max_s``)."""

    def __init__(self, fleet: Fleet, releases: list[Release], *, rows: int = 8, max_s: float = 240) -> None:
        super().__init__()
        self.fleet, self.releases, self.rows, self.max_s = fleet, releases, rows, max_s
        self._threads = [threading.Thread(target=self._run, args=(s,), daemon=True) for s in fleet.servers]

    def _run(self, server: Server) -> None:
        import tritonclient.http as httpclient

        x, _ = iris()
        client = httpclient.InferenceServerClient(server.url, network_timeout=60)
        deadline = time.monotonic() + self.max_s
        i = 0
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                rows = (np.arange(self.rows) + i * self.rows) % len(x)
                i += 1
                tensor = httpclient.InferInput(INPUT, [self.rows, 4], "FP32")
                tensor.set_data_from_numpy(x[rows])
                try:
                    result = client.infer(NAME, [tensor])  # every output: a subset fails on 2.51 (see the report)
                except Exception as exc:  # noqa: BLE001 - every failure is counted
                    with self._lock:
                        self.traffic.failures.append(f"{server.name}: {exc}")
                    continue
                release = classify(result.as_numpy("probabilities"), rows, self.releases)
                with self._lock:
                    if release is None:
                        self.traffic.mixed.append(f"{server.name}: rows {rows.tolist()}")
                    else:
                        self.traffic.by_release[release] = self.traffic.by_release.get(release, 0) + 1
                        self.traffic.sequence.append((server.name, release))
        finally:
            client.close()


class BalancedLoop(_Loop):
    """Traffic as a load balancer sends it: only to servers whose agent reports ready (each agent's readiness
    endpoint read every ``probe_s``, as a readiness probe is), round robin; a request whose connection fails
    (the server died under it) is sent once more to another ready server, as a balancer retries a connect
    failure. Every answer is classified by release; a request that fails on its retry too is a failure."""

    def __init__(self, fleet_of: Callable[[], Fleet], releases: list[Release], *, threads: int = 2, rows: int = 8,
                 probe_s: float = 0.05, max_s: float = 240, pause_s: float = 0.0) -> None:
        super().__init__()
        self.fleet_of, self.releases, self.rows, self.probe_s, self.max_s = fleet_of, releases, rows, probe_s, max_s
        self.pause_s = pause_s  # between one thread's requests: steady traffic that leaves the machine some room
        self.retried: list[str] = []
        self.latencies: list[tuple[float, float]] = []  # (start, seconds) of every answered request
        self.ready: list[Server] = []
        self._next = 0
        self._threads = [threading.Thread(target=self._probe, daemon=True)]
        self._threads += [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> "BalancedLoop":
        self._probe_once()  # the first requests go to the servers ready now
        return super().__enter__()

    def _probe_once(self) -> None:
        import urllib.request

        ready = []
        for server in self.fleet_of().servers:
            try:
                with urllib.request.urlopen(str(server.ready_url), timeout=1) as resp:
                    if resp.status == 200:
                        ready.append(server)
            except OSError:
                pass
        with self._lock:
            self.ready = ready

    def _probe(self) -> None:
        while not self._stop.wait(self.probe_s):
            self._probe_once()

    def _pick(self, avoid: str | None = None) -> Server | None:
        with self._lock:
            choices = [s for s in self.ready if s.name != avoid]
            if not choices:
                return None
            self._next += 1
            return choices[self._next % len(choices)]

    def _run(self) -> None:
        import tritonclient.http as httpclient

        x, _ = iris()
        clients: dict[str, Any] = {}
        deadline, i = time.monotonic() + self.max_s, 0
        while not self._stop.wait(self.pause_s) and time.monotonic() < deadline:
            rows = (np.arange(self.rows) + i * self.rows) % len(x)
            i += 1
            server, answer, error = self._pick(), None, None
            for attempt in range(2):
                if server is None:
                    break
                client = clients.get(server.name) or clients.setdefault(
                    server.name, httpclient.InferenceServerClient(server.url, network_timeout=60))
                tensor = httpclient.InferInput(INPUT, [self.rows, 4], "FP32")
                tensor.set_data_from_numpy(x[rows])
                t0 = time.perf_counter()
                try:
                    answer = client.infer(NAME, [tensor])
                    self.latencies.append((t0, time.perf_counter() - t0))
                    break
                except Exception as exc:  # noqa: BLE001 - every failure is counted
                    error = f"{server.name}: {exc}"
                    clients.pop(server.name).close()
                    if attempt == 0 and _connection_failed(exc):
                        with self._lock:
                            self.retried.append(error)
                        server = self._pick(avoid=server.name)
                        continue
                    break
            if server is None and answer is None:
                time.sleep(0.01)  # no server ready: nothing is sent (a balancer answers 503 itself)
                continue
            with self._lock:
                if answer is None:
                    self.traffic.failures.append(str(error))
                    continue
                release = classify(answer.as_numpy("probabilities"), rows, self.releases)
                if release is None:
                    self.traffic.mixed.append(f"{server.name}: rows {rows.tolist()}")
                else:
                    self.traffic.by_release[release] = self.traffic.by_release.get(release, 0) + 1
                    self.traffic.sequence.append((server.name, release))
        for client in clients.values():
            client.close()


def _connection_failed(exc: BaseException) -> bool:
    """Whether a request failed at the connection (the server died), not with an answer."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(w in text for w in ("connection", "refused", "reset", "broken pipe", "eof", "closed"))


def switches(traffic: Traffic, server: str) -> list[str]:
    """The releases one server answered with, in order, with repeats collapsed."""
    out: list[str] = []
    for name, release in traffic.sequence:
        if name == server and (not out or out[-1] != release):
            out.append(release)
    return out


POSTPROCESS = "iris_postprocess"
INITIALIZE = "    def initialize(self, args):\n"


def edit_postprocess(models: Path, anchor: str, replacement: str) -> None:
    """Replace the first ``anchor`` line of the postprocess's model.py; refuse a template without it,
    so a tweak can never silently change nothing."""
    path = models / POSTPROCESS / "1" / "model.py"
    text = path.read_text()
    assert anchor in text, f"{path} has no line {anchor!r} to tweak"
    path.write_text(text.replace(anchor, replacement, 1))


def refuse_where(variable: str) -> Callable[[Path], None]:
    """A tweak: the postprocess refuses to load on a server whose environment sets ``variable``."""
    return lambda models: edit_postprocess(models, INITIALIZE, INITIALIZE + (
        f"        if os.environ.get({variable!r}):\n"
        f"            raise RuntimeError('postprocess refuses to load here: {variable} is set')\n"))


def completes_itself(models: Path) -> None:
    """A tweak: the postprocess defines ``auto_complete_config`` (it sets nothing the config lacks)."""
    edit_postprocess(models, INITIALIZE, (
        "    @staticmethod\n"
        "    def auto_complete_config(auto_complete_model_config):\n"
        "        return auto_complete_model_config\n\n") + INITIALIZE)


def slow_load(seconds: float) -> Callable[[Path], None]:
    """A tweak: the postprocess's ``initialize`` sleeps ``seconds`` (a model that takes a while to load).

    A test that must act while a roll-out is between copying a release's leaves and switching its
    entry holds that window open with it, instead of hoping the machine is slower than the load."""
    return lambda models: edit_postprocess(models, INITIALIZE, INITIALIZE + f"        import time\n        time.sleep({seconds})\n")


def slow_first_request(seconds: float, *, warmup: bool) -> Callable[[Path], None]:
    """A tweak: the postprocess's first execute sleeps ``seconds``; with ``warmup``, its config has model_warmup."""

    def tweak(models: Path) -> None:
        from model_release.repository.config import read_config, write_config

        execute = "    def execute(self, requests):\n"
        edit_postprocess(models, execute, execute + (
            "        if not getattr(self, '_warm', False):\n"
            "            import time\n"
            f"            time.sleep({seconds})\n"
            "            self._warm = True\n"))
        if warmup:
            config = read_config(models / POSTPROCESS / "config.pbtxt")
            sample = config.model_warmup.add(name="zeros", batch_size=1)
            tensor = sample.inputs["probabilities"]
            tensor.data_type = config.input[0].data_type
            tensor.dims.extend(config.input[0].dims)
            tensor.zero_data = True
            write_config(models / POSTPROCESS / "config.pbtxt", config)

    return tweak
