"""The local fleet's serving process (what `model-release up` supervises): its Triton, its agent, its supervision.

It starts a Triton and the agent beside it; the agent serves the channel's current release before it
reports ready; a SIGKILLed Triton is started again on the same ports and the agent is not ready until
the release is loaded again; SIGTERM stops both.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from model_release.serve.local_server import read_info

from .support import CHANNEL, build_release

pytestmark = pytest.mark.integration
REPO_ROOT = Path(__file__).resolve().parents[2]


def _status(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _wait(predicate, timeout_s: float = 120, step: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while not (got := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(step)
    return got


def test_a_serving_process_serves_the_release_restarts_a_killed_triton_and_stops_on_sigterm(tmp_path, store):
    release = build_release(tmp_path, store, "lr", "iris-r1")
    info = tmp_path / "serve-1" / "server.json"
    proc = subprocess.Popen([sys.executable, "-m", "model_release.serve.local_server", "--name", "serve-1",
                             "--repository", str(tmp_path / "serve-1" / "models"), "--info", str(info),
                             "--channel", CHANNEL, "--store", store.uri, "--poll", "0.2"],
                            cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait(lambda: info.is_file() or proc.poll() is not None)
        assert info.is_file(), proc.stderr.read().decode()
        doc = json.loads(info.read_text())
        assert doc["name"] == "serve-1" and doc["url"].startswith("127.0.0.1:") and doc["ready_url"].endswith("/ready")
        # it runs without auto-complete and says so, as its agent reports it to the roll-out
        assert doc["auto_complete"] is False and read_info(info).auto_complete is False
        options = (tmp_path / "serve-1" / "server" / "tritonserver.log").read_text()
        assert re.search(r"^\| strict_model_config +\| 1 ", options, re.M), options[-3000:]
        with urllib.request.urlopen(doc["metrics_url"], timeout=10) as resp:
            assert resp.status == 200 and b"nv_cpu_memory_total_bytes" in resp.read()
        ready = _wait(lambda: (s := _status(doc["ready_url"]))[0] == 200 and s)
        assert ready[1]["release"] == release.release_id
        state = _status(doc["ready_url"].replace("/ready", "/state"))[1]
        assert (state["release"], state["ready"], state["state"]) == (release.release_id, True, "serving")

        os.kill(doc["pid"], signal.SIGKILL)  # the Triton dies; its supervisor starts it again on the same ports
        t0 = time.monotonic()
        assert _wait(lambda: _status(doc["ready_url"])[0] == 503, 10, 0.01)
        _wait(lambda: json.loads(info.read_text())["pid"] != doc["pid"], 60)
        _wait(lambda: _status(doc["ready_url"])[0] == 200, 120)
        print(f"time to ready after SIGKILL: {time.monotonic() - t0:.2f} s")
        again = json.loads(info.read_text())
        assert (again["url"], again["ready_url"]) == (doc["url"], doc["ready_url"])
        with urllib.request.urlopen(f"http://{doc['url']}/v2/models/iris/ready", timeout=10) as resp:
            assert resp.status == 200  # the release loaded again on the restarted Triton
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        proc.stderr.close()
    assert not info.exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{doc['url']}/v2/health/ready", timeout=2)
