"""model-release: take a trained model from MLflow to a Triton model store, proving it on the way.

The core stage modules (intake, export, tensorrt, repository, canary, store) never import Airflow;
``model_release.airflow`` wraps them for DAGs, and ``model_release.cli`` for people at a terminal.
"""

__version__ = "0.1.0"

#: The cyclic garbage collector's thresholds in model-release's own long-running processes (the CLI, DAG
#: sessions, the test workers). A process that has imported MLflow, scikit-learn and Airflow tracks about
#: 700,000 objects, and Python's default (700, 10, 10) ran 28 full collections of them in 47 s of tests,
#: 6.4 s of their 42 s of CPU; at (50,000, 10, 10), none, and 3.1 s in all. Cyclic garbage lives a little
#: longer (a few MB at most).
GC_THRESHOLD = (50_000, 10, 10)


def collect_less() -> None:
    """Set :data:`GC_THRESHOLD` for this process."""
    import gc

    gc.set_threshold(*GC_THRESHOLD)
