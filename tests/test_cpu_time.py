"""``pytest --cpu-time`` (tests/cpu_time.py): each file charged its own CPU and its children's, with and without xdist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .cpu_time import merge, table

PROJECT = Path(__file__).resolve().parents[1]

CHILD = """import subprocess, sys
def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(4 * 10**6))"], check=True)
"""
OWN = """def test_burns_in_its_own_process():
    sum(i * i for i in range(4 * 10**6))
def test_idle():
    pass
"""
ROW = re.compile(r"^\s*(?P<cpu>[\d.]+)\s+(?P<own>[\d.]+)\s+(?P<children>[\d.]+)\s+(?P<wall>[\d.]+)\s+(?P<tests>\d+)\s+(?P<file>\S+)$")


@pytest.mark.parametrize("workers", [0, 2])
def test_each_file_is_charged_its_own_cpu_and_its_reaped_childrens(tmp_path, workers) -> None:
    (tmp_path / "test_child.py").write_text(CHILD)
    (tmp_path / "test_own.py").write_text(OWN)
    # --rootdir: the files' labels are relative to it. Left to pytest, it is the common folder of this clone
    # (the working folder) and tmp_path, which is / (then tmp_path) only where the two share no prefix: a
    # clone under the system's temporary folder would label them "pytest-of-USER/pytest-N/.../test_own.py"
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.cpu_time", "--cpu-time", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(tmp_path), "-n", str(workers), str(tmp_path)],
                         cwd=PROJECT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = {m["file"]: m for m in map(ROW.match, run.stdout.splitlines()) if m}
    assert set(rows) == {"test_child.py", "test_own.py"}, run.stdout
    child, own = rows["test_child.py"], rows["test_own.py"]
    assert (child["tests"], own["tests"]) == ("1", "2")
    assert float(child["children"]) >= 0.1 and float(child["own"]) < float(child["children"]), run.stdout
    assert float(own["own"]) >= 0.1 and float(own["children"]) < float(own["own"]), run.stdout
    assert "CPU time: 2 test files spent" in run.stdout and "% busy)" in run.stdout


def test_merge_adds_figure_by_figure_and_the_table_puts_the_costliest_first_then_the_rest_in_one_line() -> None:
    files: dict[str, list[float]] = {}
    merge(files, {"a.py": [1.0, 2.0, 5.0, 1], "b.py": [0.5, 0.0, 1.0, 3]})
    merge(files, {"a.py": [1.0, 0.0, 1.0, 2], "c.py": [0.0, 9.0, 4.0, 1]})
    assert files == {"a.py": [2.0, 2.0, 6.0, 3], "b.py": [0.5, 0.0, 1.0, 3], "c.py": [0.0, 9.0, 4.0, 1]}
    lines = table(files, busy_s=20.0, idle_s=5.0, wall_s=12.5, cores=2, top=2)
    assert lines[0] == "CPU time: 3 test files spent 14 CPU-s (their processes and the children they reaped) in 12 s on 2 core(s)"
    assert lines[1].startswith("the machine: 20 CPU-s busy, 5 idle (80% busy); 6 CPU-s busy outside the files")
    assert [line.split()[-1] for line in lines[3:5]] == ["c.py", "a.py"]  # 9 CPU-s, then 4
    assert lines[5].split() == ["0.5", "3", "the", "other", "1", "files"]
    assert len(table(files, busy_s=0.0, idle_s=0.0, wall_s=1.0, cores=1)) == 2 + len(files)  # no /proc/stat: no machine line
