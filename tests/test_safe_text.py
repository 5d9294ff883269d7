"""Messages made safe once: credentials redacted, control characters escaped, floods cut.

The rules live in ``model_release.safe_text`` and apply where messages are made (every
``ModelReleaseError``), logged (the CLI's handler) and written (``atomic_write_json``).
"""

from __future__ import annotations

import json
import logging

import pytest

from model_release.errors import ConflictError, SpecError, UserError
from model_release.logs import WIRE_LOGGERS, SafeFormatter, cli_logging, log_level, quiet_task_loggers, quiet_wire_loggers
from model_release.safe_text import echo, escape_controls, one_line, redact, redact_tree, shorten
from model_release.workspace import atomic_write_json


@pytest.mark.parametrize(("text", "want"), [
    ("http://user:PASS@mlflow:5000/api", "http://***@mlflow:5000/api"),
    ("failed: API request to https://bot:t0k@n@host/x failed", "failed: API request to https://***@host/x failed"),
    ("s3://AKIA:secret@bucket/p and postgresql://u:p@db/x", "s3://***@bucket/p and postgresql://***@db/x"),
    ("'http://only-user@host'", "'http://***@host'"),
    ("https://host/o?X-Amz-Signature=abc123&X-Amz-Credential=AKIA/x&v=1",
     "https://host/o?X-Amz-Signature=***&X-Amz-Credential=***&v=1"),
    ("models:/iris@candidate s3://bucket/key@v2 user@example.com", "models:/iris@candidate s3://bucket/key@v2 user@example.com"),
])
def test_redact_uri_credentials(text: str, want: str) -> None:
    assert redact(text) == want


def test_redact_secret_environment_values(monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-test-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEJr-session-token")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "short")  # too short to be recognised safely: kept
    text = "Authorization: ... FwoGZXIvYXdzEJr-session-token ... wJalrXUtnFEMI-test-secret short"
    assert redact(text) == "Authorization: ... *** ... *** short"


def test_escape_controls_and_shorten() -> None:
    assert escape_controls("m\n\x1b[31mEVIL\t\r\x00\x7f\u202eX\u2028") == "m\\n\\x1b[31mEVIL\\t\\r\\x00\\x7f\\u202eX\\u2028"
    assert escape_controls("plain é ü") == "plain é ü"
    assert shorten("x" * 10, 4) == "xxxx... (6 more characters)"
    assert one_line("a\nb http://u:p@h", 100) == "a\\nb http://***@h"
    assert echo("x" * 500, 20).startswith("'xxxxxxxxxxxxxxxxxxx") and "more characters" in echo("x" * 500, 20)


def test_redact_tree() -> None:
    data = {"uri": "http://u:p@h", "list": ["https://a:b@c", 3], "n": None, "http://k:v@x": 1}
    assert redact_tree(data) == {"uri": "http://***@h", "list": ["https://***@c", 3], "n": None, "http://***@x": 1}


def test_errors_are_made_safe_where_they_are_made() -> None:
    err = UserError("store http://user:PASS@host refused\nname m\x1b[31m")
    assert str(err) == "store http://***@host refused\\nname m\\x1b[31m"
    assert "PASS" not in repr(err.args)
    conflict = ConflictError("moved", winner="r2", stage="promote")
    again = conflict.restated("lost to s3://k:s@b/p\n")
    assert isinstance(again, ConflictError) and again.winner == "r2" and again.stage == "promote"
    assert again.message == "lost to s3://***@b/p\\n"
    flood = SpecError("x" * 100_000)
    assert len(str(flood)) < 4100 and str(flood).endswith("(96000 more characters)")


def test_json_written_by_the_product_carries_no_credential(tmp_path) -> None:
    path = tmp_path / "intake.json"
    atomic_write_json(path, {"tracking_uri": "http://bot:Pa55-Distinctive@mlflow:5000", "nested": [{"s": "x"}]})
    text = path.read_text()
    assert "Pa55-Distinctive" not in text and json.loads(text)["tracking_uri"] == "http://***@mlflow:5000"


def test_the_log_formatter_escapes_and_redacts() -> None:
    record = logging.LogRecord("model_release.x", logging.INFO, __file__, 1, "folder %s at %s", ("m\n\x1b[2J", "http://u:p@h"), None)
    assert SafeFormatter("%(levelname)s %(message)s").format(record) == "INFO folder m\\n\\x1b[2J at http://***@h"


def test_wire_loggers_stay_out_of_debug_unless_named(monkeypatch) -> None:
    saved = {n: logging.getLogger(n).level for n in WIRE_LOGGERS}
    try:
        monkeypatch.delenv("MODEL_RELEASE_DEBUG_LOGGERS", raising=False)
        quiet_wire_loggers(logging.DEBUG)
        assert not logging.getLogger("botocore").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("urllib3").isEnabledFor(logging.INFO)
        monkeypatch.setenv("MODEL_RELEASE_DEBUG_LOGGERS", "botocore")
        quiet_wire_loggers(logging.DEBUG)
        assert logging.getLogger("botocore").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("urllib3").isEnabledFor(logging.DEBUG)
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def test_a_task_keeps_great_expectations_at_warning_unless_asked_for(monkeypatch) -> None:
    gx = logging.getLogger("great_expectations")
    saved = gx.level
    try:
        gx.setLevel(logging.NOTSET)
        monkeypatch.delenv("MODEL_RELEASE_DEBUG_LOGGERS", raising=False)
        quiet_task_loggers()
        assert gx.level == logging.WARNING
        assert not logging.getLogger("great_expectations._docs_decorators").isEnabledFor(logging.INFO)
        assert logging.getLogger("great_expectations._docs_decorators").isEnabledFor(logging.WARNING)
        gx.setLevel(logging.NOTSET)
        monkeypatch.setenv("MODEL_RELEASE_DEBUG_LOGGERS", "great_expectations")
        quiet_task_loggers()
        assert gx.level == logging.NOTSET  # asked for by name: left as it was
    finally:
        gx.setLevel(saved)


def test_cli_logging_restores_the_root_logger(capsys) -> None:
    root = logging.getLogger()
    before = (root.level, list(root.handlers), logging.getLogger("botocore").level)
    with cli_logging("DEBUG"):
        logging.getLogger("model_release.test").debug("token in http://u:SECRET@h")
        logging.getLogger("botocore.endpoint").debug("headers: Authorization")
    assert (root.level, list(root.handlers), logging.getLogger("botocore").level) == before
    err = capsys.readouterr().err
    assert "DEBUG model_release.test: token in http://***@h" in err and "SECRET" not in err
    assert "Authorization" not in err
    with pytest.raises(UserError, match="MODEL_RELEASE_LOG_LEVEL='LOUD' is not a log level; valid: DEBUG, INFO"):
        log_level("LOUD")
