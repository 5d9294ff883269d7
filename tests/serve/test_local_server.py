"""The local fleet's serving Triton process (what `model-release up` supervises): ready, metrics on, stops on SIGTERM."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from model_release.serve.local_server import read_info

pytestmark = pytest.mark.integration
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_serving_triton_writes_its_info_serves_metrics_and_stops_on_sigterm(tmp_path):
    info = tmp_path / "serve-1" / "server.json"
    proc = subprocess.Popen([sys.executable, "-m", "model_release.serve.local_server", "--name", "serve-1",
                             "--repository", str(tmp_path / "serve-1" / "models"), "--info", str(info)],
                            cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not info.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert info.is_file(), proc.stderr.read().decode() if proc.poll() is not None else "no info file in 120 s"
        doc = json.loads(info.read_text())
        assert doc["name"] == "serve-1" and doc["url"].startswith("127.0.0.1:")
        assert doc["repository"] == str((tmp_path / "serve-1" / "models").resolve())
        # it runs without auto-complete and says so, as the roll-out reads it from the fleet file
        assert doc["auto_complete"] is False and read_info(info).auto_complete is False
        options = (tmp_path / "serve-1" / "server" / "tritonserver.log").read_text()
        assert re.search(r"^\| strict_model_config +\| 1 ", options, re.M), options[-3000:]
        with urllib.request.urlopen(doc["metrics_url"], timeout=10) as resp:
            assert resp.status == 200 and b"nv_" in resp.read()
        with urllib.request.urlopen(f"http://{doc['url']}/v2/health/ready", timeout=10) as resp:
            assert resp.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        proc.stderr.close()
    assert not info.exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{doc['url']}/v2/health/ready", timeout=2)
