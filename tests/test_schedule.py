"""make test's file order (tests/schedule.py): heaviest tier first, each file whole and in its own order."""

from __future__ import annotations

from dataclasses import dataclass, field

from .schedule import heaviest_files_first, tier


@dataclass
class _Marker:
    name: str


@dataclass
class _Item:
    nodeid: str
    markers: list[str] = field(default_factory=list)

    def iter_markers(self):  # noqa: ANN201 - the one pytest.Item method tier() reads
        return iter(_Marker(m) for m in self.markers)


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
