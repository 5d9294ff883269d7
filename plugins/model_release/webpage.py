"""Self-contained HTML pages: inline CSS, plots as inline SVG from matplotlib, no script, no remote asset.

Shared by the canary's report (:mod:`model_release.canary.report.page`) and a channel's history page in
the store (:mod:`model_release.store.history_page`). Every page carries a Content-Security-Policy
that forbids scripts and any load from anywhere (``default-src 'none'``), so a page that tried to
fetch something would say so in the browser's console instead of silently reaching out; it opens
the same offline, from a workspace, an artifact store or an e-mail attachment.

matplotlib is imported only when a plot is drawn (pages are written by stages, never at import time).
"""

from __future__ import annotations

import html
import io
import math
import re
from typing import Any

#: the colours of the two models in every plot (colour-blind safe: blue and orange)
CANDIDATE_COLOUR = "#0969da"
CHAMPION_COLOUR = "#d4731c"
FAILED_COLOUR = "#cf222e"
PASSED_COLOUR = "#1a7f37"

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;max-width:78rem;color:#1f2328;padding:1rem 1.2rem 3rem}
h1{font-size:1.35rem;margin:.2rem 0 .3rem} h2{font-size:1.1rem;margin:1.6rem 0 .5rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
h3{font-size:.95rem;margin:1rem 0 .3rem}
.badge{display:inline-block;padding:.1rem .55rem;border-radius:.3rem;color:#fff;font-weight:600;font-size:.95rem;vertical-align:middle}
.pass{background:#1a7f37}.fail{background:#cf222e}.skip{background:#6e7781}.warn{background:#9a6700}
.muted{color:#59636e} .small{font-size:12px} .bad{color:#cf222e;font-weight:600} .good{color:#1a7f37;font-weight:600}
.box{overflow-x:auto;max-width:100%;margin:.3rem 0}
table{border-collapse:collapse;margin:0;font-size:13px} td,th{border:1px solid #d0d7de;padding:.18rem .45rem;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.failed td{background:#ffebe9} tr.skipped td{color:#59636e}
pre{background:#f6f8fa;padding:.6rem;overflow:auto;font-size:12px;max-height:40rem}
details{margin:.4rem 0;border:1px solid #d0d7de;border-radius:.3rem;padding:.3rem .6rem}
summary{cursor:pointer;font-weight:600}
.plots{display:flex;flex-wrap:wrap;gap:1rem;align-items:flex-start}
figure.plot{margin:0;border:1px solid #d0d7de;border-radius:.3rem;padding:.5rem;background:#fff;max-width:100%}
figure.plot svg{display:block;max-width:100%;height:auto}
figure.plot figcaption{font-size:12px;color:#59636e;max-width:36rem;margin-top:.3rem}
figure.plot .placeholder{display:flex;align-items:center;justify-content:center;text-align:center;min-height:9rem;
 min-width:18rem;max-width:34rem;padding:1rem;background:repeating-linear-gradient(45deg,#f6f8fa,#f6f8fa 8px,#fff 8px,#fff 16px);color:#59636e}
"""


def finite(value: Any) -> Any:
    """JSON has no NaN/Inf: ``value`` with them written as strings, so any JSON reader can open it."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: list[str], *, css: str = "") -> str:
    """A whole page: the policy, the style, the body parts."""
    return "\n".join([
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>{esc(title)}</title><style>{CSS}{css}</style></head><body>",
        *body,
        "</body></html>",
    ])


def new_figure(width: float, height: float, *, layout: str | None = None) -> Any:
    """A matplotlib Figure (no pyplot, so no GUI backend and no global state).

    Args:
        layout: matplotlib's layout engine; ``None`` (every plot of the pages) leaves the axes where
            :func:`fixed_margins` puts them: one draw when saved, where constrained layout draws several
            times (benchmarks/bench_report_plots.py compares them).
    """
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout=layout)


#: inches: a tick label's gap to its axis, an axis label's line, a title's line, one legend row above the axes
TICK_PAD, LABEL_LINE, TITLE_LINE, LEGEND_ROW = 0.1, 0.24, 0.3, 0.3
#: the tick labels' size used to measure them (points; the page draws at 9, titles at 10)
TEXT_PT = 10.0


#: the bottom margin under a numeric x axis with a label
X_NUMBERS = 0.18 + TICK_PAD + LABEL_LINE + 0.08


def text_inches(texts: Any, size: float = TEXT_PT) -> float:
    """The widest of ``texts`` at ``size`` points, in inches: the width matplotlib lays the text out with, nothing drawn.

    Read from the font's glyph metrics as the SVG renderer reads them (about 1 ms a text), where the
    outline's extents (``TextPath(...).get_extents()``, within 0.02 in of it) took 5-70 ms.
    """
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    prop = FontProperties(family=["DejaVu Sans", "sans-serif"], size=size)
    widths = [text_to_path.get_text_width_height_descent(str(t), prop, ismath=False)[0] for t in texts if str(t).strip()]
    return max(widths, default=0.0) / 72


def number_inches(values: Any) -> float:
    """How wide the tick labels of an axis spanning ``values`` can be (its largest magnitude, signed)."""
    import numpy as np

    finite = [abs(float(v)) for v in np.ravel(np.asarray(values, dtype=np.float64)) if np.isfinite(v)]
    return text_inches([f"-{max(finite, default=1.0):.3g}0", "-0.000"])  # an empty axis ticks -0.04 ... 0.04


def fixed_margins(fig: Any, *, left: float, bottom: float, top: float = 0.12, right: float = 0.2,
                  wspace: float | None = None) -> Any:
    """Put the axes ``left``/``bottom``/``top``/``right`` inches from the figure's edges (``wspace``: between panels,
    a share of a panel's width); returns ``fig``."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=min(left / width, 0.6), right=1 - right / width, bottom=min(bottom / height, 0.6),
                        top=max(1 - top / height, 0.65), wspace=wspace)
    return fig


_PT = re.compile(r'(width|height)="([0-9.]+)pt"')


def svg_of(fig: Any, label: str) -> str:
    """``fig`` as an inline ``<svg>`` element: text kept as text, ids unique to ``label``, sized in px."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": label, "font.size": 9,
                                "font.family": ["DejaVu Sans", "sans-serif"], "axes.titlesize": 10}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>|<!--.*?-->", "", text, flags=re.S)
    head, rest = text.split(">", 1)
    head = _PT.sub(lambda m: f'{m.group(1)}="{round(float(m.group(2)) * 4 / 3)}"', head)
    # inside HTML the parser puts <svg> in the SVG namespace and reads xlink:href itself: no namespace URIs needed
    head = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", head)
    return f'{head} role="img" aria-label="{esc(label)}">{rest}'


def plot_html(fig: Any, label: str, caption: str) -> str:
    """A plot and its caption, as a ``<figure class="plot">``."""
    return f"<figure class='plot' data-plot='{esc(label)}'>{svg_of(fig, label)}<figcaption>{caption}</figcaption></figure>"


def placeholder_html(label: str, why: str, caption: str) -> str:
    """The place of a plot that cannot be drawn, saying why (no ground truth, no champion...)."""
    return (f"<figure class='plot none' data-plot='{esc(label)}'><div class='placeholder'>{esc(why)}</div>"
            f"<figcaption>{caption}</figcaption></figure>")


def style_axes(ax: Any) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(True, color="#eaeef2", linewidth=0.6)
    ax.set_axisbelow(True)


def legend_above(ax: Any, **kwargs: Any) -> None:
    """The legend in one row above the axes, where it never hides data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=3, fontsize=8, frameon=False, borderaxespad=0.1, **kwargs)


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def power_of_ten(value: float) -> str:
    """``value`` (a power of ten) as plain text with a superscript exponent: 10⁻⁵, 10⁰, 10³."""
    return "10" + str(round(math.log10(value))).translate(_SUPERSCRIPT) if value > 0 else ""


def decade_axis(axis: Any) -> None:
    """A log-scale axis ticked at powers of ten, labelled 10⁻⁵ in plain text.

    matplotlib's own labels there are mathtext (``$\\mathdefault{10^{-5}}$``), which it parses with
    pyparsing at about 0.1 s a label; these are the same text as unicode superscripts.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda v, _: power_of_ten(v)))
    axis.set_minor_formatter(NullFormatter())


def log_axis(axis: Any) -> None:
    """A log-scale axis labelled 1, 2, 5, 10, 20... in plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())
