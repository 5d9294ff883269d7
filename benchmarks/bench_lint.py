"""Lint time for a generated 1000-model Triton repository (target: under 2 s), per model.

The repository: 200 classifier pipelines (ensemble + python preprocess + ONNX leaf + python
postprocess), 66 cascades (BLS router + two ONNX leaves) and 2 single models, all assembled by
model-release and copied under distinct names. The baseline, measured in the same run, is only
reading and parsing every config.pbtxt with protobuf's text_format: the floor any linter that
reads configs through ModelConfig pays.

    .venv/bin/python benchmarks/bench_lint.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model_release.repository.assemble import assemble  # noqa: E402
from model_release.repository.config import parse_config, read_config, write_config  # noqa: E402
from model_release.repository.lint import lint_repository  # noqa: E402
from model_release.workspace import Workspace  # noqa: E402
from tests.repository.support import export_result, intake_result, make_spec, sklearn_onnx  # noqa: E402


def _copy_renamed(source: Path, target: Path, names: dict[str, str]) -> None:
    """Copy every model of ``source`` into ``target`` renamed by ``names`` (configs and BLS code)."""
    for model_dir in source.iterdir():
        new_dir = target / names[model_dir.name]
        shutil.copytree(model_dir, new_dir)
        config = read_config(new_dir / "config.pbtxt")
        config.name = names[config.name]
        for step in config.ensemble_scheduling.step:
            step.model_name = names[step.model_name]
        write_config(new_dir / "config.pbtxt", config)
        for code in new_dir.glob("*/model.py"):
            text = code.read_text()
            for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
                text = text.replace(repr(old), repr(new))
            code.write_text(text)


def build(root: Path) -> Path:
    onnx = root / "onnx"
    sklearn_onnx(onnx / "lr.onnx", "lr")
    sklearn_onnx(onnx / "tree.onnx", "tree")
    export = export_result(onnx / "lr.onnx")
    shapes = {
        "clf": ({"shape": "classifier", "preprocess": True, "labels": ["a", "b", "c"]}, 200),
        "cas": ({"shape": "cascade", "cascade": {"small": "release", "large": "tree.onnx", "threshold": 0.8}}, 66),
        "one": ({"shape": "single"}, 2),
    }
    repo = root / "models"
    repo.mkdir()
    for prefix, (repository, copies) in shapes.items():
        spec = make_spec(prefix, base_dir=onnx, **repository)
        result = assemble(spec, intake_result(), export, Workspace(f"bench-{prefix}", root / "ws"))
        source = Path(result.repository_dir)
        for i in range(copies):
            names = {m: m.replace(prefix, f"{prefix}{i:03d}", 1) for m in result.models}
            _copy_renamed(source, repo, names)
    return repo


def _time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = build(Path(tmp))
        configs = sorted(repo.glob("*/config.pbtxt"))
        count = len(configs)
        report = lint_repository(repo)
        assert report.ok and not report.warnings, [str(f) for f in report.findings[:5]]
        assert len(report.load_order) == count

        lint_s = _time(lambda: lint_repository(repo), args.repeat)
        parse_s = _time(lambda: [parse_config(p.read_text()) for p in configs], args.repeat)
        print(f"models: {count} ({len(list(repo.glob('*/*/model.py')))} python, "
              f"{sum(1 for p in configs if 'ensemble' in p.read_text())} ensembles)")
        print(f"lint:     {lint_s:.3f} s  ({lint_s / count * 1000:.2f} ms per model; target < 2 s: "
              f"{'met' if lint_s < 2 else 'MISSED'})")
        print(f"baseline: {parse_s:.3f} s  (text_format.Parse of every config.pbtxt)")
        print(f"ratio lint / baseline: {lint_s / parse_s:.2f}x")
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (the figures scale with it; "
              "the ratio much less)")


if __name__ == "__main__":
    main()
