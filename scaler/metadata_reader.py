"""The trigger metadata's keys and typed access to their values.

Every failure is an :class:`~scaler.errors.InvalidMetadata` naming the key, the value (never a
URL's) and what was expected.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import TypeVar

from brokers import registry
from brokers.suggest import nearest
from scaler.durations import parse_duration
from scaler.errors import InvalidMetadata

#: keys KEDA itself sets on every external trigger; accepted and ignored
KEDA_KEYS = frozenset({"scalerAddress", "enableTLS", "unsafeSsl"})
#: the suffix KEDA resolves from the scale target's environment
FROM_ENV = "FromEnv"


@functools.cache
def value_keys() -> frozenset[str]:
    """The keys a trigger may set: those every format reads and each format's layout keys
    (the plugins' too)."""
    return registry.CORE_KEYS | frozenset(registry.layout_keys())


@functools.cache
def _all_keys() -> list[str]:
    return sorted(value_keys() | KEDA_KEYS | {k + FROM_ENV for k in value_keys()})


T = TypeVar("T")


def resolve_keys(metadata: Mapping[str, str]) -> dict[str, str]:
    """Reject unknown keys; fold ``xxxFromEnv`` into ``xxx``; drop KEDA's own keys."""
    values: dict[str, str] = {}
    for key, value in metadata.items():
        if key in KEDA_KEYS:
            continue
        base = key.removesuffix(FROM_ENV) if key.endswith(FROM_ENV) else key
        if base not in value_keys():
            close = nearest(key, _all_keys(), cutoff=0.6)
            hint = f"; did you mean {close!r}?" if close else ""
            raise InvalidMetadata(
                key,
                f"unknown key (value {shown_value(key, value)}){hint} Valid keys: {', '.join(sorted(value_keys()))}",
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
