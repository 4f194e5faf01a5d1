"""The trigger metadata's keys and typed access to their values.

Every failure is an :class:`~scaler.errors.InvalidMetadata` naming the key, the value (never a
URL's) and what was expected.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from scaler.durations import parse_duration
from scaler.errors import InvalidMetadata

#: keys KEDA itself sets on every external trigger; accepted and ignored
KEDA_KEYS = frozenset({"scalerAddress", "enableTLS", "unsafeSsl"})
#: the suffix KEDA resolves from the scale target's environment
FROM_ENV = "FromEnv"

VALUE_KEYS = frozenset(
    {
        "broker", "connection", "url", "managementUrl", "queue", "format", "consumerGroup",
        "keyPrefix", "timestampField", "timestampUnit", "oldestEnd", "targetAge",
        "targetDrainTime", "workerThroughput", "jobDuration", "workerConcurrency", "minWorkers",
        "maxWorkers", "dependencies", "metric", "activationAge", "activationDepth", "rateWindow",
        "sampleInterval", "prioritySteps", "prioritySeparator",
    }
)  # fmt: skip
_ALL_KEYS = sorted(VALUE_KEYS | KEDA_KEYS | {k + FROM_ENV for k in VALUE_KEYS})
T = TypeVar("T")
#: what a mistyped key or choice looks like; only such words get a suggestion
_WORD = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def nearest(word: str, choices: Sequence[str], *, cutoff: float) -> str | None:
    """The choice nearest to a mistyped ``word``, if one is near enough. None at once for what is
    no typo of a word (spaces, quotes, control or non-ASCII characters, over 64 characters):
    difflib's comparison with every choice was most of the cost of refusing random keys."""
    if not _WORD.fullmatch(word):
        return None
    close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return close[0] if close else None


def resolve_keys(metadata: Mapping[str, str]) -> dict[str, str]:
    """Reject unknown keys; fold ``xxxFromEnv`` into ``xxx``; drop KEDA's own keys."""
    values: dict[str, str] = {}
    for key, value in metadata.items():
        if key in KEDA_KEYS:
            continue
        base = key.removesuffix(FROM_ENV) if key.endswith(FROM_ENV) else key
        if base not in VALUE_KEYS:
            close = nearest(key, _ALL_KEYS, cutoff=0.6)
            hint = f"; did you mean {close!r}?" if close else ""
            raise InvalidMetadata(
                key,
                f"unknown key (value {shown_value(key, value)}){hint} Valid keys: {', '.join(sorted(VALUE_KEYS))}",
            )
        if base in values:
            raise InvalidMetadata(
                key, f"both {base!r} and {base + FROM_ENV!r} are set; set only one"
            )
        values[base] = value
    return values


def shown_value(key: str, value: str) -> str:
    """A value as it may appear in a message: URLs never do, they may hold a password."""
    if "url" in key.lower() or "://" in value or "@" in value:
        return "<hidden: may hold a password>"
    return repr(value)


class MetadataReader:
    """Typed access to the metadata values, each failure naming key, value and expectation."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        value = self.values.get(key)
        return value.strip() if value is not None else None

    def fail(self, key: str, expected: str) -> InvalidMetadata:
        return InvalidMetadata(
            key, f"got {shown_value(key, self.values.get(key, ''))}; expected {expected}"
        )

    def _convert(self, key: str, convert: Callable[[str], T], expected: str) -> T | None:
        text = self.get(key)
        if text is None:
            return None
        try:
            return convert(text)
        except ValueError:
            raise self.fail(key, expected) from None

    def duration(self, key: str, default: float, *, positive: bool = False) -> float:
        seconds = self._convert(key, parse_duration, "a duration such as 30, 500ms, 90s, 5m or 1h")
        if seconds is None:
            return default
        if positive and seconds <= 0:
            raise self.fail(key, "a duration above zero")
        return seconds

    def integer(self, key: str, default: int | None, *, minimum: int) -> int | None:
        number = self._convert(key, int, f"a whole number, at least {minimum}")
        if number is None:
            return default
        if number < minimum:
            raise self.fail(key, f"a whole number, at least {minimum}")
        return number

    def number(self, key: str) -> float | None:
        number = self._convert(key, float, "a number above zero")
        if number is not None and (not math.isfinite(number) or number <= 0):
            raise self.fail(key, "a number above zero")
        return number

    def choice(self, key: str, choices: list[str], default: str) -> str:
        text = self.get(key)
        if text is None:
            return default
        if text not in choices:
            close = nearest(text, choices, cutoff=0.5)
            hint = f" (did you mean {close!r}?)" if close else ""
            raise self.fail(key, f"one of {', '.join(choices)}{hint}")
        return text
