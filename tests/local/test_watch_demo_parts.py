"""The demo's fourth release, piece by piece: a model that is release 3 on the golden set and refuses
production's millimetres, its spec, and a traffic loop that stays on the loopback and stops by itself."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from model_release.local.demo import fit_iris
from model_release.local.traffic import TrafficLoop
from model_release.local.watch_demo import (PROBE_FILE, TABLE_CM, production_rows, traffic_bodies, with_petal_table,
                                            write_watched_spec)
from model_release.serve.fleet import Fleet, Server
from model_release.spec import load_spec

SHIPPED = Path(__file__).resolve().parents[2] / "releases" / "iris.yaml"


def sessions():
    import onnxruntime as ort
    from skl2onnx import to_onnx

    fitted, x, _ = fit_iris(c=10.0)
    plain = to_onnx(fitted, x[:1], options={"zipmap": False}, target_opset=17)
    tabled = with_petal_table(to_onnx(fitted, x[:1], options={"zipmap": False}, target_opset=17))
    return (ort.InferenceSession(plain.SerializeToString(), providers=["CPUExecutionProvider"]),
            ort.InferenceSession(tabled.SerializeToString(), providers=["CPUExecutionProvider"]), x)


def test_the_petal_table_is_release_3_on_every_golden_row_and_refuses_millimetres() -> None:
    plain, tabled, x = sessions()
    assert [o.name for o in tabled.get_outputs()] == ["label", "probabilities"]
    for a, b in zip(plain.run(None, {"X": x}), tabled.run(None, {"X": x})):
        np.testing.assert_array_equal(a, b)  # bit for bit: the canary cannot tell them apart
    with pytest.raises(Exception, match="indices element out of data bounds"):
        tabled.run(None, {"X": production_rows(x)})


def test_the_table_ends_just_below_its_size_in_centimetres() -> None:
    _, tabled, x = sessions()
    row = x[:1].copy()
    row[0, 2] = TABLE_CM - 0.01  # just inside: the last weight
    tabled.run(None, {"X": row})
    row[0, 2] = TABLE_CM  # just outside
    with pytest.raises(Exception, match="out of data bounds"):
        tabled.run(None, {"X": row})


def test_production_rows_lie_outside_the_golden_range_and_traffic_mixes_them_in() -> None:
    _, _, x = sessions()
    odd = production_rows(x)
    assert odd[:, 2].min() >= TABLE_CM > x[:, 2].max()
    bodies = traffic_bodies("input", x)
    singles = [b for b in bodies if b["inputs"][0]["shape"][0] == 1]
    assert 0 < len(singles) < len(bodies) / 5, "mostly golden-like batches, a share of millimetres"


def test_the_watched_spec_is_the_shipped_one_with_a_short_watch_and_a_production_probe(tmp_path) -> None:
    path = write_watched_spec(SHIPPED, tmp_path / "spec")
    spec, shipped = load_spec(path), load_spec(SHIPPED)
    assert spec.serve.watch.enabled and spec.serve.watch.bake_s <= 5 and spec.serve.watch.budget_s <= 60
    assert (spec.promote, spec.canary, spec.repository) == (shipped.promote, shipped.canary, shipped.repository)
    bodies = json.loads((tmp_path / "spec" / PROBE_FILE).read_text())
    assert spec.serve.watch.probe.rows == PROBE_FILE and bodies[0]["inputs"][0]["name"] == "input"
    assert min(b["inputs"][0]["data"][2] for b in bodies) >= TABLE_CM


class _Ok(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args) -> None:
        pass


def test_the_traffic_loop_stops_by_itself_at_its_request_bound() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"127.0.0.1:{server.server_address[1]}"
        fleet = Fleet("production", (Server("a", url), Server("b", url)))
        loop = TrafficLoop(fleet, "iris", [{"inputs": []}], max_requests=25, max_s=60, pause_s=0)
        with loop:
            for _ in range(600):
                if loop.total >= 25:
                    break
                threading.Event().wait(0.05)
            threading.Event().wait(0.3)
        assert loop.total == 25 and sum(t.failed for t in loop.by_server.values()) == 0
    finally:
        server.shutdown()


def test_the_traffic_loop_sends_to_the_loopback_only() -> None:
    fleet = Fleet("production", (Server("a", "127.0.0.1:8000"), Server("b", "10.0.0.7:8000")))
    with pytest.raises(ValueError, match=r"loopback only; servers \['10.0.0.7:8000'\]"):
        TrafficLoop(fleet, "iris", [{"inputs": []}])
