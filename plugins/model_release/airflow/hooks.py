"""Hooks that own the release's connections. Credentials stay inside them: nothing here logs them.

Each hook owns one connection type of the provider (:mod:`.provider`, which also holds the form
fields Airflow's connection form shows for it); a connection of the older types (``http``, ``aws``)
is read the same way, field for field.

- :class:`MlflowHook` (type ``mlflow``; ``mlflow_conn_id="mlflow_default"``): the tracking URI, from
  the connection's ``extra.tracking_uri`` or its host (``http://mlflow:5000``); without the
  connection, ``$MLFLOW_TRACKING_URI``.
- :class:`ModelStoreHook` (type ``model_store``; ``aws_conn_id="aws_default"``): opens the model
  store with a boto3 client built by the Amazon provider's S3Hook (so ``extra.endpoint_url``, roles
  and the standard AWS chain all work); ``file:///`` stores need no connection.
- :class:`TritonCanaryHook` (type ``triton_canary``; ``triton_conn_id="triton_canary"``): a remote
  canary's ``host:port`` and what it declares in the extra (object-store repository, GPU or CPU,
  TensorRT version, compute capability); without the connection the canary starts an embedded
  local Triton.

The serving fleet needs no connection: each serving Triton's agent registers in the model store
(:mod:`model_release.serve.membership`), where the rollout task finds it.
"""

from __future__ import annotations

import os
import warnings
from typing import Any
from urllib.parse import urlparse

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from ..errors import ServiceUnavailable
from .provider import CONNECTION_TYPES


def _connection(conn_id: str) -> Any | None:
    """The connection, or None when it is not defined.

    Raises:
        ServiceUnavailable: it could not be read (a secrets backend or the API server failed); the
            message names the connection and the error's type only, never its text, which may
            carry the connection's URI.
    """
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None
    except Exception as exc:  # noqa: BLE001 - converted at the boundary
        raise ServiceUnavailable(
            f"Airflow connection {conn_id!r} could not be read ({type(exc).__name__}); check the secrets backend "
            "or the Airflow API server, then retry"
        ) from None


class _ProviderHook(BaseHook):
    """The connection form of the hook's type, from :data:`~.provider.CONNECTION_TYPES`.

    Airflow 3.2 and later read the same fields from the provider's info and never call these; what still asks
    a hook (Airflow before 3.2, tools on the older interface) gets them here, with Flask-AppBuilder installed.
    """

    conn_type: str

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The form's extra fields (wtforms), by the name they have in the connection's extra."""
        from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
        from flask_babel import lazy_gettext
        from wtforms import BooleanField, StringField

        widgets: dict[str, Any] = {}
        for name, field in CONNECTION_TYPES[cls.conn_type]["conn-fields"].items():
            label, description = lazy_gettext(field["label"]), field["description"]
            if "boolean" in field["schema"]["type"]:
                widgets[name] = BooleanField(label, description=description)
            else:
                widgets[name] = StringField(label, widget=BS3TextFieldWidget(), description=description)
        return widgets

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Which standard fields the form hides, renames and fills with an example."""
        behaviour = CONNECTION_TYPES[cls.conn_type]["ui-field-behaviour"]
        return {"hidden_fields": list(behaviour["hidden-fields"]), "relabeling": dict(behaviour["relabeling"]),
                "placeholders": dict(behaviour["placeholders"])}


class MlflowHook(_ProviderHook):
    conn_name_attr = "mlflow_conn_id"
    default_conn_name = "mlflow_default"
    conn_type = "mlflow"
    hook_name = CONNECTION_TYPES[conn_type]["hook-name"]

    def __init__(self, mlflow_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.mlflow_conn_id = mlflow_conn_id

    def tracking_uri(self) -> str:
        """The tracking URI; a password in it is registered with Airflow's secrets masker."""
        uri = self._tracking_uri()
        password = urlparse(uri).password
        if password:
            from airflow.sdk.log import mask_secret

            mask_secret(password)
        return uri

    def _tracking_uri(self) -> str:
        conn = _connection(self.mlflow_conn_id)
        if conn is not None:
            extra = conn.extra_dejson or {}
            if extra.get("tracking_uri"):
                return str(extra["tracking_uri"])
            if conn.host:
                scheme = conn.schema or conn.conn_type or "http"
                scheme = scheme if scheme in ("http", "https") else "http"
                host = conn.host if "://" in conn.host else f"{scheme}://{conn.host}"
                return f"{host}:{conn.port}" if conn.port else host
        env = os.environ.get("MLFLOW_TRACKING_URI")
        if env:
            return env
        raise ServiceUnavailable(
            f"no MLflow tracking URI: Airflow connection {self.mlflow_conn_id!r} does not exist and "
            "MLFLOW_TRACKING_URI is unset. Create the connection (extra {\"tracking_uri\": ...}) or set the variable."
        )


class ModelStoreHook(_ProviderHook):
    conn_name_attr = "aws_conn_id"
    default_conn_name = "aws_default"
    conn_type = "model_store"
    hook_name = CONNECTION_TYPES[conn_type]["hook-name"]

    def __init__(self, aws_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.aws_conn_id = aws_conn_id

    def s3_client(self) -> Any:
        """A boto3 S3 client from the connection (endpoint, role, keys), or the standard AWS chain without one."""
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        conn = _connection(self.aws_conn_id)
        with warnings.catch_warnings():
            # a model_store connection holds an AWS connection's fields under another type, which S3Hook
            # reads as they are but warns about ("expected connection type 'aws'")
            warnings.filterwarnings("ignore", message=r".*expected connection type 'aws'", category=UserWarning)
            return S3Hook(aws_conn_id=self.aws_conn_id if conn is not None else None).get_conn()

    def open_store(self, uri: str) -> Any:
        from ..store import open_store

        if not uri.startswith("s3://"):
            return open_store(uri)
        return open_store(uri, s3_client=self.s3_client())


class TritonCanaryHook(_ProviderHook):
    conn_name_attr = "triton_conn_id"
    default_conn_name = "triton_canary"
    conn_type = "triton_canary"
    hook_name = CONNECTION_TYPES[conn_type]["hook-name"]

    def __init__(self, triton_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.triton_conn_id = triton_conn_id

    def endpoint(self) -> str | None:
        conn = _connection(self.triton_conn_id)
        if conn is None or not conn.host:
            return None
        return f"{conn.host}:{conn.port or 8000}"

    def remote(self) -> Any:
        """The remote canary (:class:`~model_release.triton.delivery.RemoteCanary`) the connection
        describes, or None without one (the canary then starts an embedded local Triton).

        The connection's host and port are Triton's HTTP endpoint; its extra says what the server
        declares: ``repository`` (its object-store model repository, ``s3://BUCKET/PREFIX``),
        ``gpu`` (false for a CPU Triton with the python backend only), ``tensorrt`` and
        ``compute_capability`` (what TensorRT plans must have been built for), ``auto_complete``
        (false for a server started with ``--disable-auto-complete-config``; a release that needs
        Triton to complete its configs is then refused before anything is delivered).
        """
        from ..triton.delivery import RemoteCanary

        conn = _connection(self.triton_conn_id)
        if conn is None or not conn.host:
            return None
        host = conn.host.removeprefix("http://")
        return RemoteCanary.from_extra(f"{host}:{conn.port or 8000}", conn.extra_dejson or {})
