"""The roll-outs' part of a channel's history page: each roll-out, its waves, and the watch's figures.

Read from the roll-out records (``rollouts/<channel>/<seq>.json``, written by
:mod:`model_release.serve.record`), as documents: this module imports nothing from ``serve``, and
reads a record leniently (a damaged or hand-edited one is named, never fails the page).

Per roll-out, newest first: the release, the outcome, when, how long, who and which run; per wave
its servers (before -> after, outcome, seconds) and the watch's verdict with the figures it judged
last, the new release's beside the old release's and the limit; why a stopped roll-out stopped
("rolled back by the watch: error rate 4.1% against 0.0%, limit 1%"); and, for the newest watched
roll-outs, the judged figures over the watch's time as a plot (inline SVG), waves side by side.

Bounded whatever the store holds: the newest :data:`MAX_ROLLOUTS` records are read (the count of
the others is given), a record over :data:`MAX_RECORD_BYTES` is named and not read, plots are drawn
for the newest :data:`MAX_PLOTTED` watched roll-outs only, with at most :data:`MAX_POINTS`
measurements per wave (evenly thinned, failing ones always kept), and a figure judged per server
(the p99) shows its worst server.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import ModelReleaseError
from ..spec.serve import FIGURES, RATES
from ..webpage import (
    CANDIDATE_COLOUR, CHAMPION_COLOUR, FAILED_COLOUR, LEGEND_ROW, TICK_PAD, X_NUMBERS, esc, fixed_margins, new_figure,
    number_inches, plot_html, style_axes,
)
from .keys import rollouts_prefix
from .model_store import ModelStore

log = logging.getLogger(__name__)

#: roll-outs shown on the page (the newest); older records stay in the store
MAX_ROLLOUTS = 20
#: of those, the newest this many with a watched wave get a plot
MAX_PLOTTED = 3
#: measurements per wave drawn in a plot
MAX_POINTS = 60
#: a record larger than this is named on the page, not read (a watch of days at a short interval)
MAX_RECORD_BYTES = 8 * 1024 * 1024

_BADGES = {"done": "pass", "rolled back": "fail", "stopped": "warn", "pass": "pass", "fail": "fail",
           "inconclusive": "warn"}


@dataclass
class Rollouts:
    """The roll-out records a page shows (oldest first), how many the channel has, and what was left out."""

    records: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    left_out: list[str] = field(default_factory=list)


def _seq(key: str, prefix: str) -> int | None:
    name = key[len(prefix):]
    return int(name[:-5]) if name.endswith(".json") and name[:-5].isdigit() else None


def read_rollouts(store: ModelStore, channel: str, limit: int = MAX_ROLLOUTS) -> Rollouts:
    """The newest ``limit`` roll-out records of ``channel``, oldest first (see the module docstring)."""
    prefix = rollouts_prefix(channel)
    found = sorted((seq, info) for info in store.backend.list(prefix) if (seq := _seq(info.key, prefix)) is not None)
    out = Rollouts(total=len(found))
    for seq, info in found[-limit:] if limit > 0 else []:
        where = f"{store.uri}/{info.key}"
        if info.size > MAX_RECORD_BYTES:
            out.left_out.append(f"roll-out #{seq}: its record {where} is {info.size / 2**20:.0f} MiB, over the page's "
                                f"{MAX_RECORD_BYTES // 2**20} MiB; read it from the store")
            continue
        try:
            got = store.read_json(info.key)
        except ModelReleaseError as exc:
            log.warning("channel page: roll-out record %s is damaged (%s); left out", where, exc.message)
            out.left_out.append(f"roll-out #{seq}: its record {where} is damaged; left out")
            continue
        if got is not None and isinstance(got[0].get("release_id"), str):
            out.records.append({**got[0], "seq": seq})
        elif got is not None:
            out.left_out.append(f"roll-out #{seq}: its record {where} names no release; left out")
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) else None


def show(figure: str, value: Any) -> str:
    """A watch figure as the roll-out's messages print it: shares as percentages, times in milliseconds."""
    v = _num(value)
    if v is None:
        return "no figure"
    if figure in RATES:
        text = f"{v * 100:.2f}".rstrip("0")
        return (text + "0" if text.endswith(".") else text) + "%"
    return f"{v / 1000:.3g} ms"


def _when(iso: Any) -> str:
    try:
        return f"{datetime.fromisoformat(str(iso).replace('Z', '+00:00')):%Y-%m-%d %H:%M:%S}"
    except ValueError:
        return str(iso or "?")


