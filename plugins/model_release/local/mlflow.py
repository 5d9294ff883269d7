"""A local MLflow: tracking and registry on SQLite, artifacts in a folder beside it.

Nothing here starts a server: MLflow's client talks to the SQLite file directly, which is all the
embedded stack and the tests need. Every experiment created here gets an ``artifact_location``
under the given root, so nothing is ever written to ``./mlruns`` in the current folder.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ServiceUnavailable
from ..mlflow_env import quiet_mlflow_env

#: the experiment :func:`local_tracking` creates and :func:`use_local_tracking` selects
DEFAULT_EXPERIMENT = "model-release"


def tracking_uri_for(root: Path) -> str:
    """The ``sqlite:///`` URI of the tracking database under ``root`` (nothing is created)."""
    return f"sqlite:///{(Path(root).resolve() / 'mlflow.db').as_posix()}"


def artifact_root_for(root: Path) -> Path:
    """The folder under ``root`` that holds the artifacts of experiments created here."""
    return Path(root).resolve() / "artifacts"


def ensure_experiment(tracking_uri: str, name: str, artifact_root: Path) -> str:
    """Create (or find) an experiment whose artifacts live under ``artifact_root``.

    Args:
        tracking_uri: the MLflow tracking URI (``sqlite:///...``).
        name: the experiment name.
        artifact_root: a local folder; the experiment's artifacts go to ``artifact_root/<name>``.

    Returns:
        The experiment id.

    Raises:
        ServiceUnavailable: the tracking store cannot be opened.
    """
    quiet_mlflow_env()
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        existing = client.get_experiment_by_name(name)
        if existing is not None:
            return existing.experiment_id
        location = (Path(artifact_root).resolve() / name).as_uri()
        return client.create_experiment(name, artifact_location=location)
    except MlflowException as exc:
        raise ServiceUnavailable(
            f"MLflow tracking store {tracking_uri!r} could not be opened ({exc.message}); "
            "check that the folder exists and is writable"
        ) from exc


def local_tracking(root: Path, *, experiment: str = DEFAULT_EXPERIMENT) -> str:
    """Prepare a local MLflow under ``root`` and return its tracking URI.

    Creates ``root``, the SQLite database ``root/mlflow.db`` (MLflow migrates it on first use) and
    an experiment named ``experiment`` whose artifacts live under ``root/artifacts``.

    Args:
        root: a folder for the database and the artifacts.
        experiment: the experiment to create for runs logged against this store.

    Returns:
        The ``sqlite:///...`` tracking URI (also usable as the registry URI).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    artifact_root_for(root).mkdir(parents=True, exist_ok=True)
    uri = tracking_uri_for(root)
    ensure_experiment(uri, experiment, artifact_root_for(root))
    return uri


def use_local_tracking(root: Path, *, experiment: str = DEFAULT_EXPERIMENT) -> str:
    """:func:`local_tracking`, then point this process's ``mlflow`` module at it.

    Sets the tracking and registry URIs and the active experiment, so ``mlflow.start_run()`` and
    ``log_model(..., registered_model_name=...)`` write under ``root``.

    Returns:
        The tracking URI.
    """
    import mlflow

    uri = local_tracking(root, experiment=experiment)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    mlflow.set_experiment(experiment)
    return uri
