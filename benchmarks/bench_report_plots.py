"""The canary report's plots: render time with fixed margins against matplotlib's constrained layout, in one run.

Builds the plots sections of two reports from :mod:`model_release.canary.report.plotdata` (a
classifier judged against a served champion, with ground truth, tuning and two parity outputs; a
regressor likewise): 14 plots, as one release of each kind draws. Renders every page ``--rounds``
times with the report's own layout (fixed margins) and with constrained layout (each figure made
with ``layout="constrained"``, the margins left to it), alternating, and prints the seconds per plot
of each and their ratio::

    .venv/bin/python benchmarks/bench_report_plots.py [--rounds 3] [--out /tmp/plots]

``--out`` writes the last round's pages to look at: report-classifier.html, report-regressor.html and
the same drawn with constrained layout (report-classifier-constrained.html...).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))

from model_release.canary.judge.quality import Classified  # noqa: E402
from model_release.canary.measure.load import Histogram  # noqa: E402
from model_release.canary.report import plotdata as pd  # noqa: E402
from model_release.canary.report import plots  # noqa: E402
from model_release.canary.report.page import render_html  # noqa: E402
from model_release.webpage import new_figure  # noqa: E402

CLASSES = ["setosa", "versicolor", "virginica-long-label-x"]


def _latency(rng: np.random.Generator, scale: float) -> dict[str, Any]:
    h = Histogram()
    for s in rng.lognormal(np.log(scale), 0.5, 5000) / 1e3:
        h.record(float(s))
    return pd.latency_buckets(h)


def _common(rng: np.random.Generator) -> dict[str, Any]:
    served = rng.random((150, 3)).astype(np.float32)
    return {
        "latency": {"source": "load phase", "candidate": _latency(rng, 3.0), "champion": _latency(rng, 3.4)},
        "parity_errors": {"probabilities": pd.parity_errors(served, served + rng.normal(0, 1e-7, served.shape), atol=1e-5, rtol=1e-4),
                          "label": pd.parity_errors(served[:, 0], served[:, 0], atol=None, rtol=None)},
    }


TUNING = {"trials": [{"setting": {"instances": i, "dynamic_batching": True}, "throughput_rows_per_s": 9000.0 + 2500 * i,
                      "p99_ms": 20.0 + 4 * i, "errors": 0} for i in (1, 2, 3)],
          "chosen": {"instances": 2, "dynamic_batching": True}, "p99_limit_ms": 40.0}
BASE = {"release": "iris", "release_id": "iris-2", "passed": True, "verdict": "passed", "gates": [{"name": "contract", "passed": True}],
        "model": {"name": "iris-classifier", "version": "2"}, "tuning": TUNING,
        "champion": {"kind": "served", "name": "release iris-1 (iris-classifier v1)", "release_id": "iris-1"},
        "load_phase": {"concurrency": 4, "batch_rows": 16}}


def classifier_report(rng: np.random.Generator) -> dict[str, Any]:
    truth = rng.integers(0, 3, 150)
    answer = np.where(rng.random(150) < 0.9, truth, rng.integers(0, 3, 150))
    theirs = np.where(rng.random(150) < 0.9, truth, rng.integers(0, 3, 150))
    mine = Classified(served=CLASSES, truth=truth, predicted=answer, scores=None)
    champion = Classified(served=CLASSES, truth=truth, predicted=theirs, scores=None)
    labels = np.asarray(CLASSES, dtype=object)
    section = {"classes": pd.classes_section(mine, champion), **pd.agreement_section(labels[answer], labels[theirs], CLASSES),
               **_common(rng)}
    return {**BASE, "plots": section, "quality": {"task": "classification", "candidate": {"accuracy": 0.9}}}


def regressor_report(rng: np.random.Generator) -> dict[str, Any]:
    target = rng.normal(150.0, 60.0, 400)
    mine, theirs = target + rng.normal(0, 12, 400), target + rng.normal(0, 14, 400)
    section = {"residuals": pd.residual_sample(target, mine, theirs), "predicted": pd.numeric_histograms(mine, theirs),
               **_common(rng)}
    return {**BASE, "plots": section, "quality": {"task": "regression", "candidate": {"rmse": 12.0}}}


@contextlib.contextmanager
def constrained() -> Iterator[None]:
    """The plots as they were drawn before: constrained layout, no fixed margins."""
    figure, margins = plots._figure, plots.fixed_margins
    plots._figure = lambda w, h: new_figure(w, h, layout="constrained")
    plots.fixed_margins = lambda fig, **_: fig
    try:
        yield
    finally:
        plots._figure, plots.fixed_margins = figure, margins


def render(reports: dict[str, dict[str, Any]]) -> tuple[float, dict[str, str], int]:
    t = time.perf_counter()
    pages = {name: render_html(report) for name, report in reports.items()}
    drawn = sum(len(re.findall(r"<figure class='plot' data-plot=", p)) for p in pages.values())
    return time.perf_counter() - t, pages, drawn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the last round's pages here")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    reports = {"classifier": classifier_report(rng), "regressor": regressor_report(rng)}
    render(reports)  # fonts, imports and caches warm before either is timed
    seconds = {"fixed margins": 0.0, "constrained layout": 0.0}
    drawn = 0
    for _ in range(args.rounds):
        with constrained():
            s, before, _ = render(reports)
        seconds["constrained layout"] += s
        s, pages, drawn = render(reports)
        seconds["fixed margins"] += s
    print(f"{drawn} plots per round (classifier + regressor report), {args.rounds} rounds")
    for name, s in seconds.items():
        print(f"  {name:<20} {s / (args.rounds * drawn):6.3f} s per plot   {s / args.rounds:6.2f} s per round")
    print(f"constrained / fixed = {seconds['constrained layout'] / seconds['fixed margins']:.2f}x")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, page in pages.items():
            (args.out / f"report-{name}.html").write_text(page)
            (args.out / f"report-{name}-constrained.html").write_text(before[name])
        print(f"pages: {', '.join(str(args.out / f'report-{n}.html') for n in pages)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