def rollback_notes(rollouts: Rollouts) -> dict[int, str]:
    """Pointer move number -> why the watch moved it back and by which roll-out (for the history table)."""
    notes = {}
    for r in rollouts.records:
        seq = _num(_dict(r.get("pointer_back")).get("seq"))
        if seq is not None:
            notes[int(seq)] = f"{r.get('reason') or 'rolled back by the watch'} (roll-out #{r['seq']} of {r['release_id']})"
    return notes


def fleet_line(rollouts: Rollouts) -> str:
    """One line for the page's head: the newest roll-out's release and outcome."""
    if not rollouts.records:
        return "<p><b>Serving fleet:</b> <span class='muted'>no roll-out recorded for this channel</span></p>"
    r = rollouts.records[-1]
    servers = [_dict(s) for s in _list(r.get("servers"))]
    on_it = sum(1 for s in servers if s.get("after") == r["release_id"]) - len(_list(r.get("rolled_back")))
    return (f"<p><b>Serving fleet:</b> last roll-out #{r['seq']} of <code>{esc(r['release_id'])}</code>: "
            f"{_badge(r.get('outcome'))} {esc(_when(r.get('finished_at') or r.get('started_at')))} UTC, "
            f"{max(on_it, 0)} of {len(servers)} server(s) on <code>{esc(r['release_id'])}</code></p>")


def _badge(outcome: Any) -> str:
    text = str(outcome or "?")
    if text == "running":  # written at the start and after each server: still going, or killed
        return "<span class='badge skip' title='still running, or the process that ran it was killed'>running</span>"
    return f"<span class='badge {_BADGES.get(text, 'skip')}'>{esc(text)}</span>"


def _checks_shown(measurement: dict[str, Any]) -> list[dict[str, Any]]:
    """A measurement's checks in figure order, the worst server's for a per-server figure (the p99)."""
    worst: dict[str, tuple[int, dict[str, Any]]] = {}
    checks = [_dict(c) for c in _list(measurement.get("checks"))]
    for c in checks:
        new, ceiling = _num(c.get("new")), _num(c.get("ceiling"))
        figure = str(c.get("figure"))
        if new is None or ceiling is None:
            continue
        score = new / ceiling if ceiling > 0 else math.inf
        if figure not in worst or score > worst[figure][0]:
            worst[figure] = (score, {**c, "servers": sum(1 for o in checks if o.get("figure") == figure)})
    return [worst[f][1] for f in sorted(worst, key=lambda f: FIGURES.index(f) if f in FIGURES else len(FIGURES))]


