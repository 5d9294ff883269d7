"""``schedule``: when a spec's scheduled DAG looks for a new candidate (cron, Airflow preset or duration)."""

from __future__ import annotations

import re

from ..safe_text import echo

_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,\-?LW#]+")
_DURATION = re.compile(r"([1-9][0-9]{0,5})([smhd])")


def check_schedule(value: str) -> str:
    """A cron expression (5 fields), an Airflow preset (``@daily``...) or a duration (``30m``, ``6h``, ``1d``)."""
    fields = value.split()
    if value in _PRESETS or _DURATION.fullmatch(value) or (len(fields) == 5 and all(_CRON_FIELD.fullmatch(f) for f in fields)):
        return value
    raise ValueError(
        f"schedule {echo(value)} is not a cron expression (5 fields, e.g. '0 6 * * *'), a preset "
        f"({', '.join(_PRESETS)}) or a duration (a number and s, m, h or d, e.g. '30m')"
    )


def schedule_value(value: str | None):  # -> str | timedelta | None
    """What Airflow's ``schedule=`` takes for a spec's schedule: the cron or preset string, or a timedelta."""
    from datetime import timedelta

    if value is None:
        return None
    m = _DURATION.fullmatch(value)
    if m is None:
        return value
    return timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[m.group(2)]: int(m.group(1))})

