"""model-release as an Airflow provider: what ``airflow providers list`` and the connection form show.

Airflow finds :func:`get_provider_info` through the ``apache_airflow_provider`` entry point
(pyproject.toml) and calls it in every process that lists providers or connection types, so this
module is data only: it imports nothing but the package's version. The hooks
(:mod:`model_release.airflow.hooks`) build their form widgets from the same :data:`CONNECTION_TYPES`.

The three connection types, each owned by one hook (its connection argument and default connection in
brackets; the tasks and operators take the argument by that name):

- ``mlflow``: the MLflow tracking server (``mlflow_conn_id="mlflow_default"``);
- ``triton_canary``: the Triton that judges a candidate (``triton_conn_id="triton_canary"``);
- ``model_store``: the S3 model store (``aws_conn_id="aws_default"``; a plain ``aws`` connection
  works the same).

The serving Tritons need none: their agents register in the model store, where the rollout finds them.

Airflow 3.2 and later (every version this package supports) read the fields declaratively
(``conn-fields``, ``ui-field-behaviour``) without importing the hooks. The hooks'
``get_connection_form_widgets`` and ``get_ui_field_behaviour`` return the same fields for what still asks
a hook (Airflow before 3.2, tools built on the older interface).
"""

from __future__ import annotations

import copy
from typing import Any

from .. import __version__

PACKAGE_NAME = "model-release"
INTEGRATION = "model-release"
HOOKS_MODULE = "model_release.airflow.hooks"

_STRING = {"type": ["string", "null"]}
_BOOLEAN = {"type": ["boolean", "null"]}


def _field(label: str, description: str, schema: dict[str, Any] = _STRING) -> dict[str, Any]:
    return {"label": label, "description": description, "schema": dict(schema)}




#: connection type -> its hook class, the form's title, its extra fields and which standard fields it hides
#: or renames (in Airflow's provider-info form: ``conn-fields``, ``ui-field-behaviour``)
CONNECTION_TYPES: dict[str, dict[str, Any]] = {
    "mlflow": {
        "hook-class-name": f"{HOOKS_MODULE}.MlflowHook",
        "hook-name": "MLflow tracking server",
        "conn-fields": {
            "tracking_uri": _field("Tracking URI", "The whole tracking URI (http://mlflow:5000, https://..., "
                                   "databricks); when set, Host, Port and Schema are not read"),
        },
        "ui-field-behaviour": {
            "hidden-fields": ["login", "password"],
            "relabeling": {"host": "Tracking server host", "schema": "Scheme (http or https)"},
            "placeholders": {"host": "mlflow", "port": "5000", "schema": "http"},
        },
    },
    "triton_canary": {
        "hook-class-name": f"{HOOKS_MODULE}.TritonCanaryHook",
        "hook-name": "Triton canary",
        "conn-fields": {
            "repository": _field("Model repository", "The canary's own model repository, an object-store prefix "
                                 "(s3://BUCKET/PREFIX) that Triton reads with --model-repository"),
            "gpu": _field("GPU", "Whether the server has a GPU (false: a CPU Triton with the python backend only)", _BOOLEAN),
            "tensorrt": _field("TensorRT version", "The TensorRT version the server runs (plans must be built with it)"),
            "compute_capability": _field("Compute capability", "The GPU's compute capability, e.g. 8.9 (plans must "
                                         "be built for it)"),
            "auto_complete": _field("Auto-complete configs", "False for a server started with "
                                    "--disable-auto-complete-config", _BOOLEAN),
        },
        "ui-field-behaviour": {
            "hidden-fields": ["login", "password", "schema"],
            "relabeling": {"host": "Triton HTTP host", "port": "HTTP port"},
            "placeholders": {"host": "triton-canary", "port": "8000", "repository": "s3://bucket/canary"},
        },
    },
    "model_store": {
        "hook-class-name": f"{HOOKS_MODULE}.ModelStoreHook",
        "hook-name": "model-release model store (S3)",
        "conn-fields": {
            "endpoint_url": _field("Endpoint URL", "An S3-compatible endpoint; empty for AWS S3"),
            "region_name": _field("Region", "The bucket's region, e.g. us-east-1"),
            "role_arn": _field("Role ARN", "A role to assume for the store; empty to use the keys or the AWS chain"),
        },
        "ui-field-behaviour": {
            "hidden-fields": ["host", "port", "schema"],
            "relabeling": {"login": "AWS Access Key ID", "password": "AWS Secret Access Key"},
            "placeholders": {"login": "empty: the worker's AWS chain (instance role, environment)",
                             "region_name": "us-east-1"},
        },
    },
}


def get_provider_info() -> dict[str, Any]:
    """The provider's info in Airflow's runtime schema (``airflow/provider_info.schema.json``)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "model-release",
        "description": "Release models from the MLflow registry to NVIDIA Triton Inference Server behind parity and "
                       "canary gates, with an S3 model store and staged roll-outs.",
        "versions": [__version__],
        "integrations": [{"integration-name": INTEGRATION, "tags": ["software"]}],
        "operators": [{"integration-name": INTEGRATION, "python-modules": ["model_release.airflow.operators"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": [HOOKS_MODULE]}],
        "connection-types": [{"connection-type": conn_type, **copy.deepcopy(spec)} for conn_type, spec in CONNECTION_TYPES.items()],
    }
