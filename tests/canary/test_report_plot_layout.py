"""The report's plots at fixed margins: every text inside its figure, no two tick labels of an axis overlapping."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from model_release.canary.report import plots

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_report_plots import classifier_report, regressor_report  # noqa: E402

from model_release.canary.report.page import render_html  # noqa: E402

from ..plot_layout import agg_renderer, assert_laid_out, capture_plots  # noqa: E402


@pytest.fixture
def figures(monkeypatch):  # noqa: ANN201
    return capture_plots(monkeypatch, plots)


@pytest.mark.parametrize("make", [classifier_report, regressor_report])
def test_every_text_of_every_plot_lies_inside_its_figure(figures, make) -> None:  # noqa: ANN001
    render_html(make(np.random.default_rng(1)))
    assert len(figures) >= 6
    for label, fig in figures:
        assert_laid_out(fig, label)


def test_long_class_names_stay_inside_the_confusion_matrix_figure(figures) -> None:
    labels = ["a-very-long-class-name-1", "WWWWWWWWWWWWWWWWWW", "c"]
    cm = {"labels": labels, "matrix": [[5, 1, 0], [0, 4, 2], [1, 0, 6]], "rows_are": "ground truth", "columns_are": "candidate"}
    plots.confusion(cm, "confusion", "candidate against ground truth with a long title", "caption", missing="-")
    (label, fig), = figures
    assert_laid_out(fig, label)


def test_the_parity_plot_labels_its_decades_in_plain_text_not_mathtext(figures) -> None:
    from model_release.webpage import power_of_ten

    assert [power_of_ten(v) for v in (1e-12, 1e-5, 1.0, 1e3)] == ["10⁻¹²", "10⁻⁵", "10⁰", "10³"]
    data = {"log10_edges": list(np.linspace(-12, 3, 31)), "counts": [0] * 10 + [5, 40, 3] + [0] * 17, "atol": 1e-5,
            "zero": 2, "elements": 50}
    html = plots.parity_errors("probabilities", data, "parity", "caption")
    (_, fig), = figures
    renderer = agg_renderer(fig)
    fig.draw(renderer)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_visible() and t.get_text()]
    assert "10⁻⁶" in labels and not any("$" in t for t in labels)  # mathtext is parsed at about 0.1 s a label
    assert "10⁻⁶" in html
