"""Warm-up before the switch: a few requests straight to each new version, the first one timed.

Triton runs a model's ``model_warmup`` samples on every instance before the version is READY
(a failing sample fails the load), so a leaf the assembler gave warm-up samples answers its first
real request fast. The serving agent checks that: before switching the entry model it sends
``requests`` requests to each newly loaded version and refuses the switch when the first took
longer than ``first_request_limit_ms`` (the canary's p99 times the spec's factor). Ensembles cannot
declare ``model_warmup`` and are never probed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import RolloutStopped


@dataclass(frozen=True)
class WarmupRule:
    """How many probe requests, and the limit on the first one (None: probe without a limit)."""

    requests: int = 3
    first_request_limit_ms: float | None = None

    @property
    def active(self) -> bool:
        return self.requests > 0 or self.first_request_limit_ms is not None

    def check(self, control: Any, release: Any, model: str, version: int, config: Any) -> float:
        """Probe ``model`` at ``version`` on ``control``'s server (:class:`~.control.TritonControl`); the first request's seconds.

        Raises:
            RolloutStopped: the first request was slower than the limit, or a probe failed.
        """
        first = control.infer_zeros(model, version, config)
        if self.first_request_limit_ms is not None and first * 1000 > self.first_request_limit_ms:
            raise RolloutStopped(
                f"server {control.name}: the first request to {model} version {version} of "
                f"{release.release_id} took {first * 1000:.0f} ms, over the limit of {self.first_request_limit_ms:.0f} ms "
                "(the canary's p99 times serve.warmup.factor); the entry model was not switched. Give the model "
                "warm-up samples (assemble writes model_warmup for ONNX/TensorRT leaves) or raise the factor"
            )
        for _ in range(max(0, self.requests - 1)):
            control.infer_zeros(model, version, config)
        return first

    def to_doc(self) -> dict[str, Any]:
        """The rule as the plan carries it to the agents."""
        return {"requests": self.requests, "first_request_limit_ms": self.first_request_limit_ms}

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> "WarmupRule | None":
        """The rule a plan carries (None: none)."""
        if not doc:
            return None
        return cls(int(doc.get("requests", 0)), doc.get("first_request_limit_ms"))


def limit_ms(canary_p99_ms: float | None, factor: float) -> float | None:
    """The first-request limit: the canary's p99 times ``factor`` (None when the canary measured none)."""
    if canary_p99_ms is None or canary_p99_ms != canary_p99_ms:  # NaN: no figure
        return None
    return float(canary_p99_ms) * float(factor)
