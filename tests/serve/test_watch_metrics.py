"""The watch's reader and probe against a real local Triton 2.51 with its metrics and p99 summaries on.

Two python models, two versions each: ``flaky`` (version 2 answers an error response for a negative
input, which Triton counts as a success, server#7713, and raises for an input over 1000, which it
counts as a failure) and ``slow`` (version 2 sleeps 40 ms a request, version 1 none). One server
serves both versions, so a watch can read version 2 as the new release and version 1 as the old.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from model_release.errors import ServiceUnavailable
from model_release.local.ports import free_port
from model_release.serve.local_server import SERVING_ARGS
from model_release.serve.watch import (
    FAIL, Clock, HttpProbe, MetricsReader, Release, WatchedServer, WatchLimit, WatchSpec, watch_wave,
)
from model_release.serve.watch.figures import model_delta
from model_release.triton.local import LocalTriton

pytestmark = pytest.mark.integration

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
version_policy: {{ all {{ }} }}
input [ {{ name: "X", data_type: TYPE_FP32, dims: [ -1 ] }} ]
output [ {{ name: "Y", data_type: TYPE_FP32, dims: [ -1 ] }} ]
instance_group [ {{ count: 1, kind: KIND_CPU }} ]
"""

MODEL = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils

BAD, SLEEP_S = {bad}, {sleep_s}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            time.sleep(SLEEP_S)
            if BAD and (x > 1000).any():
                raise RuntimeError("input over 1000")
            if BAD and (x < 0).any():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input")))
                continue
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * 2).astype(np.float32))]))
        return responses
