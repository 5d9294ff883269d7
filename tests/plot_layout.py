"""What a plot drawn at fixed margins must hold (the canary report's and the channel page's): its texts
inside its figure, no two tick labels of an axis overlapping. Shared by their tests."""

from __future__ import annotations

from typing import Any


def capture_plots(monkeypatch: Any, module: Any) -> list[tuple[str, Any]]:
    """Every figure ``module`` hands to its ``plot_html`` from now on, with its label, as a list that fills up;
    the page is still drawn as it would be."""
    drawn: list[tuple[str, Any]] = []
    real = module.plot_html

    def keep(fig: Any, label: str, caption: str) -> str:
        drawn.append((label, fig))
        return real(fig, label, caption)

    monkeypatch.setattr(module, "plot_html", keep)
    return drawn


def agg_renderer(fig: Any) -> Any:
    """Matplotlib's Agg renderer for the figure; imported here, not at collection on every xdist worker."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return FigureCanvasAgg(fig).get_renderer()


def assert_laid_out(fig: Any, label: str) -> None:
    """``fig`` has no layout engine (fixed margins), every text drawn lies inside it, and no two unrotated
    x tick labels of an axis overlap."""
    assert fig.get_layout_engine() is None, label  # fixed margins, not constrained layout
    renderer = agg_renderer(fig)
    fig.draw(renderer)
    drawn = fig.get_tightbbox(renderer)  # inches: everything drawn, texts included
    width, height = fig.get_size_inches()
    assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01 and drawn.x1 <= width + 0.01 and drawn.y1 <= height + 0.01, (
        label, drawn.bounds, (width, height))
    for ax in fig.axes:
        ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels()
                 if t.get_visible() and t.get_text() and not t.get_rotation()]  # rotated ones: their boxes, not their text, meet
        for a, b in zip(ticks, ticks[1:]):
            assert not a.overlaps(b), (label, "x tick labels overlap")
