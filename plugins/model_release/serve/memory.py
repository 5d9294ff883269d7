"""Memory: what a release needs on a server, what a server has free, and the check before a side-by-side roll-out.

The canary records a release's footprint when it loads it (``canary.figures.memory`` in the
release's manifest: ``footprint_bytes`` and how it was measured). Each agent reports what its
server has free for models (:class:`Headroom`): its memory budget less the footprints of the
releases it has loaded, when the agent is given a budget (``--memory-budget``), else what Triton's
metrics say is free on the device models load into (the fullest GPU, or the host).

A side-by-side roll-out loads the new release beside the old one, so each server must have the new
release's footprint free; one that has not is named, with both figures, before anything moves, and
``serve.rollout.swap: in_place`` is the way out (drain, unload the old, load the new).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MIB = 1 << 20


def footprint(manifest: dict[str, Any] | None) -> int | None:
    """The release's memory footprint in bytes as its canary measured it (None: not recorded)."""
    memory = (((manifest or {}).get("canary") or {}).get("figures") or {}).get("memory") or {}
    value = memory.get("footprint_bytes")
    return int(value) if isinstance(value, (int, float)) and value >= 0 else None


def mib(value: int | float | None) -> str:
    return "unknown" if value is None else f"{value / MIB:.0f} MiB"


@dataclass(frozen=True)
class Headroom:
    """What a server has for models: ``total``/``used``/``free`` bytes and how they were found."""

    total: int
    used: int
    how: str

    @property
    def free(self) -> int:
        return max(0, self.total - self.used)

    def to_doc(self) -> dict[str, Any]:
        return {"total_bytes": self.total, "used_bytes": self.used, "free_bytes": self.free, "how": self.how}


def budget_headroom(budget: int, loaded: Iterable[tuple[str, int | None]]) -> Headroom:
    """A server's headroom under a budget: ``loaded`` is (release, footprint) of what it has loaded."""
    used = sum(f or 0 for _, f in loaded)
    return Headroom(budget, used, f"budget {mib(budget)} less the canary footprints of what is loaded")


def side_by_side_problems(members: Iterable[Any], new_release: str, need: int | None,
                          old_footprints: dict[str, int | None]) -> list[str]:
    """One sentence per member that cannot hold ``new_release`` beside what it serves.

    Args:
        members: agent states (``name``, ``release``, ``memory`` as :meth:`Headroom.to_doc` wrote it).
        new_release: the release rolled out.
        need: its footprint (None: not recorded, nothing is checked).
        old_footprints: release -> footprint of what the members serve.
    """
    if need is None:
        return []
    problems = []
    for state in members:
        memory = state.memory or {}
        free = memory.get("free_bytes")
        if state.release == new_release or free is None or free >= need:
            continue
        old = state.release
        problems.append(f"server {state.name} reports {mib(free)} free ({memory.get('how', 'as reported')}), and "
                        f"{new_release} needs {mib(need)} beside {old} ({mib(old_footprints.get(old or ''))}, loaded)")
    return problems
