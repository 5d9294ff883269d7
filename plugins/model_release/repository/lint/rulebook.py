"""The lint rules: for each, its severity, what Triton 2.51 does with such a repository, and where.

Each rule records Triton's own behaviour, read from its sources (triton-inference-server/core
``r24.10``: ``model_config_utils.cc``, ``ensemble_scheduler/ensemble_utils.cc``,
``model_repository_manager.cc``, ``model_lifecycle.cc``, ``model.cc``; python_backend ``r24.10``)
and checked on the local tritonserver 2.51 (``tests/repository/agreement.py``):

- ``refuses``: Triton refuses to load the model (and every ensemble that uses it);
- ``fails``: Triton loads it, but requests fail or hang (for a warning: may fail);
- ``accepts``: Triton loads and serves it, probably not as meant;
- ``undecided``: whether Triton loads it depends on what files cannot tell (the server's GPUs
  and backends);
- ``unread``: the linter refuses to read the file (a symlink, a huge file), so it cannot say.

Severity is the release's policy: ``refuses``, ``fails`` and ``unread`` are errors, the rest
warnings (a few ``fails`` rules that are only a risk are warnings too).
"""

from __future__ import annotations

from typing import NamedTuple

ERROR, WARNING = "error", "warning"
REFUSES, FAILS, ACCEPTS, UNDECIDED, UNREAD = "refuses", "fails", "accepts", "undecided", "unread"

TRITON_BEHAVIOUR = {
    REFUSES: "Triton refuses to load the model (and every ensemble that uses it)",
    FAILS: "Triton loads the model, but requests fail or hang (a warning: may fail or hang)",
    ACCEPTS: "Triton loads and serves the model, probably not as meant",
    UNDECIDED: "whether Triton loads the model depends on what the files cannot tell",
    UNREAD: "the linter does not read such a file, so it cannot say what Triton would do",
}


class Rule(NamedTuple):
    """One rule. ``RULES[rule][0]`` is its severity."""

    severity: str
    triton: str  # REFUSES, FAILS, ACCEPTS, UNDECIDED or UNREAD
    catches: str
    triton_says: str = ""  # Triton's own wording, where it has one
    source: str = ""  # where Triton checks it


_MCU = "core src/model_config_utils.cc"
_ENS = "core src/ensemble_scheduler/ensemble_utils.cc ValidateEnsembleConfig"
_ENS_CFG = f"{_MCU} ValidateEnsembleSchedulingConfig"
_MRM = "core src/model_repository_manager/model_repository_manager.cc"
_LIFE = "core src/model_repository_manager/model_lifecycle.cc VersionsToLoad"
_IO = f"{_MCU} ValidateIOShape (called from core src/model.cc Model::Init)"
_PB = "python_backend src/pb_stub.cc"
_PBU = "python_backend src/resources/triton_python_backend_utils.py"

