"""The model registry follows the store: MLflow aliases and tags track the channel pointer.

After a pointer move, the follower sets the registered-model alias (``production`` by default)
on the model version the release was built from (``release.json`` -> ``model.name`` /
``model.version``) and tags that version with the release id, the channel and the report's
location. A rollback moves the alias to the version recorded in the target release.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..errors import ServiceUnavailable, StoreError

log = logging.getLogger(__name__)

TAG_RELEASE = "model_release.release_id"
TAG_CHANNEL = "model_release.channel"
TAG_REPORT = "model_release.report_uri"
TAG_STORE = "model_release.release_uri"


class RegistryFollower(Protocol):
    """What promotion and rollback call after the channel pointer moved."""

    def on_promote(self, manifest: dict[str, Any], channel: str, release_id: str, report_uri: str | None) -> str | None:
        """The channel now points at ``release_id``; returns the alias set, if any."""
        ...

    def on_rollback(self, manifest: dict[str, Any], channel: str, release_id: str, report_uri: str | None) -> str | None:
        """The channel was moved back to ``release_id`` (whose manifest is given); returns the alias set."""
        ...


def model_ref(manifest: dict[str, Any], *, where: str = "release.json") -> tuple[str, str]:
    """(registered model name, version) from a manifest's ``model`` section."""
    model = manifest.get("model") if isinstance(manifest, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    version = model.get("version") if isinstance(model, dict) else None
    if not name or version in (None, ""):
        raise StoreError(
            f"{where} has no model.name / model.version (found {model!r}); the registry cannot follow a release "
            "that does not say which MLflow model version it was built from"
        )
    return str(name), str(version)


def report_uri(store: Any, release_id: str, manifest: dict[str, Any]) -> str:
    """Where the release's report lives in the store (the HTML report when there is one)."""
    files = manifest.get("files") or {}
    for candidate in ("reports/report.html", "reports/report.json"):
        if candidate in files:
            return store.release_uri(release_id) + candidate
    return store.release_uri(release_id) + "reports/"


class MlflowFollower:
    """Keeps an MLflow registered-model alias on the version a channel serves.

    Args:
        tracking_uri: the MLflow tracking URI (``sqlite:///...``, ``http://...``).
        alias: the alias to move (``production``).
        registry_uri: the model registry URI when it differs from the tracking URI.
    """

    def __init__(self, tracking_uri: str, alias: str = "production", *, registry_uri: str | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.alias = alias
        self.registry_uri = registry_uri

    def _client(self) -> Any:
        from ..mlflow_env import quiet_mlflow_env

        quiet_mlflow_env()  # bounded requests: an unreachable registry fails in seconds, not minutes
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.registry_uri)

    def _follow(self, manifest: dict[str, Any], tags: dict[str, str], action: str) -> str:
        name, version = model_ref(manifest)
        from mlflow.exceptions import MlflowException

        client = self._client()
        try:
            client.get_model_version(name, version)
            client.set_registered_model_alias(name, self.alias, version)
            for key, value in tags.items():
                client.set_model_version_tag(name, version, key, value)
        except MlflowException as exc:
            code = getattr(exc, "error_code", "")
            if code == "RESOURCE_DOES_NOT_EXIST":
                raise StoreError(
                    f"{action}: MLflow has no model version {name!r} v{version} (release.json model section); "
                    "the release was built from a version that no longer exists in the registry"
                ) from None
            raise ServiceUnavailable(f"{action}: MLflow at the tracking URI refused the alias update ({code or type(exc).__name__})") from None
        log.info("%s: MLflow alias %s of %s -> version %s", action, self.alias, name, version)
        return self.alias

    def on_promote(self, manifest: dict[str, Any], channel: str, release_id: str, report_uri: str | None) -> str | None:
        tags = {TAG_RELEASE: release_id, TAG_CHANNEL: channel}
        if report_uri:
            tags[TAG_REPORT] = report_uri
        return self._follow(manifest, tags, "promote")

    def on_rollback(self, manifest: dict[str, Any], channel: str, release_id: str, report_uri: str | None) -> str | None:
        tags = {TAG_RELEASE: release_id, TAG_CHANNEL: channel}
        if report_uri:
            tags[TAG_REPORT] = report_uri
        return self._follow(manifest, tags, "rollback")
