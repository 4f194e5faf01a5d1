"""The JSON log format: one object a line, with the fields a call passes as ``extra``."""

from __future__ import annotations

import json
import logging
import math
import sys

from scaler.logs import JsonFormatter


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("scaler.service")
    return logger.makeRecord(
        logger.name, logging.DEBUG, __file__, 1, message, args, None, extra=extra
    )


def test_a_record_is_one_json_object_with_its_extra_fields() -> None:
    line = JsonFormatter().format(
        record(
            "%s: %d workers",
            "shop/orders",
            3,
            desired_workers=3,
            oldest_age_seconds=12.5,
            time_to_drain_seconds=math.inf,
            consumers=None,
            arrivals_per_second=math.nan,
        )
    )
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "shop/orders: 3 workers"
    assert entry["level"] == "DEBUG"
    assert entry["logger"] == "scaler.service"
    assert entry["time"].endswith("+00:00")
    assert entry["desired_workers"] == 3
    assert entry["oldest_age_seconds"] == 12.5
    # JSON has no infinity or NaN: strict parsers must still read the line
    assert entry["time_to_drain_seconds"] == "inf"
    assert entry["arrivals_per_second"] == "nan"
    assert entry["consumers"] is None
    assert "args" not in entry and "msg" not in entry


def test_an_exception_is_a_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        logger = logging.getLogger("scaler")
        entry = json.loads(
            JsonFormatter().format(
                logger.makeRecord(
                    "scaler", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
                )
            )
        )
    assert entry["message"] == "failed"
    assert "ValueError: boom" in entry["exception"]