def _last_judged(watch: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The wave's last measurement that judged a figure, and its checks as shown."""
    for m in reversed([_dict(m) for m in _list(watch.get("measurements"))]):
        checks = _checks_shown(m)
        if checks:
            return m, checks
    return None


def _figures_cell(watch: dict[str, Any]) -> str:
    got = _last_judged(watch)
    if got is None:
        return "<span class='muted'>no figure judged</span>"
    m, checks = got
    lines = []
    for c in checks:
        figure = str(c["figure"])
        where = f" on {c['server']}" + (f" (worst of {c['servers']})" if c["servers"] > 1 else "") if c.get("server") else ""
        mark = "<span class='good'>ok</span>" if c.get("passed") else "<span class='bad'>over</span>"
        lines.append(f"{esc(figure)}{esc(where)}: <b>{esc(show(figure, c.get('new')))}</b> against "
                     f"{esc(show(figure, c.get('old')))}, limit {esc(show(figure, c.get('ceiling')))} {mark}")
    at = _num(m.get("at_s"))
    return "<br>".join(lines) + (f"<br><span class='muted small'>at {at:.0f} s of the wave's watch</span>" if at is not None else "")


def _server_cell(s: dict[str, Any]) -> str:
    outcome = str(s.get("outcome") or "?")
    cls = "bad" if outcome == "failed" else "muted" if outcome in ("not reached", "unchanged") else ""
    text = (f"{esc(s.get('server', '?'))}: <span class='{cls}'>{esc(outcome)}</span> "
            f"<span class='muted'>{esc(s.get('before') or '-')} &rarr; {esc(s.get('after') or '-')}</span>")
    seconds = _num(s.get("seconds"))
    text += f" <span class='muted small'>{seconds:.1f} s</span>" if seconds else ""
    return text + (f"<br><span class='bad small'>{esc(s['error'])}</span>" if s.get("error") else "")


def _waves_table(r: dict[str, Any]) -> str:
    servers = [_dict(s) for s in _list(r.get("servers"))]
    watches = {int(w["wave"]): w for w in map(_dict, _list(r.get("watch"))) if _num(w.get("wave")) is not None}
    waves = sorted({int(s["wave"]) for s in servers if _num(s.get("wave")) is not None} | set(watches))
    rows = []
    for wave in waves:
        cells = "<br>".join(_server_cell(s) for s in servers if _num(s.get("wave")) == wave) or "-"
        w = watches.get(wave)
        if w is None:
            verdict, figures = "<span class='muted'>not watched</span>", ""
        else:
            elapsed = _num(w.get("elapsed_s"))
            said = "" if w.get("outcome") == "pass" else w.get("sentence") or ""  # a pass's sentence: the figures beside
            verdict = (f"{_badge(w.get('outcome'))} <span class='small'>{esc(said)}</span>"
                       f"<br><span class='muted small'>{len(_list(w.get('measurements')))} measurement(s)"
                       + (f" in {elapsed:.0f} s" if elapsed is not None else "") + "</span>")
            figures = _figures_cell(w)
        rows.append(f"<tr data-wave='{wave}'><td class='num'>{wave}</td><td>{cells}</td><td class='note'>{verdict}</td>"
                    f"<td class='figs'>{figures}</td></tr>")
    back = [_dict(s) for s in _list(r.get("rolled_back"))]
    if back:
        rows.append("<tr class='failed'><td>back</td><td>" + "<br>".join(_server_cell(s) for s in back) +
                    "</td><td colspan='2' class='note'>re-pinned to the old release by the watch" +
                    (f"; the channel pointer moved back to <code>{esc(_dict(r['pointer_back']).get('to_release'))}</code>"
                     if r.get("pointer_back") else "") + "</td></tr>")
    return ("<div class='box'><table class='waves'><tr><th>wave</th><th>servers</th><th>watch</th>"
            "<th>figures judged last: the new release against the old, and the limit</th></tr>" + "".join(rows) +
            "</table></div>") if rows else "<p class='muted'>No server was reached.</p>"


def _thin(ms: list[dict[str, Any]], limit: int = MAX_POINTS) -> list[dict[str, Any]]:
    """At most about ``limit`` measurements, evenly spaced; failing ones and the last always kept."""
    if len(ms) <= limit:
        return ms
    step = len(ms) / limit
    keep = {int(i * step) for i in range(limit)} | {len(ms) - 1} | {i for i, m in enumerate(ms) if m.get("status") == "fail"}
    return [ms[i] for i in sorted(keep)]


def _series(r: dict[str, Any]) -> tuple[dict[str, list[tuple[float, float | None, float | None, float, bool]]], list[tuple[float, int]]]:
    """Per figure the points ``(t, new, old, ceiling, failed)`` over the roll-out's watch; and each wave's start."""
    series: dict[str, list[tuple[float, float | None, float | None, float, bool]]] = {}
    starts, offset = [], 0.0
    for w in sorted((_dict(w) for w in _list(r.get("watch"))), key=lambda w: _num(w.get("wave")) or 0):
        starts.append((offset, int(_num(w.get("wave")) or 0)))
        for m in _thin([_dict(m) for m in _list(w.get("measurements"))]):
            t = offset + (_num(m.get("at_s")) or 0.0)
            for c in _checks_shown(m):
                scale = 100.0 if c["figure"] in RATES else 0.001
                new, old, ceiling = (_num(c.get(k)) for k in ("new", "old", "ceiling"))
                series.setdefault(str(c["figure"]), []).append(
                    (t, new * scale, old * scale if old is not None else None, ceiling * scale, not c.get("passed")))
        offset += _num(w.get("elapsed_s")) or 0.0
    return series, starts


def _plot(r: dict[str, Any]) -> str | None:
    """The roll-out's judged figures over the watch's time, the old release's beside them (None: nothing judged)."""
    series, starts = _series(r)
    if not series:
        return None
    fig = new_figure(7.5, 1.45 * len(series) + 0.7)
    values = [v for points in series.values() for p in points for v in p[1:4] if v is not None]
    # margins in inches (see history_page._plot): the y label's two lines at 8 pt; the legend's row above
    # the first axes, 12% of an axes' height above it; the x tick numbers and label below
    fixed_margins(fig, left=TICK_PAD + number_inches(values) + 2 * 8 * 1.25 / 72 + 0.1, bottom=X_NUMBERS,
                  top=0.12 * 1.3 + LEGEND_ROW + 0.08)
    axes = fig.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (figure, points) in zip(axes, series.items()):
        style_axes(ax)
        t = [p[0] for p in points]
        ax.plot(t, [p[1] for p in points], marker="o" if len(points) <= 30 else None, markersize=3, linewidth=1.2,
                color=CANDIDATE_COLOUR, label=f"new: {r['release_id']}")
        old = [(p[0], p[2]) for p in points if p[2] is not None]
        if old:
            ax.plot([p[0] for p in old], [p[1] for p in old], linewidth=1.0, color=CHAMPION_COLOUR, label="old release")
        ax.step(t, [p[3] for p in points], where="post", linestyle="--", linewidth=1.0, color=FAILED_COLOUR, label="limit")
        bad = [p for p in points if p[4]]
        if bad:
            ax.scatter([p[0] for p in bad], [p[1] for p in bad], marker="X", s=46, color=FAILED_COLOUR, zorder=3,
                       label="over the limit")
        for x, wave in starts:
            ax.axvline(x, color="#8c959f", linewidth=0.8, linestyle=":")
        ax.set_ylabel(f"{figure}\n({'%' if figure in RATES else 'ms'})", fontsize=8)
        ax.set_ylim(bottom=0)
    for x, wave in starts:
        axes[0].annotate(f"wave {wave}", (x, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -10),
                         textcoords="offset points", fontsize=7, color="#59636e")
    axes[0].legend(loc="lower left", bbox_to_anchor=(0.0, 1.12), ncol=4, fontsize=8, frameon=False, borderaxespad=0.1)
    axes[-1].set_xlabel("seconds into the roll-out's watch (waves one after another)")
    caption = (f"Roll-out #{r['seq']}: each figure the watch judged, per measurement: the new release (blue) beside the "
               "old release's in the same interval or carried from earlier waves (orange), and the limit (dashed); "
               "a red cross is a measurement over its limit. A per-server figure (p99) shows its worst server.")
    return plot_html(fig, f"rollout-{r['seq']}", caption)


def _rollout_html(r: dict[str, Any], *, open_: bool, plotted: bool) -> str:
    seconds = _num(r.get("seconds"))
    who = f"by {esc(r.get('who') or '?')}" + (f" · run {esc(r['run'])}" if r.get("run") else "")
    summary = (f"<summary>#{r['seq']} <code>{esc(r['release_id'])}</code> {_badge(r.get('outcome'))} "
               f"<span class='muted'>{esc(_when(r.get('started_at')))} UTC"
               + (f" · {seconds:.0f} s" if seconds is not None else "") + f" · {who}</span></summary>")
    parts = [summary]
    if r.get("reason"):
        parts.append(f"<p class='reason {'bad' if r.get('outcome') == 'rolled back' else ''}'>{esc(r['reason'])}</p>")
    parts.append(_waves_table(r))
    if r.get("serving"):
        parts.append(f"<p class='muted small'>{esc(r['serving'])}</p>")
    if plotted:
        drawn = _plot(r)
        if drawn:
            parts.append("<div class='plots'>" + drawn + "</div>")
    return (f"<details class='rollout' data-rollout='{r['seq']}' data-release='{esc(r['release_id'])}' "
            f"data-outcome='{esc(r.get('outcome') or '')}'{' open' if open_ else ''}>" + "".join(parts) + "</details>")


def _watched(r: dict[str, Any]) -> bool:
    return any(_list(_dict(w).get("measurements")) for w in _list(r.get("watch")))


def rollouts_html(rollouts: Rollouts) -> list[str]:
    """The page's roll-out section: a heading, the roll-outs newest first, what was left out."""
    head = "<h2>Roll-outs to the serving Tritons, newest first</h2>"
    if not rollouts.records and not rollouts.left_out:
        return [head, "<p class='muted'>No roll-out yet.</p>"]
    newest = list(reversed(rollouts.records))
    plotted = {r["seq"] for r in [r for r in newest if _watched(r)][:MAX_PLOTTED]}
    body = []
    for i, r in enumerate(newest):
        try:
            body.append(_rollout_html(r, open_=i == 0 or r.get("outcome") in ("rolled back", "stopped") and i < 3,
                                      plotted=r["seq"] in plotted))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a hand-edited record: named, never fatal
            log.warning("channel page: roll-out #%s could not be shown (%s: %s)", r.get("seq"), type(exc).__name__, exc)
            body.append(f"<p class='muted'>Roll-out #{esc(r.get('seq'))}: its record could not be shown "
                        f"({esc(type(exc).__name__)}); read it from the store.</p>")
    older = rollouts.total - len(rollouts.records) - len(rollouts.left_out)
    notes = list(rollouts.left_out)
    if older > 0:
        notes.append(f"{older} older roll-out(s) not shown: the page shows the newest {MAX_ROLLOUTS}; every record is "
                     "kept in the store under rollouts/")
    return [head, *body, *(f"<p class='muted small'>{esc(n)}</p>" for n in notes)]


CSS = ("details.rollout summary code{font-weight:600} details.rollout p.reason{margin:.3rem 0}"
       " table.waves td.figs{font-size:12px;min-width:22rem} table.waves td.note{min-width:14rem;max-width:30rem}")
