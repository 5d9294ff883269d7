"""One serving Triton of the local fleet, as a process ``model-release up`` supervises.

    python -m model_release.serve.local_server --name serve-1 --repository DIR --info FILE

Starts a :class:`~model_release.triton.local.LocalTriton` in explicit mode on ``DIR`` (its own,
stable model repository), bound to 127.0.0.1, with the metrics endpoint on and latency summaries
(``--metrics-config=summary_latencies=true``, which the watch reads) and without auto-complete;
writes FILE (name, url, repository, metrics_url, auto_complete false) once it is ready; stops the
server on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from pathlib import Path

from ..triton.local import NO_AUTO_COMPLETE
from .fleet import Server, server_from_doc

#: what a serving Triton of the local fleet runs with besides LocalTriton's own arguments: p99 summaries
#: (the watch reads them), and no auto-complete (a python model loads in about 0.25 s instead of 1.5-2 s, as
#: the backend starts no stub to ask the model for its config); the fleet file says so (``auto_complete``)
#: and the roll-out refuses a release that needs it (:func:`~model_release.serve.rollout.roll_out`)
SERVING_ARGS = ("--metrics-config=summary_latencies=true", NO_AUTO_COMPLETE)


def read_info(info: Path) -> Server:
    """The server a ready local serving Triton describes in its info file (``--info``)."""
    doc = json.loads(info.read_text())
    doc.pop("pid", None)
    return server_from_doc(doc, str(info))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="model_release.serve.local_server", description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--repository", type=Path, required=True)
    parser.add_argument("--info", type=Path, required=True)
    args = parser.parse_args(argv)

    from ..triton.local import LocalTriton

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    args.repository.mkdir(parents=True, exist_ok=True)
    args.info.unlink(missing_ok=True)
    triton = LocalTriton(args.repository, work_dir=args.repository.parent / "server", ready_timeout=120,
                         server_args=SERVING_ARGS)
    triton.start()
    try:
        server = Server(args.name, triton.http_url, str(triton.model_repository), triton.metrics_url,
                        auto_complete=NO_AUTO_COMPLETE not in SERVING_ARGS)
        tmp = args.info.with_suffix(".tmp")
        tmp.write_text(json.dumps({**server.to_dict(), "pid": triton.pid}))
        os.replace(tmp, args.info)
        stop.wait()
    finally:
        args.info.unlink(missing_ok=True)
        triton.stop(remove_work_dir=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
