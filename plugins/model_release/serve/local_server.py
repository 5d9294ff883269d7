"""One serving Triton of the local fleet with its agent beside it, as a process ``model-release up`` supervises.

    python -m model_release.serve.local_server --name serve-1 --repository DIR --info FILE
                                                --channel production --store URI [--memory-budget BYTES]

Starts a :class:`~model_release.triton.local.LocalTriton` in explicit mode on ``DIR`` (its own model
repository, on this process's disk), bound to 127.0.0.1, with the metrics endpoint on, latency
summaries (``--metrics-config=summary_latencies=true``, which the watch reads), CPU memory metrics
(which the agent reports) and without auto-complete; and beside it the serving agent
(:mod:`.agent`, the same as ``model-release serve-agent``) in a thread, which loads the channel's
current release before it reports ready. Like a kubelet, it starts the Triton again on the same
ports when it exits or is killed (the agent is not ready meanwhile, and loads the release again).
It writes FILE (name, url, metrics_url, ready_url, auto_complete false, the Triton's pid and gRPC address) once the
Triton is up and stops both on SIGTERM/SIGINT.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from pathlib import Path

from ..errors import ServiceUnavailable
from ..triton.local import NO_AUTO_COMPLETE
from .fleet import Server

log = logging.getLogger(__name__)

#: what a serving Triton of the local fleet runs with besides LocalTriton's own arguments: p99 summaries
#: (the watch reads them), CPU memory figures (the agent reports them), and no auto-complete (a python model
#: loads in about 0.25 s instead of 1.5-2 s, as the backend starts no stub to ask the model for its config); the
#: agent says so (``auto_complete``) and the roll-out refuses a release that needs it (:mod:`.preflight`)
SERVING_ARGS = ("--metrics-config=summary_latencies=true", "--allow-cpu-metrics=true", NO_AUTO_COMPLETE)
#: how often the process looks whether its Triton still runs
SUPERVISE_S = 0.5


def read_info(info: Path) -> Server:
    """The server a running local serving process describes in its info file (``--info``)."""
    doc = json.loads(info.read_text())
    return Server(doc["name"], doc["url"], doc.get("metrics_url"), doc.get("ready_url"), bool(doc.get("auto_complete")))


def _write_info(info: Path, server: Server, pid: int | None, grpc_url: str) -> None:
    tmp = info.with_suffix(".tmp")
    tmp.write_text(json.dumps({**server.to_dict(), "pid": pid, "grpc_url": grpc_url}))
    os.replace(tmp, info)


def main(argv: list[str] | None = None) -> int:
    from .cli import agent_parser

    parser = agent_parser()
    parser.prog = "model_release.serve.local_server"
    parser.add_argument("--info", type=Path, required=True, help="where to write the server's addresses once it is up")
    for action in parser._actions:  # the Triton is started here: its endpoints are not options
        if action.dest in ("triton_grpc", "triton_http"):
            action.required = False
    args = parser.parse_args(argv)

    from ..triton.local import LocalTriton
    from .cli import run_agent

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    args.repository.mkdir(parents=True, exist_ok=True)
    args.info.unlink(missing_ok=True)
    triton = LocalTriton(args.repository, work_dir=args.repository.parent / "server", ready_timeout=120,
                         server_args=SERVING_ARGS)
    triton.start()
    args.triton_grpc, args.triton_http, args.metrics_url = triton.grpc_url, triton.http_url, triton.metrics_url
    args.shim, args.no_auto_complete = True, NO_AUTO_COMPLETE in SERVING_ARGS
    urls: list[str] = []
    listening = threading.Event()
    agent = threading.Thread(target=run_agent, args=(args, stop, lambda url: (urls.append(url), listening.set())),
                             name=f"agent-{args.name}", daemon=True)
    agent.start()
    try:
        listening.wait(60)
        server = Server(args.name, triton.http_url, triton.metrics_url, urls[0] if urls else None, auto_complete=False)
        _write_info(args.info, server, triton.pid, triton.grpc_url)
        while not stop.wait(SUPERVISE_S):
            if triton.process is not None and triton.process.poll() is not None:
                log.warning("serving Triton %s exited with code %s: starting it again on the same ports", args.name,
                            triton.process.returncode)
                try:
                    triton.restart()
                except ServiceUnavailable as exc:  # tried again at the next look
                    log.error("serving Triton %s did not start again: %s", args.name, exc.message)
                    continue
                _write_info(args.info, server, triton.pid, triton.grpc_url)
    finally:
        stop.set()
        agent.join(timeout=30)
        args.info.unlink(missing_ok=True)
        triton.stop(remove_work_dir=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
