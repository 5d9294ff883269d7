"""How model-release logs at a terminal: one safe line per record, and no wire logging by default.

:func:`cli_logging` is what the CLI runs under: a handler on stderr whose formatter passes every
message through :func:`~model_release.safe_text.one_line` (credentials redacted, control
characters escaped), at ``MODEL_RELEASE_LOG_LEVEL`` (default INFO).

At DEBUG, botocore logs every request's headers (the key id, the session token) and urllib3 every
connection; at INFO they say where they found credentials. :func:`quiet_wire_loggers` keeps those
libraries at WARNING unless they are asked for by name, ``MODEL_RELEASE_DEBUG_LOGGERS=botocore,urllib3``
(their records are still redacted).

Third-party libraries that talk at INFO (great_expectations logs about 200 records at import,
MLflow and alembic a few per release) are kept at WARNING too: :func:`quiet_chatty_loggers`, unless
``verbose`` (the CLI's ``--verbose``) or ``MODEL_RELEASE_DEBUG_LOGGERS`` names them. In an Airflow task,
whose log keeps MLflow's few INFO records, only great_expectations is: :func:`quiet_task_loggers`.

A release at a terminal reads as its stages: :func:`stage_lines` keeps, of the INFO records, only
each stage's one-line result (the record :func:`~model_release.pipeline.run_stage` marks with
:data:`STAGE_LINE`), printed without the level and logger name; warnings and errors of
model_release still pass, third-party warnings (``py.warnings``) only when ``verbose``. MLflow,
which logs through a handler of its own, is kept at WARNING through ``MLFLOW_LOGGING_LEVEL`` unless set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from .errors import UserError
from .safe_text import one_line, redact

#: libraries whose DEBUG records are the bytes on the wire (headers, signatures, bodies)
WIRE_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3", "requests", "aiobotocore", "httpx", "httpcore")
#: libraries whose INFO records are chatter to a person at a terminal (kept at WARNING unless asked for)
CHATTY_LOGGERS = ("great_expectations", "mlflow", "alembic", "matplotlib", "PIL", "skl2onnx", "onnxscript")
#: libraries whose INFO records are chatter in an Airflow task's log too (kept at WARNING there)
TASK_QUIET_LOGGERS = ("great_expectations",)
#: names the loggers to leave at DEBUG anyway, comma-separated
DEBUG_LOGGERS_ENV = "MODEL_RELEASE_DEBUG_LOGGERS"
LEVEL_ENV = "MODEL_RELEASE_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: the attribute that marks a stage's one-line result: ``extra={STAGE_LINE: {"stage": name, "seconds": s, "failed": bool}}``
STAGE_LINE = "model_release_stage"
#: the level MLflow gives its own logger (and handler) when it is imported
MLFLOW_LEVEL_ENV = "MLFLOW_LOGGING_LEVEL"
#: the longest log message printed (a record is cut after it, saying how much was left out)
MAX_LOG_MESSAGE = 8000


class SafeFormatter(logging.Formatter):
    """Formats each record's message on one line, redacted; a traceback (``--debug``) is redacted too."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return one_line(super().formatMessage(record), MAX_LOG_MESSAGE)

    def formatException(self, ei) -> str:  # noqa: ANN001, N802 - logging's signature
        return redact(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's name
        return redact(super().formatStack(stack_info))


class _Stderr(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is when a record is emitted."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # noqa: ANN001
        pass


def log_level(raw: str | None) -> int:
    """The level named by ``raw`` (``MODEL_RELEASE_LOG_LEVEL``), INFO when unset.

    Raises:
        UserError: it names no level.
    """
    if raw is None or raw == "":
        return logging.INFO
    name = raw.strip().upper()
    if name not in LEVELS:
        raise UserError(f"{LEVEL_ENV}={raw!r} is not a log level; valid: {', '.join(LEVELS)}")
    return getattr(logging, name)


def quiet_wire_loggers(level: int | None = None) -> None:
    """Keep the wire loggers at WARNING or above unless ``MODEL_RELEASE_DEBUG_LOGGERS`` names them."""
    asked = _asked()
    floor = max(logging.WARNING, level if level is not None else logging.getLogger().getEffectiveLevel())
    for name in WIRE_LOGGERS:
        logger = logging.getLogger(name)
        if name in asked:
            logger.setLevel(logging.DEBUG)
        elif logger.level == logging.NOTSET or logger.level < floor:
            logger.setLevel(floor)


def quiet_task_loggers() -> None:
    """In an Airflow task: keep :data:`TASK_QUIET_LOGGERS` at WARNING unless ``MODEL_RELEASE_DEBUG_LOGGERS`` names them.

    A task's log is read in Airflow's UI, where great_expectations' ~200 INFO records from its import
    ("Skipping registering function ...") buried the canary's own lines; its warnings and errors still show.
    """
    _keep_at_warning(TASK_QUIET_LOGGERS)


def _keep_at_warning(names: tuple[str, ...]) -> None:
    """Raise each of ``names`` to WARNING where it is lower, unless ``MODEL_RELEASE_DEBUG_LOGGERS`` names it."""
    asked = _asked()
    for name in names:
        logger = logging.getLogger(name)
        if name not in asked and logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)


def _asked() -> set[str]:
    return {n.strip() for n in os.environ.get(DEBUG_LOGGERS_ENV, "").split(",") if n.strip()}


def quiet_chatty_loggers(*, verbose: bool = False) -> dict[str, int]:
    """Keep :data:`CHATTY_LOGGERS` at WARNING unless ``verbose`` or ``MODEL_RELEASE_DEBUG_LOGGERS`` names them.

    Returns:
        Each logger's level before, for the caller to restore.
    """
    saved = {name: logging.getLogger(name).level for name in CHATTY_LOGGERS}
    if not verbose:
        _keep_at_warning(CHATTY_LOGGERS)
    return saved


@contextlib.contextmanager
def cli_logging(level_name: str | None = None, *, verbose: bool = False) -> Iterator[None]:
    """Log to stderr through :class:`SafeFormatter` while the block runs; restore the root logger after.

    Args:
        level_name: the root level (default ``$MODEL_RELEASE_LOG_LEVEL``, then INFO).
        verbose: let third-party libraries' INFO records through (:data:`CHATTY_LOGGERS`).

    Raises:
        UserError: ``level_name`` (default ``$MODEL_RELEASE_LOG_LEVEL``) names no level.
    """
    level = log_level(os.environ.get(LEVEL_ENV) if level_name is None else level_name)
    root = logging.getLogger()
    handler = _Stderr()
    handler.setFormatter(SafeFormatter("%(levelname)s %(name)s: %(message)s"))
    saved_level = root.level
    wire = {name: logging.getLogger(name).level for name in WIRE_LOGGERS}
    root.addHandler(handler)
    root.setLevel(level)
    quiet_wire_loggers(level)
    chatty = quiet_chatty_loggers(verbose=verbose)
    shown = warnings.showwarning
    warnings.showwarning = _warning_to_log(shown)
    try:
        yield
    finally:
        warnings.showwarning = shown
        root.removeHandler(handler)
        root.setLevel(saved_level)
        for name, saved in {**wire, **chatty}.items():
            logging.getLogger(name).setLevel(saved)


def _warning_to_log(shown: Any) -> Any:
    """``warnings.showwarning`` that logs a warning as ``logging.captureWarnings`` does (logger ``py.warnings``, at
    WARNING), so the CLI's handler filters and formats it; one written to an explicit file goes to ``shown``."""

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
        if file is not None:
            shown(message, category, filename, lineno, file, line)
            return
        logging.getLogger("py.warnings").warning("%s", warnings.formatwarning(message, category, filename, lineno, line))

    return show


class _StageLines(logging.Filter):
    """Of INFO and below, only the stages' results; warnings and errors, except third-party ``warnings.warn`` chatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, STAGE_LINE, None):
            return True
        return record.levelno >= logging.WARNING and record.name != "py.warnings"


class _StageFormatter(SafeFormatter):
    """A stage's result as its own words (``export: ONNX opset 17 passed parity (4.1 s)``), a failed stage as
    ``canary: failed after 72.4 s`` (the CLI's closing line gives the reason); other records as usual."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        stage = getattr(record, STAGE_LINE, None)
        if not isinstance(stage, dict):
            return super().formatMessage(record)
        if stage.get("failed"):  # the CLI's closing line says why, once
            return one_line(f"{stage.get('stage')}: failed after {stage.get('seconds', 0.0):.1f} s", MAX_LOG_MESSAGE)
        return one_line(record.getMessage(), MAX_LOG_MESSAGE)


@contextlib.contextmanager
def stage_lines(*, verbose: bool = False) -> Iterator[None]:
    """While the block runs, the CLI's stderr handler prints one line per stage (see the module's text).

    With ``verbose`` it changes nothing, and lets :data:`CHATTY_LOGGERS` log at INFO again.
    """
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, _Stderr)]
    if verbose:
        for name in CHATTY_LOGGERS:
            if logging.getLogger(name).level == logging.WARNING:
                logging.getLogger(name).setLevel(logging.NOTSET)  # cli_logging restores the level it found
        yield
        return
    saved = [(h, h.formatter) for h in handlers]
    stage_filter = _StageLines()
    for handler in handlers:
        handler.addFilter(stage_filter)
        handler.setFormatter(_StageFormatter("%(levelname)s %(name)s: %(message)s"))
    # MLflow logs through a handler of its own (not propagated, so no filter here sees it), at the level
    # it reads from MLFLOW_LOGGING_LEVEL when imported: INFO ("Validating candidate model metrics...")
    mlflow_env = os.environ.get(MLFLOW_LEVEL_ENV)
    mlflow_logger = logging.getLogger("mlflow")
    mlflow_level = mlflow_logger.level
    if mlflow_env is None:
        os.environ[MLFLOW_LEVEL_ENV] = "WARNING"
        if mlflow_logger.level < logging.WARNING:
            mlflow_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for handler, formatter in saved:
            handler.removeFilter(stage_filter)
            handler.setFormatter(formatter)
        if mlflow_env is None:
            os.environ.pop(MLFLOW_LEVEL_ENV, None)
            mlflow_logger.setLevel(mlflow_level)
