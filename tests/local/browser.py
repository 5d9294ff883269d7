"""Headless Chromium, driven over the DevTools protocol: open a page (with a cookie), wait for a text, save a PNG.

``chromium --headless --screenshot`` cannot log in or wait for a single-page app to render; the
DevTools protocol can: set Airflow's ``_token`` cookie, navigate, poll ``document.body.innerText``
until the expected text is there, then capture the screenshot. Debian's ``chromium`` is installed
with apt when it is missing (about a minute); the test that needs it is skipped, with the reason,
only where apt itself is impossible.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest


def ensure_chromium() -> str:
    """The path of ``chromium``, installed with apt-get when missing; skips the test where that cannot be done."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("headless Chromium is not installed and apt-get cannot install it here (needs root and apt): "
                    "run `apt-get install -y chromium`")
    proc = subprocess.run(["apt-get", "install", "-y", "chromium"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if proc.returncode != 0:
        update = subprocess.run(["apt-get", "update"], capture_output=True, text=True, timeout=600)
        proc = subprocess.run(["apt-get", "install", "-y", "chromium"], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if proc.returncode != 0:
            pytest.fail(f"apt-get install -y chromium failed (exit {proc.returncode}): {(update.stderr + proc.stderr)[-1500:]}")
    return shutil.which("chromium") or pytest.fail("apt-get installed chromium but it is not on PATH")


class Chromium:
    """One headless Chromium with one page; use as a context manager (the browser is stopped on exit)."""

    #: flags added to the command line by subclasses
    extra_flags: tuple[str, ...] = ()

    def __init__(self, *, width: int = 1400, height: int = 900) -> None:
        self.size = (width, height)
        self._dir = Path(tempfile.mkdtemp(prefix="chromium-"))
        self._tmp = self._dir / "tmp"  # Chromium's own temporary folders, which it leaves behind in $TMPDIR
        self._tmp.mkdir()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ws: Any = None
        self._stack = contextlib.ExitStack()
        self._id = 0

    def __enter__(self) -> "Chromium":
        from websockets.sync.client import connect

        self._proc = subprocess.Popen(
            [ensure_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={self._dir}",
             f"--window-size={self.size[0]},{self.size[1]}", *self.extra_flags, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "TMPDIR": str(self._tmp)},  # its singleton socket's folder goes with self._dir on exit
        )
        port_file = self._dir / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                raise RuntimeError(f"chromium did not open its DevTools port (exit {self._proc.poll()})")
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            page = next(t for t in json.load(resp) if t["type"] == "page")
        self._ws = self._stack.enter_context(connect(page["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024, open_timeout=30))
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1], deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between go to :meth:`on_event`)."""
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv(timeout=60))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            if "method" in msg:
                self.on_event(msg)

    def on_event(self, msg: dict[str, Any]) -> None:
        """An event that arrived while waiting for a command's answer (skipped here; subclasses keep them)."""

    def set_cookie(self, url: str, name: str, value: str) -> None:
        self.call("Network.setCookie", url=url, name=name, value=value, path="/")

    def text(self) -> str:
        result = self.call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''", returnByValue=True)
        return str(result.get("result", {}).get("value", "")).replace("\xa0", " ")  # MLflow writes "@\xa0production"

    def settled(self) -> bool:
        """True once the page has loaded, its fonts are loaded and every image has arrived (or failed); a lazy
        image below the fold is not waited for (it loads only when scrolled to). What a fixed 1.5 s sleep waited for."""
        result = self.call("Runtime.evaluate", returnByValue=True, expression=(
            "document.readyState === 'complete' && document.fonts.status === 'loaded'"
            " && Array.from(document.images).every(i => i.complete || i.loading === 'lazy')"))
        return result.get("result", {}).get("value") is True

    def screenshot(self, url: str, out: Path, *, expect: list[str], timeout: float = 90) -> str:
        """Open ``url``, wait until the page's text holds every string in ``expect`` and the page has settled
        (:meth:`settled`), save a PNG; returns the text."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(e in text for e in expect) and self.settled():
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"{url} never showed {expect} (and settled) within {timeout:.0f} s; its text was: {text[:1500]!r}")
        png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(png)
        return text
