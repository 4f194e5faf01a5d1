"""Durations as users write them in trigger metadata."""

from __future__ import annotations

import pytest

from scaler.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("30", 30.0, id="bare integer seconds"),
        pytest.param("1.5", 1.5, id="bare fractional seconds"),
        pytest.param("0", 0.0, id="zero"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("5m", 300.0, id="minutes"),
        pytest.param("1h", 3600.0, id="hours"),
        pytest.param("1m30s", 90.0, id="sum of minutes and seconds"),
        pytest.param("1h30m", 5400.0, id="sum of hours and minutes"),
        pytest.param("1s500ms", 1.5, id="sum of seconds and milliseconds"),
        pytest.param("1.5h", 5400.0, id="fractional hours"),
        pytest.param(".5s", 0.5, id="leading dot"),
        pytest.param("  90s ", 90.0, id="surrounding blanks"),
    ],
)
def test_parse_duration_accepts(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("abc", id="words"),
        pytest.param("5x", id="unknown unit"),
        pytest.param("-1", id="negative"),
        pytest.param("-5m", id="negative with unit"),
        pytest.param("1h-", id="trailing junk"),
        pytest.param("1m30", id="unit missing on last part"),
        pytest.param("1m 30s", id="blank between parts"),
        pytest.param("m", id="unit without number"),
        pytest.param("inf", id="infinity"),
        pytest.param("nan", id="not a number"),
        pytest.param("1e400", id="overflows to infinity"),
    ],
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected a"):
        parse_duration(text)


def test_parse_duration_error_names_the_accepted_forms() -> None:
    with pytest.raises(ValueError) as info:
        parse_duration("5x")
    message = str(info.value)
    for example in ("500ms", "90s", "5m", "1h"):
        assert example in message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0.5, "500ms", id="below a second in ms"),
        pytest.param(90.0, "90s", id="whole seconds"),
        pytest.param(1.5, "1.5s", id="fractional seconds"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
