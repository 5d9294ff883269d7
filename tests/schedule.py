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

make test's second part (``-m serial``) imports only the test files that mark a test serial
(:func:`left_out_of_serial`); :func:`check_serial_marks` keeps that from losing one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

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


#: the text a test file holds when it marks a test ``serial`` (``pytest.mark.serial``, in pytestmark or on a test)
SERIAL_MARK = "mark.serial"


def left_out_of_serial(path: Path, markexpr: str | None) -> bool:
    """Whether ``-m serial`` (make test's second part) can leave the file at ``path`` out of its collection.

    That part keeps 22 of about 1,500 tests, but collecting all of them imports every test file, and with
    them Airflow and MLflow: 6-9 s of a part that should be as short as it can honestly be. Only a test
    file whose text lacks :data:`SERIAL_MARK` is left out, and only when the expression is exactly
    ``serial``; :func:`check_serial_marks` fails every other collection in which a test is marked serial
    some other way, so no serial test can be lost by this.
    """
    if (markexpr or "").strip() != "serial" or path.suffix != ".py" or not path.name.startswith("test_"):
        return False
    return SERIAL_MARK not in path.read_text(encoding="utf-8", errors="replace")


def check_serial_marks(items: Iterable[Any]) -> None:
    """Fail the collection if a test is marked ``serial`` in a file whose text does not say so.

    ``-m serial`` reads only the files that do (:func:`left_out_of_serial`), so it would never run it;
    every other collection (the parallel part among them) sees the test and stops here instead.
    """
    texts: dict[Path, str] = {}
    hidden = []
    for item in items:
        if item.get_closest_marker("serial") is None:
            continue
        path = Path(item.path)
        if path not in texts:
            texts[path] = path.read_text(encoding="utf-8", errors="replace")
        if SERIAL_MARK not in texts[path]:
            hidden.append(item.nodeid)
    if hidden:
        raise pytest.UsageError(
            f"{len(hidden)} test(s) marked serial in a way their file's text does not show: {', '.join(hidden[:3])}. "
            f"make test's serial part (-m serial) reads only the test files that contain {SERIAL_MARK!r} "
            f"(tests/schedule.py, left_out_of_serial), so it would never run them. Mark them with "
            f"pytest.mark.serial in their own file.")
