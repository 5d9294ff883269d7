"""``model-release release`` as a person and as a script see it: the same release, at a terminal and piped.

Two releases of one model on the embedded stack, each run as a user runs it (a subprocess of the
CLI). The first is piped: stdout is the outcome as JSON, as scripts read it. The second runs with
stdout and stderr on a real pseudo-terminal: one line per stage with its time, no third-party
chatter, then exactly the decision block ``model-release report`` prints for its canary report, then
where the report and the outcome are; no JSON.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_release.canary.report.decision import terminal
from model_release.local.demo import train_iris
from .conftest import NOT_ABOUT_LATENCY, cli_env, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = "iris-terminal"
PREFIX = "terminal"
STAGES = ("intake", "export", "tensorrt", "assemble", "canary", "promote")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _spec(stack, folder: Path) -> Path:  # noqa: ANN001
    """iris.yaml for its own model and store prefix, with a brief load phase and no tuning."""
    return write_spec(stack, folder / "iris-terminal.yaml", model=MODEL, prefix=PREFIX, settings=NOT_ABOUT_LATENCY)


def _env(stack, ws: Path) -> dict[str, str]:  # noqa: ANN001
    return cli_env(stack, ws)


def _at_terminal(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 900) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on one pseudo-terminal; its exit code and everything it wrote."""
    main, child = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=child, stderr=child, env=env, cwd=cwd, close_fds=True)
    os.close(child)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # EIO: the child closed its side
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    return code, out.decode("utf-8", "replace").replace("\r\n", "\n")


def test_a_release_reads_as_its_stages_at_a_terminal_and_as_json_when_piped(stack, tmp_path) -> None:  # noqa: ANN001
    spec, ws, cwd = _spec(stack, tmp_path), tmp_path / "ws", tmp_path / "cwd"
    cwd.mkdir()
    env = _env(stack, ws)
    cli = [sys.executable, "-m", "model_release.cli", "release", str(spec)]

    train_iris(stack.tracking_uri, model_name=MODEL, c=1.0)
    piped = subprocess.run([*cli, "--release", "iris-terminal-1"], env=env, cwd=cwd, capture_output=True, text=True,
                           timeout=900)
    assert piped.returncode == 0, piped.stderr[-3000:]
    outcome = json.loads(piped.stdout)  # the whole of stdout is the outcome
    assert outcome["release_id"] == "iris-terminal-1" and outcome["canary"]["passed"] is True
    assert outcome["promoted"]["channel"] == "production"
    assert "INFO model_release.pipeline: canary: canary passed" in piped.stderr  # the logs as they were

    train_iris(stack.tracking_uri, model_name=MODEL, c=10.0)
    code, text = _at_terminal([*cli, "--release", "iris-terminal-2"], env, cwd)
    assert code == 0, text[-3000:]
    lines = text.rstrip("\n").split("\n")
    for stage, line in zip(STAGES, lines):  # one line per stage, in order, each with its time
        assert re.fullmatch(rf"{stage}: \S.* \(\d+\.\d s\)", line), (stage, line, text)
    report_json = ws / "iris-terminal-2" / "canary" / "report.json"
    decision = terminal(json.loads(report_json.read_text()), colour=True)
    footer = (f"report: {report_json.with_name('report.html')} · outcome: {ws / 'iris-terminal-2' / 'outcome.json'} "
              "(--json prints it)")
    assert lines[len(STAGES):] == ["", *decision.split("\n"), "", footer], text
    assert ANSI.sub("", decision).startswith("PASSED  iris (iris-terminal-2)") and "judged against release iris-terminal-1" in decision
    assert len(lines) == len(STAGES) + len(decision.split("\n")) + 3
