"""``pytest --cpu-time``: where a run's CPU went, per test file, and how busy the machine was.

make test's parallel part keeps a 2-core machine about 98% busy (measured: 1,437 CPU-seconds in its
720 s), so its wall time is the CPU its tests spend divided by the cores, and ``--durations`` (wall
time, stretched by whatever the other workers do meanwhile) cannot say which files to make cheaper.
This counts, for each test file, the CPU of the process that ran it and of the child processes it
reaped while its tests ran (servers, Airflow runs, CLI calls), and, for the run, the machine's busy
and idle CPU from ``/proc/stat``. Under pytest-xdist every worker counts its own files and hands them
to the controller, which prints one table at the end.

What it cannot see, and says so as the gap between the machine's busy CPU and the files' sum: each
process's collection, a session fixture's servers (reaped after the last file), processes that
detach (``model-release up --detach``), and other work on the machine. A child reaped late (a server
a fixture of the previous file started) is charged to the test that reaped it, so read files, not tests.

    make test PYTEST_ADDOPTS=--cpu-time      # or any pytest run: pytest --cpu-time tests/canary
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Mapping
from typing import Any

import pytest

#: files in the table, most CPU first
TOP = 30


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-time", action="store_true", default=False,
                     help="print the CPU each test file spent (its process and the children it reaped), most first, and how "
                          "busy the machine was (tests/cpu_time.py)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("cpu_time"):
        config.pluginmanager.register(CpuTime(config), "model-release-cpu-time")


def _own_and_children() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def machine_cpu() -> tuple[float, float]:
    """The machine's busy and idle CPU-seconds since boot, all cores (``/proc/stat``; zeros where there is none)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    hz = os.sysconf("SC_CLK_TCK")
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / hz, idle / hz  # guest time is already in user


def merge(into: dict[str, list[float]], files: Mapping[str, list[float]]) -> None:
    """Add ``files`` ({file: [own CPU s, children's CPU s, wall s, tests]}) into ``into``."""
    for name, figures in files.items():
        mine = into.setdefault(name, [0.0, 0.0, 0.0, 0])
        for i, value in enumerate(figures):
            mine[i] += value


def table(files: Mapping[str, list[float]], *, busy_s: float, idle_s: float, wall_s: float, cores: int,
          top: int = TOP) -> list[str]:
    """The report's lines: the machine, then the ``top`` files by CPU, then the rest in one line."""
    rows = sorted(files.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))
    counted = sum(own + children for own, children, _, _ in files.values())
    lines = [f"CPU time: {len(files)} test files spent {counted:.0f} CPU-s (their processes and the children they reaped) "
             f"in {wall_s:.0f} s on {cores} core(s)"]
    if busy_s + idle_s > 0:
        lines.append(f"the machine: {busy_s:.0f} CPU-s busy, {idle_s:.0f} idle ({busy_s / (busy_s + idle_s):.0%} busy); "
                     f"{max(0.0, busy_s - counted):.0f} CPU-s busy outside the files (collection, session fixtures, "
                     "detached processes, other work)")
    lines.append(f"{'CPU s':>8} {'own':>7} {'children':>8} {'wall s':>7} {'tests':>5}  file")
    for name, (own, children, wall, tests) in rows[:top]:
        lines.append(f"{own + children:8.1f} {own:7.1f} {children:8.1f} {wall:7.1f} {int(tests):5d}  {name}")
    rest = rows[top:]
    if rest:
        cpu = sum(o + c for _, (o, c, _, _) in rest)
        lines.append(f"{cpu:8.1f} {'':7} {'':8} {'':7} {int(sum(f[3] for _, f in rest)):5d}  the other {len(rest)} files")
    return lines


class CpuTime:
    """Counts per test file in each process that runs tests; the controller (or a run without xdist) prints."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.files: dict[str, list[float]] = {}
        self.started = time.monotonic()
        self.machine = machine_cpu()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        own, children = _own_and_children()
        started = time.monotonic()
        yield
        own_after, children_after = _own_and_children()
        merge(self.files, {item.nodeid.split("::", 1)[0]: [own_after - own, children_after - children,
                                                            time.monotonic() - started, 1]})

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: the controller prints
            workeroutput["cpu_time"] = {k: list(v) for k, v in self.files.items()}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        merge(self.files, getattr(node, "workeroutput", {}).get("cpu_time", {}))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if getattr(self.config, "workeroutput", None) is not None:
            return
        busy, idle = machine_cpu()
        terminalreporter.section("CPU time per test file (tests/cpu_time.py)")
        for line in table(self.files, busy_s=busy - self.machine[0], idle_s=idle - self.machine[1],
                          wall_s=time.monotonic() - self.started, cores=os.cpu_count() or 1):
            terminalreporter.write_line(line)
