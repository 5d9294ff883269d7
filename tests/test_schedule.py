"""make test's file order (tests/schedule.py): heaviest tier first, each file whole and in its own order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .schedule import SERIAL_MARK, check_serial_marks, heaviest_files_first, left_out_of_serial, tier


@dataclass
class _Marker:
    name: str


@dataclass
class _Item:
    nodeid: str
    markers: list[str] = field(default_factory=list)

    path: Path | None = None

    def iter_markers(self):  # noqa: ANN201 - the pytest.Item method tier() reads
        return iter(_Marker(m) for m in self.markers)

    def get_closest_marker(self, name: str):  # noqa: ANN201 - the pytest.Item method check_serial_marks reads
        return _Marker(name) if name in self.markers else None


def test_a_test_is_in_the_tier_of_its_heaviest_marker() -> None:
    assert tier(_Item("a.py::t", ["slow", "distributed"])) == 0
    assert tier(_Item("a.py::t", ["integration", "slow"])) == 1
    assert tier(_Item("a.py::t", ["dags"])) == 2
    assert tier(_Item("a.py::t", ["parametrize"])) == 3


def test_files_go_heaviest_tier_first_then_by_count_each_whole_and_in_order() -> None:
    items = [
        _Item("unit_many.py::a"), _Item("unit_many.py::b"), _Item("unit_many.py::c"),
        _Item("one_slow.py::only", ["integration", "slow"]),
        _Item("services.py::x", ["integration"]), _Item("unit_few.py::a"),
        _Item("dist.py::first", ["distributed", "slow"]), _Item("dist.py::then"),  # the file's heaviest test decides
        _Item("two_slow.py::b", ["slow"]), _Item("two_slow.py::a", ["slow"]),
        _Item("services.py::y", ["integration"]),  # collected apart from its file's first test
    ]
    ordered = [i.nodeid for i in heaviest_files_first(items)]
    assert ordered == [
        "dist.py::first", "dist.py::then",
        "two_slow.py::b", "two_slow.py::a", "one_slow.py::only",
        "services.py::x", "services.py::y",
        "unit_many.py::a", "unit_many.py::b", "unit_many.py::c", "unit_few.py::a",
    ]
    assert sorted(ordered) == sorted(i.nodeid for i in items)  # nothing dropped, nothing twice


# The serial part's collection (make test's ``-m serial``). SERIAL_MARK is imported, never written out
# here, so this file is not among the ones that part imports.


def _file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_only_the_serial_run_leaves_out_test_files_that_mark_nothing_serial(tmp_path) -> None:
    marked = _file(tmp_path, "test_timed.py", f"pytestmark = pytest.{SERIAL_MARK}\n")
    plain = _file(tmp_path, "test_plain.py", "def test_x():\n    pass  # serial in a comment is not a mark\n")
    helper = _file(tmp_path, "support.py", "")  # not a test file: pytest decides, as ever
    assert left_out_of_serial(plain, "serial") and left_out_of_serial(plain, " serial ")
    assert not left_out_of_serial(marked, "serial")
    assert not left_out_of_serial(helper, "serial") and not left_out_of_serial(tmp_path, "serial")
    for other in (None, "", "not serial", "serial or slow", "integration"):  # any other selection reads every file
        assert not left_out_of_serial(plain, other), other


def test_a_test_marked_serial_where_its_file_does_not_say_so_fails_the_collection_naming_it(tmp_path) -> None:
    says = _file(tmp_path, "test_says.py", f"@pytest.{SERIAL_MARK}\n")
    silent = _file(tmp_path, "test_silent.py", "# marked by a hook elsewhere\n")
    check_serial_marks([_Item("test_says.py::t", ["serial"], says), _Item("test_silent.py::u", [], silent)])
    with pytest.raises(pytest.UsageError, match=r"1 test\(s\) marked serial .*: test_silent.py::t\. make test's serial "
                                                r"part \(-m serial\) reads only"):
        check_serial_marks([_Item("test_says.py::t", ["serial"], says), _Item("test_silent.py::t", ["serial"], silent)])
