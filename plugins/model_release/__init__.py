"""model-release: take a trained model from MLflow to a Triton model store, proving it on the way.

The core stage modules (intake, export, tensorrt, repository, canary, store) never import Airflow;
``model_release.airflow`` wraps them for DAGs, and ``model_release.cli`` for people at a terminal.

The package finds nothing by walking up a source tree. Where it needs a folder of the project (the
release specs a relative path names, ``dags/``, ``.work/``), :func:`project_home` says which:
``$MODEL_RELEASE_HOME``, else the clone an editable install imports it from
(:func:`source_checkout`), else the current folder. The templates are package data
(``model_release.templates``); the local Triton's runtime is a setting
(``$MODEL_RELEASE_TRITON_RUNTIME``, :mod:`model_release.triton.local`).
"""

from __future__ import annotations

import os
from pathlib import Path

#: the distribution's version, in this one place (pyproject.toml reads it; so does the Airflow provider's info)
__version__ = "0.1.0"

#: where relative spec paths, ``releases/``, ``dags/`` and ``.work/`` are looked for (:func:`project_home`)
HOME_ENV = "MODEL_RELEASE_HOME"

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


def source_checkout() -> Path | None:
    """The clone this package is imported from, or None when it is installed (a wheel).

    An editable install (what ``make setup`` does) imports ``<clone>/plugins/model_release``; a clone
    is recognised by that folder and the project file beside ``plugins/``, never by walking upwards.
    """
    package = Path(__file__).resolve().parent
    clone = package.parent.parent
    if package.parent.name == "plugins" and (clone / "pyproject.toml").is_file() and (clone / "model_repository_template").is_dir():
        return clone
    return None


def project_home() -> Path:
    """``$MODEL_RELEASE_HOME``, else the clone (:func:`source_checkout`), else the current folder."""
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env)
    return source_checkout() or Path.cwd()
