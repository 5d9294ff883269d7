# The GPU worker of model-release: the Celery worker of queue "gpu" that runs the TensorRT stage. It is the
# Airflow image (airflow.Dockerfile) plus TensorRT and the CUDA build of PyTorch (the plan's parity check
# runs it on the GPU); it needs the NVIDIA container runtime and one GPU.
#
#   uv build && docker build -f infra/docker/airflow.Dockerfile -t model-release/airflow:3.3.2-model-release .
#   docker build -f infra/docker/worker-gpu.Dockerfile -t model-release/airflow-gpu:3.3.2-model-release .
#
# TENSORRT_VERSION must be the TensorRT of the Triton canary and the serving Tritons (the canary's
# connection declares it as extra.tensorrt, and a plan built with another version is refused before it
# loads). torch is not in requirements.lock (CI installs the CPU build), so it is held only by the
# project's range.

ARG BASE_IMAGE=model-release/airflow:3.3.2-model-release
FROM ${BASE_IMAGE}

ARG AIRFLOW_VERSION=3.3.2
ARG MODEL_RELEASE_VERSION=0.1.0
ARG MODEL_RELEASE_WHEEL=model_release-${MODEL_RELEASE_VERSION}-py3-none-any.whl
ARG TENSORRT_VERSION=10.3.0

RUN pip install --no-cache-dir --constraint /opt/model-release/requirements.lock \
        "apache-airflow==${AIRFLOW_VERSION}" \
        "/opt/model-release/${MODEL_RELEASE_WHEEL}[torch,boost]" \
        "tensorrt-cu12==${TENSORRT_VERSION}"

# the worker serves queue "gpu" only, one TensorRT build at a time
CMD ["airflow", "celery", "worker", "--queues", "gpu", "--concurrency", "1"]
