"""A failing source logs a line when it starts failing, then one a period with the count, and
its recovery; a traceback only for an unexpected exception, and only the first time."""

from __future__ import annotations

import logging

import pytest

from scaler.errors import BrokerUnavailable
from scaler.failure_log import FailureLog

log = logging.getLogger("test.failure_log")


def test_repeated_failures_are_one_line_a_period_with_their_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    failures = FailureLog(log, "redis queue 'q' (list)", every=60.0)
    error = BrokerUnavailable("redis", "q", "connection refused")
    for second in range(150):  # one failure a second for two and a half minutes
        failures.failed(error, float(second))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "sampling redis queue 'q' (list): redis queue 'q': connection refused",
        "sampling redis queue 'q' (list): 60 failures in the last 60s, the last: "
        "redis queue 'q': connection refused",
        "sampling redis queue 'q' (list): 60 failures in the last 60s, the last: "
        "redis queue 'q': connection refused",
    ]
    assert all(r.exc_info is None for r in caplog.records)  # expected errors: no traceback
    failures.succeeded()
    assert caplog.records[-1].getMessage() == (
        "sampling redis queue 'q' (list) works again, after 150 failed samples"
    )
    failures.succeeded()  # the recovery is logged once
    assert len(caplog.records) == 4


def test_a_new_failure_after_a_recovery_is_logged_at_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=log.name)
    failures = FailureLog(log, "q", every=60.0)
    failures.failed(BrokerUnavailable("redis", "q", "down"), 0.0)
    failures.succeeded()
    failures.failed(BrokerUnavailable("redis", "q", "down again"), 1.0)
    assert [r.getMessage() for r in caplog.records] == [
        "sampling q: redis queue 'q': down",
        "sampling q: redis queue 'q': down again",
    ]


def test_an_unexpected_exception_has_its_traceback_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=log.name)
    failures = FailureLog(log, "q", every=1.0)
    for second in range(3):
        try:
            raise RecursionError("maximum recursion depth exceeded")
        except RecursionError as error:
            failures.failed(error, float(second))
    assert len(caplog.records) == 3
    assert [r.exc_info is not None for r in caplog.records] == [True, False, False]
