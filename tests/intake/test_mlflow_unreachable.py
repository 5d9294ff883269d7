"""An MLflow that cannot be reached fails a release within the request limits, as an infrastructure error.

MLflow's own defaults retry for about four minutes (measured: 265 s against a closed port); the
product bounds every MLflow request (``mlflow_env``): a closed port fails within seconds, and a
server that accepts connections but never answers fails after the configured timeout and retries.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from model_release.cli import main
from model_release.mlflow_env import BACKOFF_ENV, JITTER_ENV, RETRIES_ENV, TIMEOUT_ENV

#: the issue's bound for the default settings
DEFAULT_BOUND_S = 30


@pytest.fixture(autouse=True)
def mlflow_imported() -> None:
    """Import MLflow's client before the clock starts: the figure is the request limits, not import time."""
    import mlflow.artifacts  # noqa: F401
    from mlflow import MlflowClient  # noqa: F401


@pytest.fixture
def spec(tmp_path):  # noqa: ANN001, ANN201
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: iris\nmodel: {{name: iris-classifier, alias: candidate}}\n"
                    f"promote: {{store: '{(tmp_path / 'store').as_uri()}'}}\n")
    return path


@pytest.fixture
def default_limits(monkeypatch) -> None:  # noqa: ANN001
    for key in (TIMEOUT_ENV, RETRIES_ENV, BACKOFF_ENV, JITTER_ENV):
        monkeypatch.delenv(key, raising=False)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers a request."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


def _release(spec, tmp_path, uri: str, *extra: str) -> tuple[int, float]:  # noqa: ANN001
    """Run ``model-release release`` against ``uri``; the exit code and the seconds it took."""
    started = time.monotonic()
    code = main(["release", str(spec), "--tracking-uri", uri, "--workspace", str(tmp_path / "ws"), *extra])
    return code, time.monotonic() - started


def test_a_closed_port_fails_within_30_s_with_the_default_limits(spec, tmp_path, default_limits, capsys):
    port = _closed_port()
    code, elapsed = _release(spec, tmp_path, f"http://127.0.0.1:{port}")
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    print(f"closed port: failed in {elapsed:.1f} s (bound {DEFAULT_BOUND_S} s)")
    assert code == 4, err
    assert elapsed < DEFAULT_BOUND_S
    assert line.startswith("model-release release: intake: MLflow could not read registered model 'iris-classifier'")
    assert "waited up to 8 s and was retried 2 times" in line and "--mlflow-timeout" in line and "Traceback" not in err


def test_a_silent_server_fails_after_the_configured_timeout_and_retries(spec, tmp_path, silent_port, default_limits, capsys):
    code, elapsed = _release(spec, tmp_path, f"http://127.0.0.1:{silent_port}", "--mlflow-timeout", "1", "--mlflow-retries", "1")
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    print(f"silent server, timeout 1 s, 1 retry: failed in {elapsed:.1f} s")
    assert code == 4, err
    assert 2 <= elapsed < 15, elapsed  # two attempts of 1 s each, a short backoff, and some scheduling slack
    assert "waited up to 1 s and was retried 1 times" in line, line


def test_the_limits_can_be_set_through_mlflows_own_variables(spec, tmp_path, silent_port, monkeypatch, capsys):
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    monkeypatch.setenv(RETRIES_ENV, "0")
    code, elapsed = _release(spec, tmp_path, f"http://127.0.0.1:{silent_port}")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 4 and elapsed < 10 and "waited up to 1 s and was retried 0 times" in line, (elapsed, line)
