"""Rules on two config.pbtxt sections Triton checks on their own: ``model_metrics`` and ``runtime``.

``model_metrics`` (per-model histogram buckets) came with Triton 24.11 (core #405); the Triton this
product pins (2.51, release 24.10) does not know the field, so its repository poll fails to read the
whole config ("failed to read text proto") and the model is refused. A newer Triton validates each
``metric_control`` (core ``model_config_utils.cc`` ValidateModelMetrics) and ignores, with a
warning, a family it cannot customise (``metric_model_reporter.cc``). Both are reported, in
Triton's words, so a config written for a newer server is refused before it reaches this one.

``runtime`` names the backend's shared library; Triton refuses a name whose path leaves the folder
it is found in (``backend_model.cc`` ResolveBackendPaths, IsChildPathEscapingParentPath), or that it
cannot find at all. Checked on the local tritonserver 2.51 (``tests/repository/agreement_cases.py``).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from .model_info import Add, ModelInfo

#: the histogram families a model's ``metric_control`` can customise (core ``metric_model_reporter.h``)
CUSTOMISABLE_FAMILIES = ("nv_inference_first_response_histogram_ms",)
PINNED_TRITON = "2.51 (24.10)"


def check_model_metrics(info: ModelInfo, add: Add) -> None:
    """``model_metrics``: unreadable by the pinned Triton; each ``metric_control`` as a newer Triton checks it."""
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    if not config.HasField("model_metrics"):
        return
    add("metrics-unreadable", name, file,
        f"model_metrics is set: Triton {PINNED_TRITON} does not know the field and refuses the model (\"failed to read "
        "text proto\"); it came with Triton 24.11: remove model_metrics, or serve with 24.11 or newer")
    for index, control in enumerate(config.model_metrics.metric_control):
        problem = _metric_control_problem(control)
        where = f"model_metrics.metric_control[{index}]"
        if problem:
            add("metrics-control-invalid", name, file,
                f"{where}: Triton 24.11 and newer refuse it (\"{problem}\"): give metric_identifier.family and "
                "histogram_options.buckets")
        elif control.metric_identifier.family not in CUSTOMISABLE_FAMILIES:
            add("metrics-family-unknown", name, file,
                f"{where} names family {control.metric_identifier.family!r}, which Triton cannot customise: it logs "
                f"\"Metric family '{control.metric_identifier.family}' in 'metric_identifier' is not a customizable "
                f"metric in Triton core.\" and ignores it; customisable: {', '.join(CUSTOMISABLE_FAMILIES)}")


def _metric_control_problem(control) -> str:  # noqa: ANN001 - ModelMetrics.MetricControl
    """Triton's own words for the first thing ValidateModelMetrics refuses in ``control``, or ``""``."""
    if not control.HasField("metric_identifier"):
        return "metric control must specify 'metric_identifier'"
    if not control.metric_identifier.family:
        return "metric identifier must specify non-empty 'family'"
    if not control.HasField("histogram_options"):
        return "metric control must specify 'histogram_options'"
    if not len(control.histogram_options.buckets):
        return "histogram options must specify non-empty 'buckets'"
    return ""


def _leaves_folder(relative: str) -> bool:
    """Whether ``relative``, joined to a folder, names something outside it (absolute, or more ``..`` than depth)."""
    path = PurePosixPath(relative)
    if path.is_absolute():
        return True
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return True
    return False


def check_runtime(info: ModelInfo, add: Add) -> None:
    """``runtime``: a library path that leaves the folder Triton finds it in is refused."""
    config, name, file = info.config, info.name, info.config_file
    assert config is not None
    runtime = config.runtime
    if not runtime:
        return
    if _leaves_folder(runtime):
        add("runtime-escapes", name, file,
            f"runtime {runtime!r} leaves the folder Triton looks for it in; Triton refuses it (\"backend library name "
            f"'{runtime}' escapes backend directory '...', for model '{name}', check model config runtime field\", or "
            f"\"unable to find backend library '{runtime}'\" where no such file is there): name a library file of the "
            "backend's folder (libtriton_<backend>.so), or leave runtime empty")
