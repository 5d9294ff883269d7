"""model-release: take a trained model from MLflow to a Triton model store, proving it on the way.

The core stage modules (intake, export, tensorrt, repository, canary, store) never import Airflow;
``model_release.airflow`` wraps them for DAGs, and ``model_release.cli`` for people at a terminal.
"""

__version__ = "0.1.0"
