"""Text made safe to print, log and store: no credential, no control character, no flood.

One place for the three rules every message of model-release follows, applied where messages
are made (:class:`~model_release.errors.ModelReleaseError`), printed (the CLI), logged (the CLI's
log handler) and written (:func:`~model_release.workspace.atomic_write_json`):

- :func:`redact`: credentials in URIs (``http://user:PASS@host`` -> ``http://***@host``), secret
  query parameters (``?token=...``, presigned ``X-Amz-Signature=...``) and the values of the
  secret environment variables (AWS keys and session token, MLflow's password and token).
- :func:`escape_controls`: control characters (``\\n``, ``\\x1b``...), C1 controls and bidi
  overrides written as escapes, so a folder name cannot move the cursor, recolour the terminal or
  forge a second log line.
- :func:`shorten`: at most ``limit`` characters, saying how many were left out.

This module imports nothing heavy (DAG files reach it through ``errors``).
"""

from __future__ import annotations

import os
import re
from typing import Any

#: the longest message an error carries or the CLI prints (characters)
MAX_MESSAGE = 4000

#: the environment variables whose values are secrets wherever they appear
SECRET_ENV = (
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID",
    "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_CLIENT_CERT_PATH",
)
#: shorter values are too likely to occur by chance to be replaced
_MIN_SECRET = 8

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#'\"<>@]*(?:@[^\s/?#'\"<>@]*)*@")
_SECRET_PARAM = re.compile(
    r"(?P<key>\b(?:X-Amz-(?:Signature|Credential|Security-Token)|password|passwd|token|access_token|secret|api_key)=)"
    r"[^&\s'\"<>]+",
    re.IGNORECASE,
)
# C0 controls, DEL, C1 controls, bidi embeddings/overrides/isolates, line/paragraph separators
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def secret_values() -> list[str]:
    """The values of the secret environment variables now set (long enough to be recognised)."""
    return sorted({v for k in SECRET_ENV if len(v := os.environ.get(k, "")) >= _MIN_SECRET}, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` without credentials: URI user-info, secret query parameters, secret env values."""
    if not isinstance(text, str):
        text = str(text)
    text = _USERINFO.sub(r"\g<scheme>***@", text)
    text = _SECRET_PARAM.sub(r"\g<key>***", text)
    for value in secret_values():
        if value in text:
            text = text.replace(value, "***")
    return text


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x1b``, ``\\u202e``)."""
    return _CONTROLS.sub(_escape, text)


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """At most ``limit`` characters of ``text``, and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """What may be printed or logged: redacted, escaped to one line, at most ``limit`` characters."""
    return shorten(escape_controls(redact(text)), limit)


def echo(value: Any, limit: int = 80) -> str:
    """A user's value quoted for a message (``repr``), redacted, escaped and cut at ``limit`` characters."""
    return shorten(escape_controls(redact(repr(value))), limit)


def redact_tree(data: Any) -> Any:
    """``data`` (JSON-like: dicts, lists, strings) with :func:`redact` applied to every string."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact(k) if isinstance(k, str) else k: redact_tree(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact_tree(v) for v in data]
    return data
