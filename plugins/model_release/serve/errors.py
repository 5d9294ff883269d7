"""The roll-out's and the serving agent's errors, under the project's one hierarchy (:mod:`model_release.errors`)::

    InfraError
    └── RolloutStopped      a step stopped: a server down, a load refused, a slow first request,
        │                   a failure budget spent, a server without the memory for both releases
        ├── RolloutLocked   another roll-out of the same fleet holds the lease
        └── LoadRefused     Triton refused to load a model version (its own words quoted)
"""

from __future__ import annotations

from ..errors import InfraError


class RolloutStopped(InfraError):
    """A roll-out step stopped; the message names the server and Triton's own words."""

    kind = "rollout"


class RolloutLocked(RolloutStopped):
    """Another roll-out of the same channel holds the lease (and keeps renewing it)."""

    kind = "rollout-locked"


class LoadRefused(RolloutStopped):
    """Triton refused a load (the model's fault or the server's): the agent unloads the failed version again."""

    kind = "load-refused"
