"""The roll-out's errors, under the project's one hierarchy (:mod:`model_release.errors`)::

    InfraError
    └── RolloutStopped      a wave stopped: a server down, a load refused, a slow first request,
        └── RolloutLocked   another roll-out of the same fleet holds the lock
"""

from __future__ import annotations

from ..errors import InfraError


class RolloutStopped(InfraError):
    """A roll-out wave stopped; the message names the server and Triton's own words."""

    kind = "rollout"


class RolloutLocked(RolloutStopped):
    """Another roll-out of the same channel holds the lock (and it has not expired)."""

    kind = "rollout-locked"
