"""The values of a family file: a literal, or a distribution to draw one from.

``{uniform: [low, high]}``, ``{logUniform: [low, high]}``, ``{integer: [low, high]}`` (both
ends included), ``{logInteger: [low, high]}`` and ``{choice: [a, b, c]}`` or
``{choice: {a: weight, b: weight}}``; the ends of a range may be durations (``10ms``, ``30m``).
Every problem is a :class:`~scaler.simulate.scenario.ScenarioError` naming the key and what it
expected. Each distribution knows its bounds, so the tests can check every draw against them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scaler.durations import parse_duration
from scaler.simulate.scenario import ScenarioError

KINDS = ("uniform", "logUniform", "integer", "logInteger", "choice")
_EXAMPLES = (
    "a value, or one of {uniform: [low, high]}, {logUniform: [low, high]}, "
    "{integer: [low, high]}, {logInteger: [low, high]}, {choice: [a, b]}, {choice: {a: weight}}"
)


@dataclass(frozen=True, slots=True)
class Fixed:
    value: Any

    def draw(self, rng: random.Random) -> Any:
        return self.value

    @property
    def values(self) -> tuple[Any, ...]:
        return (self.value,)


@dataclass(frozen=True, slots=True)
class Uniform:
    low: float
    high: float
    log: bool = False

    def draw(self, rng: random.Random) -> float:
        if self.log:
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)


@dataclass(frozen=True, slots=True)
class Integer:
    low: int
    high: int
    log: bool = False

    def draw(self, rng: random.Random) -> int:
        if self.log:
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high + 1)))
            return min(self.high, int(value))
        return rng.randint(self.low, self.high)


@dataclass(frozen=True, slots=True)
class Choice:
    options: tuple[Any, ...]
    weights: tuple[float, ...]

    def draw(self, rng: random.Random) -> Any:
        return rng.choices(self.options, self.weights)[0]

    @property
    def values(self) -> tuple[Any, ...]:
        return self.options


Distribution = Fixed | Uniform | Integer | Choice


def parse(value: Any, key: str, *, duration: bool = False) -> Distribution:
    """The distribution at ``key``: a literal (kept as it is) or one of :data:`KINDS`."""
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in KINDS:
        if isinstance(value, dict):
            raise ScenarioError(f"{key}: got {value!r}; expected {_EXAMPLES}")
        if duration:
            _seconds(value, key)  # checked now, kept as written
        return Fixed(value)
    kind, argument = next(iter(value.items()))
    if kind == "choice":
        return _choice(argument, f"{key}.choice")
    low, high = _range(argument, f"{key}.{kind}", duration=duration)
    if kind in ("integer", "logInteger"):
        if low != int(low) or high != int(high):
            raise ScenarioError(f"{key}.{kind}: got {argument!r}; expected two whole numbers")
        if kind == "logInteger" and low < 1:
            raise ScenarioError(f"{key}.{kind}: got {argument!r}; expected a low end of at least 1")
        return Integer(int(low), int(high), log=kind == "logInteger")
    if kind == "logUniform" and low <= 0:
        raise ScenarioError(f"{key}.{kind}: got {argument!r}; expected a low end above zero")
    return Uniform(low, high, log=kind == "logUniform")


def _range(argument: Any, key: str, *, duration: bool) -> tuple[float, float]:
    if not isinstance(argument, list) or len(argument) != 2:
        raise ScenarioError(f"{key}: got {argument!r}; expected [low, high]")
    low, high = (_seconds(v, key) if duration else _number(v, key) for v in argument)
    if high < low:
        raise ScenarioError(f"{key}: got {argument!r}; expected low at most high")
    return low, high


def _choice(argument: Any, key: str) -> Choice:
    if isinstance(argument, list) and argument:
        return Choice(tuple(argument), (1.0,) * len(argument))
    if isinstance(argument, dict) and argument:
        weights = tuple(argument.values())
        if not all(_is_number(w) and w >= 0 for w in weights) or not sum(weights):
            raise ScenarioError(
                f"{key}: got {argument!r}; expected weights: numbers at least 0, not all 0"
            )
        return Choice(tuple(argument), tuple(float(w) for w in weights))
    raise ScenarioError(
        f"{key}: got {argument!r}; expected a list of options or a mapping option: weight"
    )


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def _number(value: Any, key: str) -> float:
    if not _is_number(value) or not math.isfinite(value):
        raise ScenarioError(f"{key}: got {value!r}; expected a number")
    return float(value)


def _seconds(value: Any, key: str) -> float:
    if isinstance(value, bool):
        raise ScenarioError(f"{key}: got {value!r}; expected a duration such as 500ms, 90s or 1h")
    try:
        return parse_duration(str(value))
    except ValueError:
        raise ScenarioError(
            f"{key}: got {value!r}; expected a duration such as 500ms, 90s or 1h"
        ) from None


def seconds(value: Any, key: str) -> float:
    """A drawn or literal duration in seconds (literals are kept as written until drawn)."""
    return value if isinstance(value, float) else _seconds(value, key)


def check_options(dist: Distribution, key: str, allowed: Sequence[Any] | Mapping[Any, Any]) -> None:
    """A fixed value or choice whose options must be among ``allowed``."""
    if isinstance(dist, Uniform | Integer):
        raise ScenarioError(f"{key}: expected one of {_listed(allowed)} or a choice of them")
    for option in dist.values:
        if option not in allowed:
            raise ScenarioError(f"{key}: got {option!r}; expected one of {_listed(allowed)}")


def _listed(allowed: Sequence[Any] | Mapping[Any, Any]) -> str:
    return ", ".join(str(a) for a in allowed)
