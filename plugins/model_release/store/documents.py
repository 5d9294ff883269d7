"""The small JSON documents a store keeps: how they are written, stamped and quoted in errors.

Every document model-release writes (pointers, history entries, completion records, rejection
records) is serialised by :func:`dumps`, so stored bytes stay the same from one version to the
next, and stamped with :func:`utcnow` and :func:`actor`.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from datetime import datetime, timezone
from typing import Any

#: the format number every document carries
FORMAT = 1


def actor() -> str:
    """Who moves a pointer: ``$MODEL_RELEASE_ACTOR`` or ``user@host``."""
    if os.environ.get("MODEL_RELEASE_ACTOR"):
        return os.environ["MODEL_RELEASE_ACTOR"]
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def utcnow() -> str:
    """Now, UTC, to the microsecond, as every document records it."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dumps(doc: Any) -> bytes:
    """A document as stored: indented, keys sorted, one trailing newline."""
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def excerpt(data: bytes, limit: int = 80) -> str:
    """A stored document's first bytes, quoted on one line, for an error message."""
    text = data[:limit].decode("utf-8", "replace")
    return repr(text + ("..." if len(data) > limit else ""))
