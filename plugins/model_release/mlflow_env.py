"""The process settings every MLflow client here runs with, and the check of a tracking URI.

Core stages (intake, the canary's champion fallback and recorder, the registry follower) and the
embedded stack all call :func:`quiet_mlflow_env` before they use MLflow's client: no telemetry, no
progress bars, and **bounded HTTP requests**. MLflow's own defaults retry an unreachable server
for about four minutes (7 retries, exponential backoff up to 120 s, a 120 s timeout); here a
request times out after :data:`DEFAULT_TIMEOUT_S` and is retried :data:`DEFAULT_RETRIES` times,
so an unreachable MLflow fails within about half a minute. MLflow's own variables change that
(``MLFLOW_HTTP_REQUEST_TIMEOUT``, ``MLFLOW_HTTP_REQUEST_MAX_RETRIES``), and so do
``model-release release --mlflow-timeout S --mlflow-retries N`` (see :func:`request_limits`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

TIMEOUT_ENV = "MLFLOW_HTTP_REQUEST_TIMEOUT"
RETRIES_ENV = "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
BACKOFF_ENV = "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"
JITTER_ENV = "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"

#: seconds one MLflow HTTP request may wait to connect or for the next bytes
DEFAULT_TIMEOUT_S = 8
#: retries of a failed MLflow HTTP request (backoff 0 s, 2 s, ...)
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF = 1
DEFAULT_JITTER = 0.5
#: the accepted ranges (MLflow itself refuses more than 10 retries)
TIMEOUT_RANGE = (1, 3600)
RETRIES_RANGE = (0, 10)

#: tracking URI schemes MLflow opens without a plugin
TRACKING_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "file", "databricks", "databricks-uc", "uc")
TRACKING_FORMS = "http(s)://HOST[:PORT], sqlite:///ABSOLUTE/PATH.db, postgresql://..., mysql://... or file:///PATH"


def quiet_mlflow_env() -> None:
    """Turn off MLflow's telemetry, progress bars and run-URL printing, and bound its HTTP requests (idempotent).

    Settings already in the environment win.
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # MLflow prints "View run ... at: <tracking URI>/#/..." to stdout: the URI may carry a password,
    # and stdout is the CLI's JSON
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    os.environ.setdefault(TIMEOUT_ENV, str(DEFAULT_TIMEOUT_S))
    os.environ.setdefault(RETRIES_ENV, str(DEFAULT_RETRIES))
    os.environ.setdefault(BACKOFF_ENV, str(DEFAULT_BACKOFF))
    os.environ.setdefault(JITTER_ENV, str(DEFAULT_JITTER))


def _whole(raw: object, what: str, bounds: tuple[int, int], unit: str) -> int:
    from .errors import UserError

    lo, hi = bounds
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise UserError(f"{what} {raw!r} is not valid; give whole {unit} from {lo} to {hi}")
    return value


def check_request_limits() -> tuple[int, int]:
    """The MLflow timeout and retries in force (after :func:`quiet_mlflow_env`), checked.

    Raises:
        UserError: ``MLFLOW_HTTP_REQUEST_TIMEOUT`` or ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` is not a
            whole number in range (MLflow would fail on it deep inside a request).
    """
    quiet_mlflow_env()
    timeout = _whole(os.environ[TIMEOUT_ENV], f"environment variable {TIMEOUT_ENV}", TIMEOUT_RANGE, "seconds")
    retries = _whole(os.environ[RETRIES_ENV], f"environment variable {RETRIES_ENV}", RETRIES_RANGE, "retries")
    _whole(os.environ[BACKOFF_ENV], f"environment variable {BACKOFF_ENV}", (0, 120), "seconds")
    return timeout, retries


@contextlib.contextmanager
def request_limits(timeout_s: object = None, retries: object = None) -> Iterator[None]:
    """Run the block with MLflow requests bounded by ``timeout_s`` and ``retries`` (None: unchanged).

    Raises:
        UserError: a value is not a whole number in range.
    """
    wanted = {}
    if timeout_s is not None:
        wanted[TIMEOUT_ENV] = str(_whole(timeout_s, "--mlflow-timeout", TIMEOUT_RANGE, "seconds"))
    if retries is not None:
        wanted[RETRIES_ENV] = str(_whole(retries, "--mlflow-retries", RETRIES_RANGE, "retries"))
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _plugin_schemes() -> set[str]:
    from importlib.metadata import entry_points

    try:
        return {ep.name for ep in entry_points(group="mlflow.tracking_store")}
    except Exception:  # noqa: BLE001 - a broken plugin's metadata only loses its scheme here
        return set()


def check_tracking_uri(uri: object) -> str:
    """``uri`` if MLflow can open it as a tracking (and registry) store, checked without opening it.

    A URI with an unknown scheme, an HTTP URI without a host, or a local database or folder that
    does not exist is refused (MLflow would create an empty one, and every model would be unknown).

    Raises:
        UserError: it cannot name a tracking store; the message says what is valid.
    """
    from .errors import UserError
    from .safe_text import echo

    shown = echo(uri, 200)
    if not isinstance(uri, str) or not uri.strip():
        raise UserError(f"MLflow tracking URI {shown} is empty; pass --tracking-uri or set MLFLOW_TRACKING_URI "
                        f"({TRACKING_FORMS})")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in uri) or uri != uri.strip():
        raise UserError(f"MLflow tracking URI {shown} holds a control character or surrounding space; "
                        f"valid: {TRACKING_FORMS}")
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if uri in ("databricks", "databricks-uc", "uc"):  # a profile-less Databricks workspace
        return uri
    if len(scheme) <= 1:  # no scheme, or a Windows drive letter: a local folder
        path = Path(uri)
        if not path.is_dir():
            raise UserError(f"MLflow tracking URI {shown} is neither a URI nor an existing folder; valid: {TRACKING_FORMS}")
        return uri
    if scheme not in TRACKING_SCHEMES and scheme.split("+")[0] not in TRACKING_SCHEMES and scheme not in _plugin_schemes():
        raise UserError(f"MLflow tracking URI {shown} has scheme {scheme!r}, which MLflow cannot open; valid: {TRACKING_FORMS}")
    if scheme in ("http", "https") and not parsed.hostname:
        raise UserError(f"MLflow tracking URI {shown} names no host; valid: {TRACKING_FORMS}")
    if scheme in ("http", "https"):
        try:
            parsed.port  # noqa: B018 - raises on a port out of range
        except ValueError:
            raise UserError(f"MLflow tracking URI {shown} has an invalid port; valid: {TRACKING_FORMS}") from None
    if scheme == "sqlite":
        db = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None
        if not db or db.startswith(":memory:"):
            raise UserError(f"MLflow tracking URI {shown} names no database file; valid: sqlite:///ABSOLUTE/PATH.db")
        path = Path(db if db.startswith("/") else f"./{db}")
        if not path.is_file():
            raise UserError(f"MLflow tracking URI {shown}: the database {str(path)!r} does not exist; check the path "
                            "(MLflow would create an empty one, in which no model is registered)")
    if scheme == "file":
        path = Path(parsed.path)
        if not path.is_dir():
            raise UserError(f"MLflow tracking URI {shown}: the folder {str(path)!r} does not exist; check the path")
    return uri
