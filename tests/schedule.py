"""The order in which ``make test`` hands its test files to the xdist workers: the heaviest files first.

``--dist loadfile`` gives each worker one file at a time, from a queue. pytest-xdist's own queue order is
by number of tests, most first. That puts the files with one or a few long tests last: the distributed
release (5 tests, 250 s on a busy 2-core machine), the demo's watch (1 test, 108 s) and the webhook on the
stack (1 test, 50 s). One worker then ran them while the others had finished: 722 s for that worker
against 610-628 s for the other three, in the same run. Handing the heaviest files out first lets the
short ones fill the end. The weight comes from the markers the tests already carry, so a new file needs
nothing more: ``distributed``, then ``slow``, then ``integration`` or ``dags``, then the unit tests;
within a tier by number of tests, most first, as xdist would. A file's own tests keep their order.
``--no-loadscope-reorder`` in pyproject.toml's ``addopts`` makes xdist keep this order, in make test,
make test-fast and any run by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: the markers that make a file heavier, heaviest first; a file is in the tier of its heaviest test
TIERS: tuple[frozenset[str], ...] = (frozenset({"distributed"}), frozenset({"slow"}), frozenset({"integration", "dags"}))


def tier(item: Any) -> int:
    """The tier of one test: the index of the first tier one of its markers is in; unit tests last."""
    names = {m.name for m in item.iter_markers()}
    return next((i for i, markers in enumerate(TIERS) if names & markers), len(TIERS))


def heaviest_files_first(items: Sequence[Any]) -> list[Any]:
    """``items`` with their files in the order above; each file's tests stay together and in order."""
    files: dict[str, list[Any]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(files.values(), key=lambda tests: (min(tier(t) for t in tests), -len(tests)))
    return [item for tests in order for item in tests]
