"""A self-contained page opened in real headless Chromium: what it asked for, what it logged, what it drew.

:class:`PageBrowser` is :class:`tests.local.browser.Chromium` keeping the DevTools events the page
raises (console messages, exceptions, log entries, network requests), so a test fails on any
console error and on any request other than the page's own file. :meth:`PageBrowser.check`
opens a file, waits for it to load, measures every ``figure.plot`` (a drawn SVG or a placeholder),
the decision block and the page's width, and saves two PNGs: the first screen and the whole page.
"""

from __future__ import annotations

import base64
import json
import queue
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.local.browser import Chromium

_MEASURE = """(() => {
  const plots = Array.from(document.querySelectorAll('figure.plot')).map(f => {
    const el = f.querySelector('svg') || f.querySelector('.placeholder');
    const r = el ? el.getBoundingClientRect() : {width: 0, height: 0};
    return {plot: f.dataset.plot, kind: f.querySelector('svg') ? 'svg' : 'placeholder', width: r.width, height: r.height,
            text: f.innerText};
  });
  const header = document.querySelector('header.decision');
  return JSON.stringify({plots, headerBottom: header ? header.getBoundingClientRect().bottom : null,
    scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, innerHeight: window.innerHeight,
    text: document.body.innerText, links: Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href')),
    rows: Array.from(document.querySelectorAll('tr[data-action]')).map(tr => [tr.dataset.action, tr.dataset.release])});
})()"""


@dataclass
class PageFacts:
    url: str
    plots: list[dict[str, Any]]
    header_bottom: float | None
    scroll_width: int
    inner_width: int
    inner_height: int
    text: str
    links: list[str]
    rows: list[list[str]]
    console_errors: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)

    def drawn(self) -> list[str]:
        return [p["plot"] for p in self.plots if p["kind"] == "svg"]

    def placeholders(self) -> dict[str, str]:
        return {p["plot"]: p["text"] for p in self.plots if p["kind"] == "placeholder"}


class PageBrowser(Chromium):
    """Chromium that keeps every DevTools event it reads (see the module docstring).

    Started so that nothing but the page can ask the network for anything (the test machine's
    network is closed, and a request of the browser's own would read as the page's): no QUIC, no
    background networking, no component updates, no sync; a fresh profile each time.
    """

    extra_flags = ("--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync")

    def __init__(self, *, width: int = 1280, height: int = 900) -> None:
        super().__init__(width=width, height=height)
        self.events: list[dict[str, Any]] = []

    def on_event(self, msg: dict[str, Any]) -> None:
        self.events.append(msg)

    def _drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                msg = json.loads(self._ws.recv(timeout=max(0.05, deadline - time.monotonic())))
            except (TimeoutError, queue.Empty):
                return
            if "method" in msg:
                self.events.append(msg)

    def _evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def check(self, page: Path, png: Path, *, timeout: float = 60) -> PageFacts:
        """Open ``page`` (a file), wait until it loaded, measure it, save ``png`` (first screen) and ``*-full.png``."""
        self.events.clear()
        for domain in ("Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        url = page.resolve().as_uri()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while self._evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} did not finish loading within {timeout:.0f} s")
            time.sleep(0.2)
        self._drain(1.0)  # late console messages and requests
        facts = json.loads(self._evaluate(_MEASURE))
        png.parent.mkdir(parents=True, exist_ok=True)
        png.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        full = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        png.with_name(png.stem + "-full.png").write_bytes(base64.b64decode(full["data"]))
        self._drain(0.3)
        return PageFacts(
            url=url, plots=facts["plots"], header_bottom=facts["headerBottom"], scroll_width=facts["scrollWidth"],
            inner_width=facts["innerWidth"], inner_height=facts["innerHeight"], text=facts["text"], links=facts["links"], rows=facts["rows"],
            console_errors=self._console_errors(), outside_requests=self._requests(url),
        )

    def _console_errors(self) -> list[str]:
        found = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                found.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif e["method"] == "Runtime.exceptionThrown":
                found.append(str(p.get("exceptionDetails", {}).get("text")))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                found.append(f"{p['entry'].get('source')}: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return found

    def _requests(self, own: str) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events
                if e["method"] == "Network.requestWillBeSent" and e["params"]["request"]["url"] != own]
