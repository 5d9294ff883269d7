"""The provider's info is what Airflow's schema and providers manager accept: four connection types, each
owned by a hook whose form (fields, hidden and renamed standard fields) is the one the info declares."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from model_release.airflow.provider import CONNECTION_TYPES, PACKAGE_NAME, get_provider_info

# model_release.airflow.hooks and Airflow's providers manager import Airflow (seconds): imported in the
# tests, so collecting this file on every pytest-xdist worker does not.


def test_the_info_passes_airflows_runtime_schema_and_names_this_distribution() -> None:
    import airflow
    import jsonschema

    import model_release

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == PACKAGE_NAME == "model-release"  # Airflow refuses a name the distribution does not have
    assert info["versions"] == [model_release.__version__]
    assert [c["connection-type"] for c in info["connection-types"]] == ["mlflow", "triton_canary", "model_store"]
    info["connection-types"][0]["conn-fields"]["tracking_uri"]["label"] = "changed"  # a caller's copy, not the module's
    assert CONNECTION_TYPES["mlflow"]["conn-fields"]["tracking_uri"]["label"] == "Tracking URI"


def import_string(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_each_hook_owns_its_type_and_serves_the_form_the_info_declares() -> None:
    for conn_type, spec in CONNECTION_TYPES.items():
        hook = import_string(spec["hook-class-name"])
        assert hook.conn_type == conn_type and hook.hook_name == spec["hook-name"]
        declared = spec["ui-field-behaviour"]
        assert hook.get_ui_field_behaviour() == {"hidden_fields": declared["hidden-fields"], "relabeling": declared["relabeling"],
                                                 "placeholders": declared["placeholders"]}
    names = {import_string(s["hook-class-name"]).conn_name_attr for s in CONNECTION_TYPES.values()}
    assert names == {"mlflow_conn_id", "aws_conn_id", "triton_conn_id"}  # the keyword names the tasks and operators pass


def test_airflows_providers_manager_registers_the_types_and_their_fields() -> None:
    from airflow.providers_manager import ProvidersManager  # the connection form's side
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime  # the tasks' side

    manager = ProvidersManager()
    assert manager.providers[PACKAGE_NAME].data["package-name"] == PACKAGE_NAME
    hooks = ProvidersManagerTaskRuntime().hooks
    for conn_type, spec in CONNECTION_TYPES.items():
        info = hooks[conn_type]
        assert info is not None and info.package_name == PACKAGE_NAME and info.hook_class_name == spec["hook-class-name"]
        for field in spec["conn-fields"]:
            assert f"extra__{conn_type}__{field}" in manager.connection_form_widgets, field
        behaviour = manager.field_behaviours[conn_type]
        assert behaviour["hidden_fields"] == spec["ui-field-behaviour"]["hidden-fields"]
    assert manager.field_behaviours["model_store"]["placeholders"]["extra__model_store__region_name"] == "us-east-1"


@pytest.mark.integration
def test_a_model_store_connection_reaches_the_store_without_the_aws_type_warning(monkeypatch, recwarn) -> None:
    from model_release.airflow.hooks import ModelStoreHook
    from model_release.local.moto_process import MotoServer, ensure_bucket

    with MotoServer() as moto:
        ensure_bucket(moto.endpoint_url, "typed-bucket")
        monkeypatch.setenv("AIRFLOW_CONN_STORE_TYPED", json.dumps(
            {"conn_type": "model_store", "login": "key-id", "password": "secret-key",
             "extra": {"endpoint_url": moto.endpoint_url, "region_name": "us-east-1"}}))
        client = ModelStoreHook("store_typed").s3_client()
        client.put_object(Bucket="typed-bucket", Key="probe", Body=b"x")
        assert moto.client().get_object(Bucket="typed-bucket", Key="probe")["Body"].read() == b"x"
    assert not [w for w in recwarn if "expected connection type 'aws'" in str(w.message)]
