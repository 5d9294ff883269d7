"""The agent's own HTTP endpoint: its readiness (the pod's readiness probe) and its state.

``GET /ready``: 200 while the agent is ready (:meth:`~.agent.Agent.probe`: its Triton live, serving
a whole release, not draining), else 503; ``GET /state``: the agent's state document; ``GET /live``:
200 while the agent runs. Each answer is a small JSON body. Binds the address it is given (the local
stack binds 127.0.0.1, a pod 0.0.0.0); port 0 picks a free one (:attr:`ReadinessServer.url` says which).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    agent: Any = None

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        path = self.path.split("?", 1)[0]
        if path == "/ready":
            ready = self.agent.probe()
            self._answer(200 if ready else 503, {"ready": ready, "release": self.agent.state.release,
                                                 "state": self.agent.state.state})
        elif path == "/state":
            self._answer(200, self.agent.state.to_doc())
        elif path == "/live":
            self._answer(200, {"live": True})
        else:
            self._answer(404, {"error": f"no such endpoint {path!r}; the agent answers /ready, /state and /live"})

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - probes every second: not logged
        return


class ReadinessServer:
    """The endpoint of one agent, served from a daemon thread until :meth:`close`.

    Args:
        agent: the agent (:class:`~.agent.Agent`).
        host: the address to bind.
        port: the port (0: a free one).
        advertise: the host name others reach it by (default ``host``; a pod binds 0.0.0.0 and advertises its IP).
    """

    def __init__(self, agent: Any, host: str = "127.0.0.1", port: int = 0, *, advertise: str | None = None) -> None:
        handler = type("AgentHandler", (_Handler,), {"agent": agent})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self.url = f"http://{advertise or host}:{self._server.server_address[1]}/ready"
        agent.ready_url = self.url
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"agent-http-{agent.config.name}",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