"""


def _repository(root: Path) -> Path:
    for name, versions in {"flaky": {1: (False, 0), 2: (True, 0)}, "slow": {1: (False, 0), 2: (False, 0.04)}}.items():
        (root / name).mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(CONFIG.format(name=name))
        for version, (bad, sleep_s) in versions.items():
            (root / name / str(version)).mkdir()
            (root / name / str(version) / "model.py").write_text(MODEL.format(bad=bad, sleep_s=sleep_s))
    return root


def _body(value: float) -> dict:
    return {"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [value]}]}


def _infer(triton: LocalTriton, model: str, version: int, value: float) -> int:
    url = f"http://{triton.http_url}/v2/models/{model}/versions/{version}/infer"
    request = urllib.request.Request(url, data=json.dumps(_body(value)).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def triton(tmp_path_factory):
    root = tmp_path_factory.mktemp("watch")
    with LocalTriton(_repository(root / "repository"), work_dir=root / "server",
                     server_args=SERVING_ARGS) as server:  # as the local stack's serving Tritons run
        client = server.client()
        client.load_model("flaky")
        client.load_model("slow")
        yield server


def _server(triton: LocalTriton, name: str = "serve-1") -> WatchedServer:
    return WatchedServer(name, triton.metrics_url, triton.http_url)


def _read(triton: LocalTriton):
    return MetricsReader(time.monotonic)(_server(triton))


def _settled_delta(triton: LocalTriton, name: str, version: int, before, requests: int):
    """The counters' change once all ``requests`` are counted: Triton counts a request when it releases it,
    which can be a scrape after the client has its response (seen under load: 3 of 4 counted)."""
    deadline = time.monotonic() + 10
    while True:
        d, reset = model_delta(before, _read(triton).model(name, version))
        if d["success"] + d["failure"] >= requests or time.monotonic() > deadline:
            return d, reset
        time.sleep(0.1)


def test_the_reader_sees_the_counters_and_an_error_response_counted_as_a_success(triton):
    before = _read(triton).model("flaky", 2)
    codes = [_infer(triton, "flaky", 2, v) for v in [1.0] * 10 + [2000.0] * 3 + [-1.0] * 2]
    assert codes.count(200) == 10 and codes.count(500) == 5  # Triton answers both kinds of error with 500
    d, reset = _settled_delta(triton, "flaky", 2, before, 15)
    assert not reset
    assert d["failure"] == 3  # the raised exceptions only
    assert d["success"] == 12  # the two error responses are "successes" (server#7713)
    assert d["request_us"] > 0 and d["queue_us"] > 0


def test_the_summary_p99_is_per_version(triton):
    for _ in range(8):
        assert _infer(triton, "slow", 1, 1.0) == 200
        assert _infer(triton, "slow", 2, 1.0) == 200
    snap = _read(triton)
    fast, slow = snap.model("slow", 1).p99_us, snap.model("slow", 2).p99_us
    assert not math.isnan(fast) and slow >= 40000 and fast < slow


def test_a_reload_resets_the_counters_and_the_delta_counts_from_zero(triton):
    client = triton.client()
    for _ in range(5):
        _infer(triton, "slow", 1, 1.0)
    before = _read(triton).model("slow", 1)
    client.unload_model("slow")
    deadline = time.monotonic() + 30  # not ready at once, but UNLOADING for about 1 s: wait until it is gone
    while time.monotonic() < deadline and any(
        m["name"] == "slow" and m.get("state") != "UNAVAILABLE" for m in client.get_model_repository_index()
    ):
        time.sleep(0.1)
    client.load_model("slow")
    _infer(triton, "slow", 1, 1.0)
    after = _read(triton).model("slow", 1)
    deadline = time.monotonic() + 10  # the duration counter can show the request a scrape before the success one
    while after.success == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        after = _read(triton).model("slow", 1)
    assert after.success == 1 < before.success  # restarted
    d, reset = model_delta(before, after)
    assert reset and d["success"] == 1 and min(d.values()) >= 0


def test_the_probe_catches_a_python_step_s_error_response_while_triton_s_failure_counter_stays_0(triton):
    before = _read(triton).model("flaky", 2)
    result = HttpProbe([_body(-1.0)], requests=4, timeout_s=10)(_server(triton), Release("v2", "flaky", 2))
    assert result.sent == 4 and result.errors == 4 and result.first_error == "HTTP 500: negative input"
    d, _ = _settled_delta(triton, "flaky", 2, before, 4)
    assert d["failure"] == 0 and d["success"] == 4


def test_a_real_watch_rolls_back_a_release_whose_errors_only_the_probe_sees(triton):
    stop = threading.Event()

    def traffic() -> None:  # bounded: at most 2,000 requests, loopback only
        for _ in range(1000):
            if stop.is_set():
                return
            _infer(triton, "flaky", 1, 1.0)
            _infer(triton, "flaky", 2, 1.0)

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    try:
        # times off: v1 and v2 are the same code, and sub-10 ms p99s on a shared 2-core machine differ 2x
        off = WatchLimit()
        spec = WatchSpec(bake_s=4, interval_s=1, min_requests=5, failures=2, settle=2, budget_s=10,
                         mean_request_us=off, mean_queue_us=off, p99_us=off)
        verdict = watch_wave(
            [_server(triton, "serve-new")], [_server(triton, "serve-old")],
            Release("flaky v2", "flaky", 2), Release("flaky v1", "flaky", 1), spec,
            clock=Clock(), sampler=MetricsReader(time.monotonic), probe=HttpProbe([_body(-3.0)], requests=2),
        )
    finally:
        stop.set()
        thread.join(timeout=30)
    assert verdict.outcome == FAIL, verdict.as_dict()
    assert verdict.sentence == "probe error rate 100.0% against 0.0%, limit 1.0%"
    assert all(i.failures == 0 for m in verdict.measurements for i in m.new)  # Triton saw no failure
    assert verdict.elapsed_s < spec.bake_s


def test_an_unreachable_metrics_endpoint_names_the_server(triton):
    gone = WatchedServer("serve-9", f"http://127.0.0.1:{free_port()}/metrics")
    with pytest.raises(ServiceUnavailable, match=r"watch: the metrics endpoint of server 'serve-9' \(http://127"):
        MetricsReader(time.monotonic, timeout_s=2)(gone)
