"""Every name pattern model-release checks, defined once.

Names become folder names, Triton model names, S3 keys and MLflow aliases, so they are kept
boring. The spec, the store, the workspace, the CLI and the DAG's ``Param`` schemas all use the
patterns here (``anchored`` gives the JSON-schema form). This module imports nothing heavy: DAG
files import it at parse time.

- :data:`NAME`: a release pipeline's name and a channel: a letter, then letters, digits, ``_``
  and ``-``, at most 64 characters.
- :data:`MODEL_NAME`: a Triton model folder the assembler writes (up to 128 characters).
- :data:`ALIAS`: an MLflow registered-model alias.
- :data:`RELEASE_ID`: a release id: letters, digits, ``.``, ``_`` and ``-``, at most 128, no ``..``.
- :func:`is_registered_model`: an MLflow registered model name (MLflow's own rule, plus what
  would break a ``models:/NAME@ALIAS`` URI): see :data:`REGISTERED_MODEL_RULE`.
"""

from __future__ import annotations

import re

NAME = r"[A-Za-z][A-Za-z0-9_\-]{0,63}"
MODEL_NAME = r"[A-Za-z][A-Za-z0-9_\-]{0,127}"
ALIAS = r"[A-Za-z_][A-Za-z0-9_\-]{0,254}"
RELEASE_ID = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}"

#: what a registered model name may hold, for messages
REGISTERED_MODEL_RULE = (
    "1 to 256 printable characters, not starting or ending with a space, without '/', ':', '%', '\\', '@' or '?', "
    "not '.' and not starting with '..' (MLflow's registry refuses '/', ':' and names that are other paths, its file "
    "store '%' and path separators; '@' and '?' would break a models:/ URI), for example iris-classifier"
)
#: the characters MLflow 3.17's registry stores refuse ('/', ':'; the file store '%' and path separators) and those
#: that would end the name inside a ``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` URI ('@', '?')
_REGISTERED_MODEL_RE = re.compile(r"[^/\\:%@?\x00-\x1f\x7f-\x9f]{1,256}")

_NAME_RE = re.compile(NAME)
_MODEL_NAME_RE = re.compile(MODEL_NAME)
_ALIAS_RE = re.compile(ALIAS)
_RELEASE_ID_RE = re.compile(RELEASE_ID)


#: the scheme of every Asset model-release declares (a channel's, a spec's registry Asset). Airflow passes an
#: ``x-`` scheme through as is; any other scheme makes the first Asset built in a process load every provider's
#: URI handlers (the Amazon provider's S3 hook and boto3 among them): 0.1 ms against about 220 ms per DAG parse
#: and per task start, measured by benchmarks/bench_dag_parse.py
ASSET_SCHEME = "x-model-release"

def is_registered_model(value: object) -> bool:
    """Whether ``value`` can name an MLflow registered model (and sit in a ``models:/`` URI).

    MLflow 3.17's own rule (``mlflow.utils.validation._validate_model_name``, which every registry
    store applies): not blank, no ``/`` or ``:``, and a name that as a path normalises to itself
    (not ``.``, not starting with ``..``); its file store also refuses ``%`` and path separators.
    A space inside a name is MLflow's to accept (``models:/iris large/3`` downloads), and is accepted.
    Beyond MLflow: ``@`` and ``?`` (they end the name in a ``models:/`` URI), control characters and
    leading or trailing spaces (a name is echoed in logs and one-line errors), more than 256 characters
    (MLflow's database column).
    """
    return (
        isinstance(value, str) and _REGISTERED_MODEL_RE.fullmatch(value) is not None and value.isprintable()
        and value.strip() == value and value != "." and not value.startswith("..")
    )


def anchored(pattern: str) -> str:
    """The pattern as a JSON-schema ``pattern`` (which searches, so it needs both anchors)."""
    return f"^{pattern}$"


def is_name(value: object) -> bool:
    return isinstance(value, str) and _NAME_RE.fullmatch(value) is not None


def is_model_name(value: object) -> bool:
    return isinstance(value, str) and _MODEL_NAME_RE.fullmatch(value) is not None


def is_alias(value: object) -> bool:
    return isinstance(value, str) and _ALIAS_RE.fullmatch(value) is not None


def is_release_id(value: object) -> bool:
    return isinstance(value, str) and _RELEASE_ID_RE.fullmatch(value) is not None and ".." not in value


def check_channel(channel: str) -> str:
    """``channel`` if it is a valid channel name.

    Raises:
        SpecError: it is not (the message says what is valid).
    """
    if not is_name(channel):
        from .errors import SpecError

        raise SpecError(
            f"channel {channel!r} is not valid: use letters, digits, '_' and '-', starting with a letter "
            "(at most 64), for example 'production'"
        )
    return channel


def check_release_id(release_id: str) -> str:
    """``release_id`` if it is a valid release id.

    Raises:
        SpecError: it is not (the message says what is valid).
    """
    if not is_release_id(release_id):
        from .errors import SpecError

        raise SpecError(
            f"release id {release_id!r} is not valid: use letters, digits, '.', '_' and '-' (at most 128), "
            "for example iris-20260101T000000Z-ab12"
        )
    return release_id
