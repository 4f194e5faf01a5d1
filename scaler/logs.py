"""Log formats: ``text`` for people, ``json`` (one object a line) for log pipelines.

In text, figures read as people write them (:func:`figure`: ``age=143.4s``, ``arrivals>=2.5/s``,
``drain=unknown``). In JSON, the fields a call passes with ``extra=`` (a decision's inputs, say) become keys of the
object beside ``time``, ``level``, ``logger`` and ``message``. Unknown figures are ``null``;
an unbounded figure (a backlog that never drains) is the string ``"inf"``, as JSON has no
infinity.
"""

from __future__ import annotations

import datetime
import json
import logging
import math

from brokers.base import Precision

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: attributes every LogRecord has; anything else on a record came from ``extra=``
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def _plain(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def figure(
    name: str, value: float | None, unit: str, precision: Precision = Precision.EXACT
) -> str:
    """``name=value`` for a person: at most 2 decimals (``age=143.4s``, ``arrivals=0.03/s``),
    ``>=`` for a lower bound, ``(estimate)`` for an estimate, ``unknown``, and ``never`` for an
    unbounded time (a backlog that does not drain)."""
    if value is None:
        return f"{name}=unknown"
    if math.isinf(value):
        return f"{name}=never"
    digits = 1 if unit == "s" else 2
    shown = f"{value:.{digits}f}".rstrip("0").rstrip(".") + unit
    if precision is Precision.LOWER_BOUND:
        return f"{name}>={shown}"
    if precision is Precision.ESTIMATE:
        return f"{name}={shown} (estimate)"
    return f"{name}={shown}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with the record's ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = _plain(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str, log_format: str) -> None:
    """Configure the root logger for the command line (never on import)."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    logging.basicConfig(level=level.upper(), handlers=[handler])
