"""The process settings every MLflow client here runs with (no telemetry, no progress bars).

Core stages (intake, the canary's champion fallback, the registry follower) and the embedded
stack all call :func:`quiet_mlflow_env` before they import MLflow's client.
"""

from __future__ import annotations

import os


def quiet_mlflow_env() -> None:
    """Turn off MLflow's telemetry and download progress bars for this process (idempotent)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
