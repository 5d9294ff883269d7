"""A channel's history as a page in the store: ``channels/<channel>.html``.

Every move of the channel's pointer (promotion, rollback, repair; from ``history/<channel>/``)
and every candidate the canary rejected for it (from ``rejected/``), oldest first: when, what,
which release and its verdict, its key figures, who or what did it (the pointer's ``updated_by``
and, when the release recorded one, the Airflow DAG run), and a link to each report. Above the
table, the key figures over time as a plot. Below it, the roll-outs to the serving Tritons (from
``rollouts/<channel>/``): each roll-out, its waves and the watch's figures beside the old release's
(:mod:`.rollouts_page`); a rollback the watch made names its reason in the table.

The page is derived: it is rebuilt from the store's own records and rewritten whole (a plain write,
not a conditional one; the pointer stays the only thing moved by compare-and-swap) after every
promotion, rollback, repair, kept rejection and roll-out, by :func:`refresh_channel_page`, which never fails
the operation that called it. ``model-release store page --channel C`` rewrites it by hand.
Links are relative (``../releases/<id>/reports/report.html``), so the page works wherever the
store's layout is kept: a local store, a copy of a bucket, a bucket served as a website.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import ModelReleaseError
from ..webpage import (
    CANDIDATE_COLOUR, FAILED_COLOUR, LABEL_LINE, LEGEND_ROW, PASSED_COLOUR, TICK_PAD, esc, fixed_margins, legend_above,
    new_figure, number_inches, page, placeholder_html, plot_html, style_axes,
)
from .documents import utcnow
from .keys import history_prefix, page_key, rejected_prefix
from .model_store import ModelStore
from .pointer import ChannelPointer, inspect_pointer, parse_pointer
from .rejected import rejections
from .rollouts_page import CSS as ROLLOUTS_CSS
from .rollouts_page import Rollouts, fleet_line, read_rollouts, rollback_notes, rollouts_html

log = logging.getLogger(__name__)

_ACTIONS = {"promote": "promoted", "rollback": "rolled back to", "repair": "repaired to", "rejected": "rejected"}
_PRIMARY = {"classification": ("accuracy", True), "regression": ("rmse", False)}


@dataclass
class Event:
    """One line of the page."""

    when: str
    action: str
    release_id: str
    who: str
    seq: int | None = None
    previous: str | None = None
    verdict: str = "?"
    figures: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    dag_run: str | None = None
    report: str | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def moment(self) -> datetime:
        try:
            t = datetime.fromisoformat(self.when)
        except ValueError:
            return datetime.min.replace(tzinfo=timezone.utc)
        return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _dag_run(trigger: Any) -> str | None:
    if isinstance(trigger, dict) and trigger.get("dag_run_id"):
        return f"{trigger.get('dag_id', '?')} / {trigger['dag_run_id']}"
    return None


def moves(store: ModelStore, channel: str) -> list[ChannelPointer]:
    """Every move of the channel, oldest first, read leniently: a page shows what it can (a damaged
    entry is left out with a warning; ``model-release store history`` names it as an error)."""
    entries = {}
    for info in store.backend.list(history_prefix(channel)):
        entry, problem = parse_pointer(channel, store.backend.get_bytes(info.key))
        if problem:
            log.warning("channel page: history entry %s/%s is damaged (%s); left out", store.uri, info.key, problem)
        elif entry is not None:
            entries[entry.seq] = entry
    current, _ = inspect_pointer(store, channel)
    if current is not None:
        entries.setdefault(current.seq, current)  # a move whose history entry a crashed mover left out
    return [entries[k] for k in sorted(entries)]


def events(store: ModelStore, channel: str) -> list[Event]:
    """The channel's moves and rejections, oldest first (see the module docstring)."""
    manifests: dict[str, dict[str, Any] | None] = {}
    out = []
    for entry in moves(store, channel):
        if entry.release_id not in manifests:
            got = store.read_manifest(entry.release_id)
            manifests[entry.release_id] = got[0] if got else None
        manifest = manifests[entry.release_id] or {}
        canary = manifest.get("canary") or {}
        files = manifest.get("files") or {}
        report = next((f for f in ("reports/report.html", "reports/report.json") if f in files), None)
        out.append(Event(
            when=entry.updated_at, action=entry.action, release_id=entry.release_id, who=entry.updated_by, seq=entry.seq,
            previous=entry.previous_release,
            verdict="passed" if canary.get("passed") else ("?" if not canary else "rejected"),
            figures=canary.get("figures") or {}, model=manifest.get("model") or {},
            dag_run=_dag_run(canary.get("trigger")) if entry.action == "promote" else None,
            report=f"../{store.release_prefix(entry.release_id)}{report}" if report else None,
        ))
    for r in rejections(store, channel):
        report = next((f for f in ("reports/report.html", "reports/report.json") if f in r.reports), None)
        out.append(Event(
            when=r.rejected_at, action="rejected", release_id=r.release_id, who=str(r.rejected_by.get("actor", "?")),
            verdict="rejected", figures=r.figures, model=r.model, dag_run=_dag_run(r.rejected_by),
            report=f"../{rejected_prefix(r.release_id)}{report}" if report else None, reasons=r.reasons,
            previous=r.champion,
        ))
    return sorted(out, key=lambda e: (e.moment, e.seq or 0))


