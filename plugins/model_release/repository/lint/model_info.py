"""What the linter learns about one model folder, shared by the rule modules (no rule module imports another)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tritonclient.grpc import model_config_pb2 as mc

from .python_analysis import PythonAnalysis

#: how a rule module reports: add(rule, model, file, message)
Add = Callable[[str, str, str, str], None]


@dataclass
class ModelInfo:
    """One model folder: its config, kind (backend), versions and dependencies."""

    name: str
    path: Path
    config_file: str
    config: mc.ModelConfig | None = None
    kind: str | None = None  # ensemble, python, onnxruntime, tensorrt, ... (the backend)
    versions: list[int] = field(default_factory=list)  # the versions Triton sees
    served: list[int] = field(default_factory=list)  # those the version policy loads
    folders: dict[int, Path] = field(default_factory=dict)  # version -> its folder, where it exists
    python: dict[int, PythonAnalysis] = field(default_factory=dict)
    deps: set[str] = field(default_factory=set)  # ensemble steps and BLS targets
    steps: set[str] = field(default_factory=set)  # ensemble steps only: what Triton loads first

    @property
    def instances(self) -> int:
        """Instances Triton starts (a count below 1 takes Triton's default, 1)."""
        if self.config is None or not len(self.config.instance_group):
            return 1
        return sum(max(g.count, 1) for g in self.config.instance_group)

    @property
    def decoupled(self) -> bool:
        return self.config is not None and self.config.model_transaction_policy.decoupled
