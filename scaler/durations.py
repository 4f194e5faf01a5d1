"""Durations as users write them: a bare number of seconds, or ``500ms``, ``90s``, ``5m``, ``1h``,
or a sum of those (``1m30s``)."""

from __future__ import annotations

import math
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; raises ValueError naming what was expected."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        pos, seconds = 0, 0.0
        for match in _PART.finditer(value):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos == 0 or pos != len(value):
            raise ValueError(
                "expected a duration: seconds (30, 1.5) or a number with a unit "
                "(500ms, 90s, 5m, 1h)"
            ) from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError("expected a finite, non-negative duration")
    return seconds


def format_duration(seconds: float) -> str:
    """A short readable form, for messages."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"
