"""The distribution as a platform team gets it: the wheel and sdist ``uv build`` makes, installed into fresh
virtual environments outside the clone.

- :func:`dist` builds them once per test process (``uv build``: the sdist, then the wheel from the sdist,
  the path a package index's users take); about 5 s.
- :func:`core_venv` installs the wheel without extras into a venv made by uv, with ``requirements.lock``
  as constraints (the versions CI tests): about 2 s from uv's warm cache, which ``make setup`` filled
  (``--offline``: nothing is fetched). pip is seeded so ``pip show`` answers as a user's would.
- :class:`Venv` runs that venv's commands from a folder of the test's own, with an environment that names
  nothing of the clone (no ``MODEL_RELEASE_*``, ``AIRFLOW_*``, ``PYTHONPATH``) and a fresh ``AIRFLOW_HOME``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import PROJECT

UV = Path(sys.executable).with_name("uv")
LOCK = PROJECT / "requirements.lock"
#: the interpreter the venvs are made with: the one the clone's .venv was made from
BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable))


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run([str(UV), "build", "--out-dir", str(out), str(PROJECT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-4000:]
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return Dist(wheels[0], sdists[0])


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment less everything that points at the clone or another stack, plus ``extra``."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("MODEL_RELEASE_", "AIRFLOW", "MLFLOW_", "AWS_", "PYTHON", "VIRTUAL_ENV", "PYTEST_"))}
    keep.update(MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true", PYTHONDONTWRITEBYTECODE="")
    keep.update(extra)
    return keep


@dataclass(frozen=True)
class Venv:
    """A virtual environment outside the clone, and a user's folder to run its commands from."""

    root: Path
    home: Path  # the user's folder: the working folder of every command, AIRFLOW_HOME below it

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    def env(self, **extra: str) -> dict[str, str]:
        path = os.pathsep.join([str(self.root / "bin"), *[p for p in os.environ.get("PATH", "").split(os.pathsep)
                                                           if p and not p.startswith(str(PROJECT))]])
        return clean_env(PATH=path, VIRTUAL_ENV=str(self.root), AIRFLOW_HOME=str(self.home / "airflow"),
                         AIRFLOW__CORE__LOAD_EXAMPLES="False", **extra)

    def run(self, *argv: str | Path, timeout: float = 300, env: dict[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(a) for a in argv], cwd=self.home, env=env or self.env(), capture_output=True,
                              text=True, timeout=timeout)
        if check:
            assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc


def make_venv(root: Path, home: Path, *requirements: str, offline: bool = True, constraints: Path | None = LOCK,
              exclude_newer: str | None = None, timeout: float = 600) -> Venv:
    """A venv at ``root`` made by uv, with pip seeded, holding ``requirements``; ``home`` is made empty.

    Args:
        offline: install from uv's cache only (what the lock names is there after ``make setup``).
        constraints: a constraints file (the lock), or None to resolve.
        exclude_newer: resolve as of this time (RFC 3339): no distribution uploaded later.
    """
    subprocess.run([str(UV), "venv", "-q", "--seed", "--python", str(BASE_PYTHON), str(root)], check=True, timeout=120,
                   env=clean_env(), capture_output=True)
    argv = [str(UV), "pip", "install", "-q", "--python", str(root / "bin" / "python"), *requirements]
    if constraints is not None:
        argv += ["--constraint", str(constraints)]
    if offline:
        argv.append("--offline")
    if exclude_newer is not None:
        argv += ["--exclude-newer", exclude_newer]
    install = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=clean_env())
    assert install.returncode == 0, f"{' '.join(argv)}:\n{install.stderr[-4000:]}"
    home.mkdir(parents=True)
    return Venv(root, home)


@pytest.fixture(scope="session")
def core_venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """``pip install model-release`` (no extras), locked, outside the clone, with an empty user's folder."""
    base = tmp_path_factory.mktemp("core")
    venv = make_venv(base / "venv", base / "user", str(dist.wheel))
    assert not str(venv.root.resolve()).startswith(str(PROJECT)), "the venv must live outside the clone"
    return venv