RULES: dict[str, Rule] = {
    # --- the repository and its files ----------------------------------------------------
    "repo-not-found": Rule(ERROR, UNREAD, "the repository path is not a folder"),
    "config-missing": Rule(ERROR, REFUSES, "a model folder without config.pbtxt or a model file Triton could infer one from",
                           "Invalid model name: Could not determine backend for model '...' with no backend in model configuration",
                           f"{_MCU} AutoCompleteBackendFields"),
    "config-autocomplete": Rule(WARNING, ACCEPTS, "no config.pbtxt: Triton infers one from the model file, unchecked"),
    "config-parse": Rule(ERROR, REFUSES, "config.pbtxt is not a valid ModelConfig",
                         "Poll failed for model directory '...': failed to read text proto", f"{_MRM} (ReadTextProto)"),
    "config-not-a-file": Rule(ERROR, REFUSES, "config.pbtxt is a folder or another thing that is not a regular file",
                              "failed to read text proto", f"{_MRM} (ReadTextProto)"),
    "file-symlink": Rule(ERROR, UNREAD, "config.pbtxt, model.py, a model or version folder that is a symlink: not read through"),
    "file-too-large": Rule(ERROR, UNREAD, "config.pbtxt over 1 MiB or model.py over 8 MiB: not read"),
    "file-unreadable": Rule(ERROR, UNREAD, "a file or folder the linter may not read (permissions, I/O error)"),
    "name-mismatch": Rule(ERROR, REFUSES, "config name differs from the folder name",
                          "unexpected directory name '...' for model '...', directory name must equal model name",
                          f"{_MRM} InitializeModelInfo"),
    # --- platform and backend -------------------------------------------------------------
    "platform-missing": Rule(ERROR, REFUSES, "neither platform nor backend, nor a model file to infer one from",
                             "Invalid model name: Could not determine backend for model '...'", f"{_MCU} AutoCompleteBackendFields"),
    "platform-inferred": Rule(WARNING, ACCEPTS, "no platform or backend: Triton infers the backend from the file name, "
                                                "or from a model name '<name>.<backend>'"),
    "platform-unknown": Rule(ERROR, REFUSES, "a platform Triton does not know, and no backend",
                             "unexpected platform type '...' for ...", f"{_MCU} ValidateModelConfig"),
    "platform-backend-pair": Rule(ERROR, REFUSES, "a platform that is not the one of its onnxruntime/tensorrt/pytorch/tensorflow backend",
                                  "unexpected 'platform' and 'backend' pair, got:..., ...", f"{_MCU} ValidateModelConfig"),
    "platform-conflict": Rule(WARNING, ACCEPTS, "a python or custom backend with a platform: Triton goes by the backend"),
    "ensemble-backend": Rule(ERROR, REFUSES, "platform ensemble with a backend",
                             "Ensemble model '...' must have platform type 'ensemble' and empty backend type",
                             f"{_MCU} ValidateModelConfig"),
    "backend-unknown": Rule(WARNING, UNDECIDED, "a backend this linter does not know: loads only where it is installed",
                            "unable to find backend library for backend '...'", "core src/backend_model.cc"),
    "scheduling-not-ensemble": Rule(ERROR, REFUSES, "ensemble_scheduling on a model that is not an ensemble",
                                    "ensemble scheduling cannot be set for model '...' whose platform is not ensemble", _ENS_CFG),
    "model-file-missing": Rule(ERROR, REFUSES, "a served version folder lacks the file its backend loads"),
    "python-filename": Rule(ERROR, REFUSES, "a python model file (default_model_filename) not ending in .py, e.g. model.python "
                            "for a model named '<name>.python'", "Model name must end with '.py'.",
                            f"{_PB} ModelContext::StubSetup"),
    "python-parameter-invalid": Rule(ERROR, REFUSES, "FORCE_CPU_ONLY_INPUT_TENSORS other than yes or no",
                                     "Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: ...", "python_backend src/python_be.cc ModelState"),
    # --- what Triton completes (auto-complete) ---------------------------------------------
    "autocomplete-invalid": Rule(ERROR, REFUSES, "auto_complete_config fails whatever the config: a tensor without name, "
                                 "data_type or dims or with another key, a policy key other than decoupled, a method "
                                 "ModelConfig lacks, a wrong signature, no return of its argument",
                                 "input '...' in auto-complete-config function for model '...' is missing 'dims' property. / "
                                 "auto_complete_config function in model '...' must return a valid pb.ModelConfig object.",
                                 f"{_PBU} ModelConfig; {_PB} AutoCompleteModelConfig"),
    "autocomplete-conflict": Rule(ERROR, REFUSES, "what Triton completes contradicts config.pbtxt: a tensor's data_type, dims "
                                  "or optional, a max_batch_size below the config's, dynamic batching on a sequence-batched "
                                  "model, decoupled; an ONNX file that cannot batch under a non-zero max_batch_size",
                                  "configuration expects datatype TYPE_INT32 for input '...', model provides TYPE_FP32 / "
                                  "trying to change decoupled property in auto-complete-config for model '...'",
                                  f"{_PBU} ModelConfig; onnxruntime_backend src/onnxruntime.cc AutoCompleteMaxBatch"),
    "autocomplete-ignored": Rule(WARNING, ACCEPTS, "auto_complete_config gives a data_type that is not a Triton type name "
                                 "(FP32 for TYPE_FP32): Triton cannot read the completed config back and ignores all of it "
                                 "(measured on 2.51: the model loads with config.pbtxt as it is)",
                                 source="core src/backend_model.cc TritonModel::UpdateModelConfig (JsonToModelConfig)"),
    "autocomplete-unread": Rule(WARNING, UNDECIDED, "a check that depends on what Triton completes, where the linter cannot "
                                "read that (auto_complete_config not literal, a TensorRT plan, an unreadable ONNX file)"),
    # --- versions -----------------------------------------------------------------------
    "version-none": Rule(ERROR, REFUSES, "no version folder the policy serves",
                         "at least one version must be available under the version policy of model '...'", _LIFE),
    "version-empty": Rule(ERROR, REFUSES, "a served version folder is empty"),
    "version-not-numeric": Rule(WARNING, ACCEPTS, "a folder Triton ignores because it is not a number",
                                "ignore version directory '...' which fails to convert to integral number", _LIFE),
    "version-leading-zero": Rule(WARNING, ACCEPTS, "a version folder starting with 0 (not 0 itself), which Triton ignores",
                                 "ignore version directory '...' which contains leading zeros in its directory name", _LIFE),
    "version-misread": Rule(ERROR, REFUSES, "a folder such as 1abc, which Triton reads as version 1 and then loads from 1/, absent",
                            "(std::stoll reads the leading digits; the load of the missing folder never completes)", _LIFE),
    "version-policy-missing": Rule(WARNING, ACCEPTS, "a specific version policy names a missing version (others load)",
                                   "version ... is specified for model '...', but the version directory is not present", _LIFE),
    "version-policy-none": Rule(ERROR, REFUSES, "a specific version policy names no existing version",
                                "at least one version must be available under the version policy of model '...'", _LIFE),
    "version-policy-latest-zero": Rule(ERROR, REFUSES, "a latest version policy with num_versions 0 (or unset) serves nothing",
                                       "at least one version must be available under the version policy of model '...'", _LIFE),
    "version-stray": Rule(WARNING, ACCEPTS, "several versions under a latest policy: the highest is served"),
    # --- batching and scheduling ----------------------------------------------------------
    "batch-size-invalid": Rule(ERROR, REFUSES, "max_batch_size below 0",
                               "'max_batch_size' must be non-negative value for ...", f"{_MCU} ValidateModelConfig"),
    "preferred-batch-size": Rule(ERROR, REFUSES, "a preferred batch size of 0 or less, or above max_batch_size",
                                 "dynamic batching preferred size must be positive / must be <= max batch size for ...",
                                 f"{_MCU} ValidateModelConfig"),
    "priority-level-invalid": Rule(ERROR, REFUSES, "a default or queue-policy priority level outside 1..priority_levels",
                                   "default priority level must be in range [1, N] for ...", f"{_MCU} ValidateModelConfig"),
    "preserve-ordering-conflict": Rule(ERROR, REFUSES, "preserve_ordering with several priority levels or a DELAY timeout action",
                                       "Only one priority level is allowed when 'preserve_ordering' is true for ...",
                                       f"{_MCU} ValidateModelConfig"),
    "response-cache-conflict": Rule(ERROR, REFUSES, "the response cache on a decoupled or sequence-batched model",
                                    "Response Cache does not currently support model ... with 'decoupled' transaction policy",
                                    f"{_MCU} ValidateModelConfig"),
    "sequence-batching-invalid": Rule(ERROR, REFUSES, "sequence batching controls, preferred sizes or slot utilization Triton refuses",
                                      "sequence batching control ... / unexpected data type for control CONTROL_SEQUENCE_CORRID",
                                      f"{_MCU} ValidateModelConfig, GetBooleanSequenceControlProperties"),
    "leaf-no-warmup": Rule(WARNING, ACCEPTS, "an ONNX or TensorRT leaf without model_warmup: its first request after "
                           "each load pays for lazy initialisation, which a roll-out refuses as too slow"),
    # --- model_metrics and runtime (section_rules) ---------------------------------------
    "metrics-unreadable": Rule(ERROR, REFUSES, "a model_metrics section, which Triton 2.51 cannot read (it came in 24.11)",
                               "Poll failed for model directory '...': failed to read text proto from .../config.pbtxt",
                               f"{_MRM} (ReadTextProto)"),
    "metrics-control-invalid": Rule(ERROR, REFUSES, "a metric_control without metric_identifier, family, histogram_options "
                                    "or buckets (refused by Triton 24.11 and newer; 2.51 refuses any model_metrics)",
                                    "metric control must specify 'metric_identifier' / metric identifier must specify "
                                    "non-empty 'family' / metric control must specify 'histogram_options' / histogram "
                                    "options must specify non-empty 'buckets'", f"{_MCU} ValidateModelMetrics (24.11+)"),
    "metrics-family-unknown": Rule(WARNING, ACCEPTS, "a metric_control naming a family Triton cannot customise (ignored)",
                                   "Metric family '...' in 'metric_identifier' is not a customizable metric in Triton core.",
                                   "core src/metric_model_reporter.cc MetricReporterConfig::ParseConfig (24.11+)"),
    "runtime-escapes": Rule(ERROR, REFUSES, "a runtime library path that is absolute or climbs out with '..'",
                            "backend library name '...' escapes backend directory '...', for model '...', check model "
                            "config runtime field", "core src/backend_model.cc ResolveBackendPaths"),
    "instance-count-invalid": Rule(WARNING, ACCEPTS, "an instance group count below 1: Triton uses its default count instead"),
    "instance-gpus-invalid": Rule(ERROR, REFUSES, "a KIND_CPU or KIND_MODEL instance group that lists GPUs",
                                  "instance group ... of model ... has kind KIND_CPU but specifies one or more GPUs",
                                  f"{_MCU} ValidateInstanceGroup"),
    "instance-kind-gpu": Rule(WARNING, UNDECIDED, "a KIND_GPU instance group: loads only on a server with those GPUs",
                              "instance group ... of model ... has kind KIND_GPU but no GPUs are available",
                              f"{_MCU} ValidateInstanceGroup"),
    "tensorrt-only-field": Rule(ERROR, REFUSES, "shape tensors, non-linear IO formats or instance profiles outside TensorRT",
                                "shape tensors are only supported for TensorRT platform", f"{_MCU} ValidateModelInput, ValidateInstanceGroup"),
    # --- tensors ---------------------------------------------------------------------------
    "tensor-duplicate": Rule(WARNING, ACCEPTS, "two inputs or two outputs with the same name (Triton keeps the first)"),
    "tensor-name-empty": Rule(ERROR, REFUSES, "an input or output without a name", "model input must specify 'name'", _IO),
    "datatype-invalid": Rule(ERROR, REFUSES, "a tensor without a data type", "model input '...' must specify 'data_type'", _IO),
    "dims-invalid": Rule(ERROR, REFUSES, "a tensor with no dims, a 0 or a value below -1",
                         "model input '...' must specify 'dims' / dimension must be integer >= 1, or -1", _IO),
    "reshape-invalid": Rule(ERROR, REFUSES, "reshape with a 0 or a value below -1, or an empty reshape without batching",
                            "reshape dimensions must be integer >= 1, or -1 / cannot have empty reshape for non-batching model", _IO),
    "reshape-mismatch": Rule(ERROR, REFUSES, "reshape whose element count (between variable dims) differs from dims",
                             "model input '...' has different size for dims and reshape", _IO),
    "tensor-format-dims": Rule(ERROR, REFUSES, "an NHWC or NCHW input without exactly 3 dims",
                               "model input NHWC/NCHW require 3 dims", f"{_MCU} ValidateModelInput"),
    "label-file-missing": Rule(ERROR, REFUSES, "an output's label_filename that is not a file in the model folder",
                               "failed to open text file for read ...", "core src/model.cc Model::Init (LabelProvider)"),
    "batch-io-invalid": Rule(ERROR, REFUSES, "a batch_input or batch_output with a wrong kind, type, source or target",
                             "unknown source input name '...'", f"{_MCU} ValidateBatchIO"),
    # --- ensembles -------------------------------------------------------------------------
    "ensemble-instance-group": Rule(ERROR, REFUSES, "instance_group on an ensemble",
                                    "instance group should not be specified for ensemble '...'", _ENS_CFG),
    "ensemble-own-settings": Rule(ERROR, REFUSES, "optimization or model_warmup on an ensemble",
                                  "model_warmup can not be specified for ensemble '...'", _ENS_CFG),
    "ensemble-no-steps": Rule(ERROR, REFUSES, "an ensemble without steps",
                              "ensemble scheduling must be set for ensemble ... / must specify 'step' for ensemble '...'", _ENS_CFG),
    "ensemble-step-incomplete": Rule(ERROR, REFUSES, "a step without model_name, input_map or output_map",
                                     "must specify 'input_map' in step N of ensemble '...'", f"{_MCU} BuildEnsembleGraph"),
    "ensemble-step-missing": Rule(ERROR, REFUSES, "an ensemble step naming a model not in the repository",
                                  "ensemble ... contains models that are not available or ambiguous: ...", _MRM),
    "ensemble-version-missing": Rule(ERROR, REFUSES, "a step asking for a version the member does not serve (0 too: only -1 means any)",
                                     "ensemble '...' depends on '...' whose required version N is not loaded.", f"{_MRM} CheckNode"),
    "ensemble-member-invalid": Rule(ERROR, REFUSES, "an ensemble whose member Triton refuses to load",
                                    "ensemble '...' depends on '...' which has no loaded version", f"{_MRM} CheckNode"),
    "ensemble-batch-size": Rule(ERROR, REFUSES, "an ensemble batching beyond a batching member's max_batch_size",
                                "ensemble ... allows maximum batch size N, but it contains model ... which only allows maximum "
                                "batch size to be M", _ENS),
    "ensemble-map-unknown": Rule(ERROR, REFUSES, "a map key that is not a tensor of the member",
                                 "ensemble tensor ... is mapping to non-existing input ... in model ...", _ENS),
    "ensemble-input-unmapped": Rule(ERROR, REFUSES, "a required member input missing from its step's input_map",
                                    "input ... in model ... is not mapped to any ensemble tensors", _ENS),
    "ensemble-tensor-double": Rule(ERROR, REFUSES, "an ensemble tensor written by two step outputs",
                                   "ensemble tensor '...' can appear in an output map only once", f"{_MCU} BuildEnsembleGraph"),
    "ensemble-input-overwritten": Rule(WARNING, ACCEPTS, "a step output written to the name of an ensemble input"),
    "ensemble-tensor-unproduced": Rule(ERROR, REFUSES, "an ensemble tensor nobody produces",
                                       "output '...' for ensemble '...' is not written", _ENS_CFG),
    "ensemble-input-unused": Rule(ERROR, REFUSES, "an ensemble input no step reads",
                                  "ensemble input '...' for ensemble ...' is not used", _ENS_CFG),
    "ensemble-tensor-unused": Rule(ERROR, REFUSES, "an intermediate tensor nobody reads",
                                   "ensemble tensor '...' is unused in ensemble '...'", _ENS_CFG),
    "ensemble-dtype-mismatch": Rule(ERROR, REFUSES, "two ends of an ensemble tensor with different data types",
                                    "inconsistent data type: ... is inferred from model ... while ...", _ENS),
    "ensemble-shape-mismatch": Rule(ERROR, REFUSES, "two ends of an ensemble tensor whose shapes agree neither with nor without the batch dim",
                                    "inconsistent shape: ... is inferred from model ... while ...", _ENS),
    "ensemble-decoupled-mix": Rule(ERROR, REFUSES, "a step (or the outputs) fed from different decoupled models",
                                   "step of model '...' receives inputs originated from different decoupled models", _ENS),
    "ensemble-cycle": Rule(ERROR, REFUSES, "ensembles whose steps lead back to themselves",
                           "circular dependency between ensembles: ...", f"{_MRM} CircularDependencyCheck"),
    # --- python models and BLS -------------------------------------------------------------
    "python-syntax": Rule(ERROR, REFUSES, "model.py does not parse, or has return, yield or await outside a function",
                          "SyntaxError: ...", f"{_PB} (import of model.py)"),
    "python-no-model-class": Rule(ERROR, REFUSES, "model.py has no TritonPythonModel class",
                                  "AttributeError: module '1.model' has no attribute 'TritonPythonModel'", f"{_PB} Stub::Initialize"),
    "python-no-execute": Rule(ERROR, FAILS, "TritonPythonModel has no execute method",
                              "... does not implement `execute` method.", f"{_PB} Stub::ProcessRequests"),
    "python-await-in-sync": Rule(ERROR, REFUSES, "await in a function that is not async",
                                 "SyntaxError: 'await' outside async function", f"{_PB} (import of model.py)"),
    "python-undefined-at-load": Rule(ERROR, REFUSES, "a name never defined, used where model.py runs at load (module, class, initialize)",
                                     "NameError: name '...' is not defined", f"{_PB} (import, Stub::Initialize)"),
    "python-undefined-name": Rule(ERROR, FAILS, "a name never defined, used in code that runs per request",
                                  "NameError: name '...' is not defined", f"{_PB} Stub::ProcessRequests"),
    "python-no-responses": Rule(ERROR, FAILS, "execute of a non-decoupled model returns nothing"),
    "python-execute-stub": Rule(WARNING, FAILS, "execute of a non-decoupled model is a placeholder (pass, ..., a docstring): "
                                "loaded, but every request fails; a warning, since models only loaded are written so"),
    "decoupled-returns": Rule(ERROR, FAILS, "execute of a decoupled model returns responses instead of None",
                              "... is using the decoupled mode and the execute function must return None", _PB),
    "bls-target-missing": Rule(ERROR, FAILS, "a BLS call to a model not in the repository"),
    "bls-target-dynamic": Rule(WARNING, FAILS, "a BLS call whose model name is computed at run time (requests may fail)"),
    "bls-output-unknown": Rule(ERROR, FAILS, "a BLS call requesting an output the target does not have"),
    "bls-self-call": Rule(ERROR, FAILS, "a model calling itself through BLS (deadlock)"),
    "bls-cycle": Rule(ERROR, FAILS, "models that call each other through BLS (Triton loads them; requests never end)"),
    "bls-blocking-depth": Rule(WARNING, FAILS, "blocking exec with no more instances than nested call levels (deadlock risk)"),
}


