"""The repository linter: checks a Triton model repository the way Triton 2.51 would at load time, and more.

- :mod:`.linter` walks the repository, runs the rule families on each model and the rules on the
  dependency graph; :func:`lint_repository` is the API;
- the rule families: :mod:`.file_rules` (config.pbtxt, version folders, model files),
  :mod:`.config_rules` (platform, tensors, scheduling), :mod:`.section_rules` (``model_metrics``,
  ``runtime``), :mod:`.ensemble_rules`,
  :mod:`.python_rules` (model.py and BLS calls, read through :mod:`.python_analysis`);
- :mod:`.autocomplete` first completes each config as Triton's backends do (python
  ``auto_complete_config``, read statically by :mod:`.autocomplete_read`; the tensors of an ONNX
  file), so the rules check what Triton checks;
- :mod:`.rulebook` lists every rule with its severity and what Triton does with it;
- :mod:`.findings` holds findings and the report (text made safe for a terminal);
- :mod:`.model_info` is what the rule modules learn about one model; :mod:`.callgraph` the
  dependency graph (cycles, depths, load order);
- :mod:`.cli` is ``model-release lint``.
"""

from .linter import ERROR, RULES, WARNING, Finding, LintReport, ModelInfo, lint_repository

__all__ = ["RULES", "ERROR", "WARNING", "Finding", "LintReport", "ModelInfo", "lint_repository"]