def _metric(e: Event, task: str | None) -> float | None:
    if task not in _PRIMARY:
        return None
    value = ((e.figures.get("quality") or {}).get("candidate") or {}).get(_PRIMARY[task][0])
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _p99(e: Event) -> float | None:
    value = (e.figures.get("timing") or {}).get("p99_ms")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _task(evs: list[Event]) -> str | None:
    return next(((e.figures.get("quality") or {}).get("task") for e in evs if (e.figures.get("quality") or {}).get("task")), None)


_MARKERS = {"promote": ("o", PASSED_COLOUR), "rollback": ("D", "#57606a"), "repair": ("s", "#57606a"), "rejected": ("X", FAILED_COLOUR)}


def _plot(evs: list[Event], task: str | None) -> str:
    caption = ("Key figures of each release over time, as its canary measured them: promotions (green circles), "
               "rollbacks (grey diamonds: the release moved back to), rejected candidates (red crosses). The line "
               "follows what the channel served.")
    series = [("quality", lambda e: _metric(e, task), f"{_PRIMARY[task][0]} on ground truth" if task in _PRIMARY else ""),
              ("p99", _p99, "p99 latency (ms)")]
    series = [s for s in series if any(s[1](e) is not None for e in evs)]
    if not series:
        return placeholder_html("channel-figures", "No figures to plot: no release of this channel recorded any", caption)
    fig = new_figure(max(5.5, min(0.55 * len(evs) + 3.0, 11.0)), 1.9 * len(series) + 0.6)
    values = [v for _, get, _ in series for v in map(get, evs) if v is not None]
    # margins in inches, as the canary's plots: one draw when saved, where constrained layout drew several
    # (a page with five releases took 0.3 CPU-s, 45% of it laying the two plots out); below, the tick
    # labels' two lines at 7 pt; above, the legend's row
    fixed_margins(fig, left=TICK_PAD + number_inches(values) + LABEL_LINE + 0.1, bottom=TICK_PAD + 2 * 7 * 1.25 / 72 + 0.1,
                  top=LEGEND_ROW + 0.06)
    axes = fig.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
    x = list(range(1, len(evs) + 1))
    for ax, (_, get, title) in zip(axes, series):
        style_axes(ax)
        served = [(i, get(e)) for i, e in zip(x, evs) if e.action != "rejected" and get(e) is not None]
        if served:
            ax.step([i for i, _ in served], [v for _, v in served], where="post", color=CANDIDATE_COLOUR, linewidth=1.0, alpha=0.6)
        for action, (marker, colour) in _MARKERS.items():
            points = [(i, get(e)) for i, e in zip(x, evs) if e.action == action and get(e) is not None]
            if points:
                ax.scatter([i for i, _ in points], [v for _, v in points], marker=marker, color=colour, s=42, zorder=3,
                           label=_ACTIONS[action])
        ax.set_ylabel(title)
    legend_above(axes[0])
    axes[-1].set_xticks(x, [f"#{i}\n{e.moment:%m-%d %H:%M}" for i, e in zip(x, evs)], fontsize=7)
    axes[-1].set_xlim(0.5, len(evs) + 0.5)
    return plot_html(fig, "channel-figures", caption)


def _number(value: float | None, digits: str = ".4g") -> str:
    return "-" if value is None else format(value, digits)


