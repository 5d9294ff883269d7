"""A documented terminal session run as written: the project copied, a new user's shell, the doc's commands.

Shared by the README's and the docs' session tests (``test_readme_session.py``, ``test_getting_started.py``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from .readme import Command, script

PROJECT = Path(__file__).resolve().parents[2]


def copy_project(dest: Path) -> set[str]:
    """The project's tracked and untracked-but-not-ignored files copied to ``dest``, its two venvs linked;
    returns the copy's files (outside .work/) to compare with afterwards."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=PROJECT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = PROJECT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for venv in (".venv", ".venv-triton"):
        (dest / venv).symlink_to(PROJECT / venv)
    return tree(dest)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if not {".work", "__pycache__", ".venv", ".venv-triton"} & set(p.relative_to(root).parts)}


def user_env(home: Path) -> dict[str, str]:
    """A new user's shell: none of the stack's variables, the venv not on PATH; the stack lives in the copy."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AIRFLOW", "MODEL_RELEASE_", "AWS_"))}
    venv_bin = str(PROJECT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env["MODEL_RELEASE_HOME"] = str(home)  # the copy is the project: its .work/stack, dags/ and releases/
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def read_env_file(path: Path) -> dict[str, str]:
    out = subprocess.run(["bash", "-c", f"source {shlex.quote(str(path))} && env -0"], capture_output=True, check=True)
    return dict(line.split("=", 1) for line in out.stdout.decode().split("\0") if "=" in line)


def run_session(home: Path, cmds: list[Command], out: Path, env: dict[str, str], *, doc: str = "README") -> list[dict]:
    """Run ``cmds`` in one bash shell in ``home``; each one's output, exit code and seconds. Fails at the first that fails."""
    out.mkdir()
    proc = subprocess.run(["bash", "-c", script(cmds, out)], cwd=home, env=env, capture_output=True, text=True, timeout=2100)
    results = []
    for i, cmd in enumerate(cmds):
        if not (out / f"{i}.rc").exists():
            break
        start, end = map(float, (out / f"{i}.time").read_text().split())
        results.append({"cmd": cmd, "rc": int((out / f"{i}.rc").read_text()), "out": (out / f"{i}.out").read_text(),
                        "seconds": end - start})
    for r in results:
        print(f"[{doc}] {r['seconds']:6.1f} s  rc {r['rc']}  line {r['cmd'].line}: {r['cmd'].first_line[:90]}")
    last = results[-1] if results else None
    assert last is not None and len(results) == len(cmds) and last["rc"] == 0, (
        f"{doc} line {last['cmd'].line if last else '?'} failed (exit {last['rc'] if last else proc.returncode}): "
        f"{last['cmd'].text if last else ''}\n--- its output ---\n{last['out'][-4000:] if last else proc.stderr[-4000:]}"
    )
    return results
