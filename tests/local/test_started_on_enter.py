"""What starts processes stops what did start when its start fails part-way, and on leaving the block."""

from __future__ import annotations

import pytest

from model_release.local.procs import StartedOnEnter


class _Parts(StartedOnEnter):
    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.running: list[str] = []
        self.stops = 0

    def start(self) -> None:
        for n, part in enumerate(("db", "s3", "server")):
            if n == self.fail_after:
                raise KeyboardInterrupt  # a Ctrl-C part-way: BaseException, not Exception
            self.running.append(part)

    def stop(self) -> None:
        self.stops += 1
        self.running.clear()


def test_leaving_the_block_stops_what_started() -> None:
    with _Parts() as parts:
        assert parts.running == ["db", "s3", "server"]
    assert parts.running == [] and parts.stops == 1


def test_a_start_interrupted_part_way_stops_the_parts_that_started() -> None:
    parts = _Parts(fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        with parts:
            pytest.fail("the block must not run when the start failed")
    assert parts.running == [] and parts.stops == 1