def explain(rule: str) -> str:
    """What ``rule`` catches, what Triton does, in its words and where: ``model-release lint --explain``."""
    r = RULES[rule]
    lines = [f"{rule} ({r.severity}): {r.catches}", f"  Triton: {TRITON_BEHAVIOUR[r.triton]} [{r.triton}]"]
    if r.triton_says:
        lines.append(f"  Triton says: {r.triton_says}")
    if r.source:
        lines.append(f"  checked in: {r.source}")
    if rule in NOT_FROM_FILES:
        lines.append("  not decided from files: " + NOT_FROM_FILES[rule])
    return "\n".join(lines)


#: what the files cannot tell, for the rules where that matters
NOT_FROM_FILES = {
    "backend-unknown": "which backends the server has installed (--backend-directory)",
    "instance-kind-gpu": "whether the server has the GPUs (a CPU server refuses KIND_GPU, a GPU server loads it)",
    "bls-target-dynamic": "the model name, which exists only when a request runs",
    "bls-blocking-depth": "how many requests arrive at once (the deadlock needs every instance waiting)",
    "python-undefined-name": "whether requests reach that line",
    "python-undefined-at-load": "whether the line runs at load (a branch may skip it); imports of packages "
                                "the server's Python lacks are not checked at all",
    "python-syntax": "errors only the compiler finds beyond those ('break' outside a loop, nonlocal misuse): "
                     "the linter parses model.py, it does not compile it",
    "file-symlink": "what the symlink points to: Triton follows it, the linter does not read through it",
    "file-too-large": "the file's content: the linter does not read it",
    "config-autocomplete": "the config Triton will infer from the model file",
    "autocomplete-unread": "what auto_complete_config sets when it is computed at run time, and the tensors of a "
                           "TensorRT plan (read only with TensorRT) or of an ONNX file onnx cannot load",
    "metrics-family-unknown": "nothing on Triton 2.51, which refuses any model_metrics (metrics-unreadable)",
    "model-file-missing": "for onnxruntime, tensorrt and other backends, whether the file's graph matches the "
                          "config (the canary's onnxruntime shim checks ONNX inputs and outputs)",
}
