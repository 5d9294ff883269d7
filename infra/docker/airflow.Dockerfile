# The Airflow image of model-release: the official Apache Airflow image plus the model-release wheel
# (its provider registers the connection types; its DAG factory and operators are what DAG files import).
# Scheduler, API server, DAG processor, triggerer and the CPU Celery workers all run it.
#
# Build from the clone's root, after `uv build` (or `python -m build`) has written the wheel to dist/:
#
#   uv build && docker build -f infra/docker/airflow.Dockerfile -t model-release/airflow:3.3.2-model-release .
#
# The wheel is installed with requirements.lock as constraints (the set CI tested) and with Airflow held
# at the base image's version, as Airflow's image documentation asks of added packages. PyTorch models
# need the torch extra on the workers that export them: --build-arg MODEL_RELEASE_EXTRAS=boost,torch.
# tests/package/test_images.py checks this file without Docker: the base image's Airflow version lies in
# the range pyproject.toml claims, and the wheel named below is the one the build makes.

ARG AIRFLOW_VERSION=3.3.2
ARG PYTHON_VERSION=3.11
FROM apache/airflow:${AIRFLOW_VERSION}-python${PYTHON_VERSION}

ARG AIRFLOW_VERSION
ARG MODEL_RELEASE_VERSION=0.1.0
ARG MODEL_RELEASE_EXTRAS=boost
ARG MODEL_RELEASE_WHEEL=model_release-${MODEL_RELEASE_VERSION}-py3-none-any.whl

COPY --chown=airflow:0 dist/${MODEL_RELEASE_WHEEL} requirements.lock /opt/model-release/
RUN pip install --no-cache-dir --constraint /opt/model-release/requirements.lock \
        "apache-airflow==${AIRFLOW_VERSION}" \
        "/opt/model-release/${MODEL_RELEASE_WHEEL}[${MODEL_RELEASE_EXTRAS}]" \
    && airflow providers list | grep -q '^model-release '

# Release specs and golden sets (releases/) and the DAG files are the team's own: mount them or bake them
# in a derived image. A relative spec path in a run's conf is read under MODEL_RELEASE_HOME.
ENV MODEL_RELEASE_HOME=/opt/airflow
