"""model-release's own processes run the cyclic GC less often (model_release.GC_THRESHOLD)."""

from __future__ import annotations

import subprocess
import sys

from model_release import GC_THRESHOLD

PROBE = "import gc, sys\nfrom model_release.cli import main\nbefore = gc.get_threshold()\nmain(['lint', sys.argv[1]])\nprint(before, gc.get_threshold())"


def test_a_cli_command_sets_the_threshold_from_python_s_default(tmp_path) -> None:  # noqa: ANN001
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "missing")], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == f"(700, 10, 10) {GC_THRESHOLD}", out.stderr[-2000:]
    assert GC_THRESHOLD[0] > 700 * 10