def render(store_uri: str, channel: str, evs: list[Event], current: str | None, rollouts: Rollouts | None = None) -> str:
    """The page (see the module docstring); ``rollouts``: the roll-out records to show (None: none)."""
    rollouts = rollouts or Rollouts()
    by_watch = rollback_notes(rollouts)
    task = _task(evs)
    metric = _PRIMARY[task][0] if task in _PRIMARY else "quality"
    now = next((e for e in reversed(evs) if e.action != "rejected"), None)
    head = [f"<h1>Channel <code>{esc(channel)}</code></h1>",
            f"<p class='muted small'>{esc(store_uri)} · page written {esc(utcnow())} · {len(evs)} event(s)</p>"]
    if current:
        since = (f" since {now.moment:%Y-%m-%d %H:%M:%S} UTC ({esc(_ACTIONS[now.action])}, by {esc(now.who)})"
                 if now and now.release_id == current else "")
        head.append(f"<p><b>Now serving:</b> <code>{esc(current)}</code>{since}</p>")
    else:
        head.append("<p><b>Now serving:</b> nothing yet: no release was promoted to this channel</p>")
    head.append(fleet_line(rollouts))
    rows = []
    for i, e in enumerate(evs, 1):
        link = f"<a href='{esc(e.report)}'>report</a>" if e.report else "<span class='muted'>no report</span>"
        verdict = ("<span class='badge fail'>rejected</span>" if e.verdict == "rejected"
                   else "<span class='badge pass'>passed</span>" if e.verdict == "passed" else "<span class='muted'>?</span>")
        model = f"{e.model.get('name', '?')} v{e.model.get('version', '?')}" if e.model else "-"
        detail = ""
        if e.action == "rejected":  # the gates that failed; every reason in full on hover, and in the report
            failed = [name for name, state in (e.figures.get("gates") or {}).items() if state == "failed"]
            note = ("failed " + ", ".join(failed) if failed else (e.reasons[0] if e.reasons else "rejected")) + (
                f" (judged against {e.previous})" if e.previous else "")
            detail = " ".join(e.reasons)
        elif e.action == "rollback" and e.seq in by_watch:
            note = detail = f"{by_watch[e.seq]}; from {e.previous}"
        else:
            note = f"from {e.previous}" if e.previous else "the channel's first release"
        rows.append(
            f"<tr class='{'failed' if e.action == 'rejected' else ''}' data-action='{esc(e.action)}' data-release='{esc(e.release_id)}'>"
            f"<td class='num'>{i}</td><td title='{esc(e.when)}'>{e.moment:%Y-%m-%d %H:%M:%S}</td><td><b>{esc(_ACTIONS.get(e.action, e.action))}</b></td>"
            f"<td><code>{esc(e.release_id)}</code><br>{link}</td><td>{verdict}</td>"
            f"<td class='num'>{_number(_metric(e, task))}</td><td class='num'>{_number(_p99(e), '.3g')}</td>"
            f"<td>{esc(model)}</td><td>{esc(e.who)}</td><td>{esc(e.dag_run or '-')}</td><td class='note' title='{esc(detail)}'>{esc(note)}</td></tr>")
    table = ("<div class='box'><table class='history'><tr><th>#</th><th>when (UTC)</th><th>event</th><th>release</th>"
             f"<th>canary</th><th>{esc(metric)}</th><th>p99 ms</th><th>model</th><th>who</th><th>DAG run</th><th>note</th></tr>"
             + "".join(rows) + "</table></div>") if rows else "<p class='muted'>No event yet.</p>"
    body = head + ["<h2>Key figures over time</h2>", "<div class='plots'>" + _plot(evs, task) + "</div>",
                   "<h2>Every release and every rejection, oldest first</h2>", table, *rollouts_html(rollouts)]
    css = ("table.history td{white-space:nowrap} table.history td.note{white-space:normal;font-size:12px;min-width:14rem;"
           "max-width:30rem} " + ROLLOUTS_CSS)
    return page(f"channel {channel}: history", body, css=css)


def write_channel_page(store: ModelStore, channel: str) -> str:
    """Rebuild ``channels/<channel>.html`` from the store's records and write it; returns its URI."""
    key = page_key(channel)
    pointer, _ = inspect_pointer(store, channel)
    html = render(store.uri, channel, events(store, channel), pointer.release_id if pointer else None,
                  read_rollouts(store, channel))
    store.backend.put_bytes(key, html.encode())
    return f"{store.uri}/{key}"


def refresh_channel_page(store: ModelStore, channel: str) -> str | None:
    """:func:`write_channel_page`, best effort: a page that cannot be written is logged, never raised
    (the move or rejection that called it has happened; the page is only a view of it)."""
    try:
        uri = write_channel_page(store, channel)
    except ModelReleaseError as exc:
        log.warning("channel page of %s in %s was not rewritten: %s; rewrite it with `model-release store page "
                    "--store %s --channel %s`", channel, store.uri, exc.message, store.uri, channel)
        return None
    except Exception as exc:  # noqa: BLE001 - a view must never fail a promotion, rollback, rejection or roll-out
        log.warning("channel page of %s in %s was not rewritten (%s); rewrite it with `model-release store page "
                    "--store %s --channel %s`", channel, store.uri, type(exc).__name__, store.uri, channel)
        return None
    log.info("channel page of %s rewritten: %s", channel, uri)
    return uri
