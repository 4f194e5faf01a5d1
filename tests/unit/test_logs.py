"""The log formats: JSON, one object a line with the fields a call passes as ``extra``; text, with
figures as people write them."""

from __future__ import annotations

import json
import logging
import math
import sys
from typing import Any

import pytest

from brokers.base import Precision
from scaler.decision_log import decision_text
from scaler.logs import JsonFormatter, figure
from scaler.policy import PolicyState, decide
from scaler.signals import Figure, QueueSignals
from scaler.spec import parse_metadata


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


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("age", 143.38741779327393, "s"), "age=143.4s"),
        (("age", 3.0, "s"), "age=3s"),
        (("age", 143.38741779327393, "s", Precision.LOWER_BOUND), "age>=143.4s"),
        (("age", 12.04, "s", Precision.ESTIMATE), "age=12s (estimate)"),
        (("age", None, "s", Precision.UNKNOWN), "age=unknown"),
        (("drain", math.inf, "s"), "drain=never"),
        (("arrivals", 2.5, "/s"), "arrivals=2.5/s"),
        (("arrivals", 0.0333333, "/s"), "arrivals=0.03/s"),
        (("arrivals", 0.0, "/s"), "arrivals=0/s"),
        (("arrivals", None, "/s", Precision.UNKNOWN), "arrivals=unknown"),
    ],
)
def test_figures_read_as_people_write_them(args: tuple[Any, ...], shown: str) -> None:
    assert figure(*args) == shown


def test_a_decision_line_says_unknown_and_leaves_out_what_the_format_does_not_show() -> None:
    spec = parse_metadata(
        {"url": "redis://localhost", "queue": "default", "format": "sidekiq"}
        | {"workerThroughput": "2", "maxWorkers": "20"}
    )
    signals = QueueSignals(
        observed_at=0.0,
        depth=120,
        in_flight=None,
        consumers=None,
        oldest_age=Figure(143.38741779327393, Precision.EXACT, "payload:enqueued_at"),
        arrival_rate=Figure.unknown(),
        completion_rate=Figure(1.8571428, Precision.LOWER_BOUND, "list-marker"),
        time_to_drain=Figure.unknown(),
        rate_span=30.0,
    )
    decision, _ = decide(signals, spec, 0.0, PolicyState())
    text = decision_text(("shop", "sidekiq-workers", spec), signals, decision)
    assert text == (
        "shop/sidekiq-workers redis queue 'default' (sidekiq): 1 worker (draining backlog); "
        "depth=120 age=143.4s arrivals=unknown completions>=1.86/s drain=unknown ceiling=20"
    )
