"""A release's memory footprint, measured on the canary as it loads the candidate.

The serving roll-out needs it (:mod:`model_release.serve.memory`): a side-by-side roll-out loads a new
release beside the old one, so each server must have the new one's footprint free. It is what the
canary Triton holds after the candidate's load less what it held before: on the embedded (local,
CPU) Triton the resident memory of the server and its python-backend stubs (one process per model
instance); on a remote Triton the GPU memory its metrics endpoint reports used
(``nv_gpu_memory_used_bytes``, summed over GPUs, at ``--metrics`` of the endpoint's host, port 8002).
None with the reason when neither can be read.
"""

from __future__ import annotations

import urllib.request
from typing import Any


def memory_in_use(pid: int | None, metrics_url: str | None) -> tuple[int, str] | None:
    """(bytes in use now, how it was measured), or None."""
    if pid is not None:
        try:
            import psutil

            root = psutil.Process(pid)
            rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            return rss, "resident memory of the canary Triton and its stubs"
        except Exception:  # noqa: BLE001 - gone meanwhile, or no psutil: not measured
            return None
    if metrics_url:
        from ..serve.watch.metrics import MetricsFormatError, parse_metrics

        try:
            with urllib.request.urlopen(metrics_url, timeout=5) as resp:  # noqa: S310 - the canary's own endpoint
                samples = parse_metrics(resp.read().decode("utf-8", errors="replace"))
        except (OSError, MetricsFormatError):
            return None
        used = samples.get("nv_gpu_memory_used_bytes")
        return (int(sum(used.values())), "GPU memory used, from the canary Triton's metrics") if used else None
    return None


def footprint(before: tuple[int, str] | None, after: tuple[int, str] | None) -> dict[str, Any]:
    """The figure the manifest keeps (``canary.figures.memory``): the growth from ``before`` to ``after``."""
    if before is None or after is None:
        return {"footprint_bytes": None, "how": "not measured (the canary Triton's memory could not be read)"}
    return {"footprint_bytes": max(0, after[0] - before[0]), "how": f"{after[1]}, after the candidate's load less before"}
