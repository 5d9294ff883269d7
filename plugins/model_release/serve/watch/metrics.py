"""Reading a serving Triton's metrics endpoint (``:8002/metrics``, Prometheus text format 0.0.4).

What the watch reads, per ``model`` and ``version`` label (other labels, such as a failure's
``reason``, are summed over):

- ``nv_inference_request_success`` / ``nv_inference_request_failure``: cumulative request counts.
  A python step that returns an error response counts as a success (server#7713).
- ``nv_inference_request_duration_us`` / ``nv_inference_queue_duration_us``: cumulative
  microseconds, of **successful requests only**: a mean over them is a mean over successes.
- ``nv_inference_request_summary_us{quantile="0.99"}``: the p99 of the last 60 s on this server
  (``--metrics-config summary_latencies=true``); a window per server, never to be averaged across
  servers. NaN when the window holds no request.

Counters restart at 0 when a model is unloaded and loaded again, and a version's series vanish
once it is unloaded: :mod:`.figures` turns two snapshots into deltas that treat both as resets.
The text is read by prometheus_client's own parser (a maintained reader of the format, escaped
label values included); the serving agents read memory and pending requests with it too.
"""

from __future__ import annotations

import math
import http.client
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import ServiceUnavailable

SUCCESS = "nv_inference_request_success"
FAILURE = "nv_inference_request_failure"
REQUEST_US = "nv_inference_request_duration_us"
QUEUE_US = "nv_inference_queue_duration_us"
SUMMARY_US = "nv_inference_request_summary_us"
P99_QUANTILE = "0.99"

#: ``fetch(url, timeout) -> body``; raises OSError (urllib's errors are OSErrors) when unreachable
Fetch = Callable[[str, float], str]

Labels = tuple[tuple[str, str], ...]


class MetricsFormatError(ValueError):
    """A line of the metrics text that is not Prometheus text format."""


@dataclass(frozen=True)
class WatchedServer:
    """A serving Triton as the watch sees it.

    Args:
        name: the server's name in the fleet (messages name it).
        metrics_url: its metrics endpoint, ``http://HOST:8002/metrics``.
        http_url: its HTTP endpoint ``HOST:PORT`` for the watch's probe requests (None: no probes).
    """

    name: str
    metrics_url: str
    http_url: str | None = None


@dataclass(frozen=True)
class ModelFigures:
    """One model version's cumulative figures on one server at one moment (zeros when absent)."""

    success: float = 0.0
    failure: float = 0.0
    request_us: float = 0.0
    queue_us: float = 0.0
    p99_us: float = math.nan
    present: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Every sample one metrics endpoint returned, indexed by metric name then label set."""

    server: str
    at: float
    samples: dict[str, dict[Labels, float]] = field(default_factory=dict)

    def total(self, name: str, model: str, version: int | str) -> float | None:
        """The sum of ``name`` over every series of this model and version; None when there is none."""
        found = [
            value for labels, value in self.samples.get(name, {}).items()
            if _label(labels, "model") == model and _label(labels, "version") == str(version)
            and _label(labels, "quantile") is None
        ]
        return sum(found) if found else None

    def quantile(self, name: str, model: str, version: int | str, quantile: str) -> float:
        """One quantile of a summary for this model and version (NaN when absent or empty)."""
        for labels, value in self.samples.get(name, {}).items():
            if (_label(labels, "model"), _label(labels, "version"), _label(labels, "quantile")) == (
                model, str(version), quantile,
            ):
                return value
        return math.nan

    def model(self, model: str, version: int | str) -> ModelFigures:
        """The watch's figures of one model version (zeros and ``present=False`` when Triton has none)."""
        success, failure = self.total(SUCCESS, model, version), self.total(FAILURE, model, version)
        return ModelFigures(
            success=success or 0.0,
            failure=failure or 0.0,
            request_us=self.total(REQUEST_US, model, version) or 0.0,
            queue_us=self.total(QUEUE_US, model, version) or 0.0,
            p99_us=self.quantile(SUMMARY_US, model, version, P99_QUANTILE),
            present=success is not None or failure is not None,
        )


def _label(labels: Labels, key: str) -> str | None:
    for k, v in labels:
        if k == key:
            return v
    return None


def parse_metrics(text: str) -> dict[str, dict[Labels, float]]:
    """Prometheus text format -> ``{metric name: {sorted label pairs: value}}``, read by prometheus_client's parser.

    Raises:
        MetricsFormatError: the text is not Prometheus text (the parser's complaint quoted in the message).
    """
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, dict[Labels, float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels, value = tuple(sorted(sample.labels.items())), float(sample.value)
                samples.setdefault(sample.name, {})[labels] = value
                if family.type == "counter" and sample.name == f"{family.name}_total":
                    # the parser names a counter's samples <name>_total; Triton writes its counters without the
                    # suffix (nv_inference_request_success): both names read the same samples
                    samples.setdefault(family.name, {})[labels] = value
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsFormatError(f"not Prometheus text format: {exc}") from None
    return samples


def _urllib_fetch(url: str, timeout: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the fleet's own endpoint
        return response.read().decode("utf-8", errors="replace")


class MetricsReader:
    """Reads one snapshot of a server's metrics endpoint.

    Args:
        clock: ``() -> seconds`` stamped on each snapshot (a monotonic clock).
        fetch: how the text is fetched (urllib by default; a fake in unit tests).
        timeout_s: how long one read may take.
    """

    def __init__(self, clock: Callable[[], float], *, fetch: Fetch = _urllib_fetch, timeout_s: float = 5.0) -> None:
        self._clock, self._fetch, self.timeout_s = clock, fetch, timeout_s

    def __call__(self, server: WatchedServer) -> Snapshot:
        """The server's metrics now.

        Raises:
            ServiceUnavailable: the endpoint is unreachable or answers something that is not metrics;
                the message names the server and its URL.
        """
        try:
            text = self._fetch(server.metrics_url, self.timeout_s)
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise ServiceUnavailable(
                f"the metrics endpoint of server {server.name!r} ({server.metrics_url}) is unreachable ({reason}); "
                "start that server with its metrics on (--allow-metrics=true, --metrics-port) or fix its "
                "metrics URL in the fleet, then rerun the roll-out",
                stage="watch",
            ) from None
        try:
            samples = parse_metrics(text)
        except MetricsFormatError as exc:
            raise ServiceUnavailable(
                f"the metrics endpoint of server {server.name!r} ({server.metrics_url}) answered something that is "
                f"not Prometheus text ({exc}); point the fleet's metrics URL at Triton's /metrics",
                stage="watch",
            ) from None
        return Snapshot(server=server.name, at=self._clock(), samples=samples)
