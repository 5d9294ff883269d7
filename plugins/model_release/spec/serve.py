"""The ``serve`` section: how a promoted release is rolled out to the channel's serving Tritons.

The fleet itself (servers, their repositories, credentials) is never in a spec: it is declared
once per deployment (Airflow connections and a fleet list per channel, or the local stack's fleet
file). The spec says only how this release is rolled out::

    serve:
      rollout: true            # the release DAG rolls out after promotion
      warmup:
        requests: 3            # probe requests straight to each new version before the switch
        factor: 20             # refuse the switch when the first is slower than canary p99 x factor
"""

from __future__ import annotations

from pydantic import Field

from .strict import _Strict


class WarmupSpec(_Strict):
    requests: int = Field(3, ge=0, le=1000)
    factor: float = Field(20.0, gt=1.0, le=10_000.0)


class ServeSpec(_Strict):
    rollout: bool = True
    warmup: WarmupSpec = WarmupSpec()
