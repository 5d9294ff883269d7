"""free_port picks below the kernel's ephemeral range, where no outgoing connection takes a source port."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from model_release.local import ports
from model_release.local.ports import FLOOR, ephemeral_low, free_port


def _range(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    return path


def test_the_port_is_below_the_ephemeral_range_and_bindable(tmp_path: Path) -> None:
    range_file = _range(tmp_path, "32768\t60999\n")
    for _ in range(20):
        port = free_port(range_file=range_file)
        assert FLOOR <= port < 32768
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: binding it does not raise


def test_a_port_a_server_holds_is_never_returned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(ports, "FLOOR", 1024)
        draws = iter([taken - 1024, taken - 1024, free - 1024])  # the held port, twice, then a free one
        monkeypatch.setattr(ports.secrets, "randbelow", lambda n: next(draws))
        port = free_port(range_file=_range(tmp_path, "65000 65535"))
    assert port == free


@pytest.mark.parametrize("text", ["", "not numbers", "1024 65535", "20500 60999"])
def test_without_room_below_the_range_the_kernel_picks(tmp_path: Path, text: str) -> None:
    range_file = _range(tmp_path, text)
    port = free_port(range_file=range_file)
    assert 1024 <= port <= 65535
    low = ephemeral_low(range_file)
    assert low is None or low - FLOOR < 1000  # these leave no room: the port came from binding port 0


def test_the_machine_s_own_range_is_read() -> None:
    low = ephemeral_low()
    assert low is None or 1024 <= low <= 65535
    port = free_port()
    if low is not None and low - FLOOR >= 1000:
        assert FLOOR <= port < low
